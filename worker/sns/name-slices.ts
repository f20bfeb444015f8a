import { REVERSE_LOOKUP_CLASS } from '../../src/core/sns/pda.js';
import { malformed } from '../rpc/envelope.js';

/**
 * Where the name program's accounts keep what discovery reads, and the slices of them it asks
 * for: the layout the scan's classification (./scan-classify.ts), the completions and the
 * follower decode.
 */

/**
 * SPL Name Service layout: header `parent(32) | owner(32) | class(32)`, then data; reverse data is
 * `u32 LE length | UTF-8` (the SDK's `deserializeReverse`), a subdomain's starting with NUL.
 */
export const CLASS_OFFSET = 64;
export const HEADER_LEN = 96;
/**
 * Reverse-text bytes fetched inline by the scan; every account returns them, so few. 30 makes the
 * slice 66 bytes, a multiple of 3: base64 without padding, as long as for 28 bytes. Longer texts
 * are completed by `getMultipleAccounts`. Sizes: BENCHMARKS.md, "Inline reverse-text bytes".
 */
export const INLINE_TEXT_BYTES = 30;
/**
 * The `dataSlice` of the scan and subscriptions, from one byte before the owner: that byte puts
 * the class at byte 33 (a multiple of 3), so reverse records are told by comparing base64 text
 * without decoding, and the slice is 99 bytes (132 characters, no padding).
 */
export const SCAN_SLICE = Object.freeze({
  offset: 31,
  length: 1 + 32 + 32 + 4 + INLINE_TEXT_BYTES,
});
/** Offsets in a {@link SCAN_SLICE}. */
export const SLICE_AT = Object.freeze({ owner: 1, class: 33, data: 65 });

/**
 * The base64 `data` of an account, at most `maxChars` (the sliced length).
 *
 * @throws RpcCallError (final) otherwise: a provider ignoring `dataSlice` sends whole accounts,
 *   and its list would read as empty.
 */
export function base64Data(data: unknown, maxChars: number): string {
  if (
    !Array.isArray(data) ||
    data.length !== 2 ||
    typeof data[0] !== 'string' ||
    data[1] !== 'base64'
  ) {
    throw malformed('account data is not base64');
  }
  if (data[0].length > maxChars) {
    throw malformed(`account data longer than the ${maxChars} base64 characters sliced`);
  }
  return data[0];
}

/** An account's `data` bytes; see {@link base64Data}. */
export function decodeData(data: unknown, maxChars: number): Buffer {
  return Buffer.from(base64Data(data, maxChars), 'base64');
}

/** The SDK's `deserializeReverse(data, true)`: the text, minus one leading NUL. */
export function reverseText(payload: Buffer): string | undefined {
  return reverseTextAt(payload, 0, payload.length);
}

/** {@link reverseText} of the payload at `from` to `to` in `bytes`, sliced from none of it. */
export function reverseTextAt(bytes: Buffer, from: number, to: number): string | undefined {
  if (to - from < 4) return undefined;
  const len = bytes.readUInt32LE(from);
  const text = bytes.toString('utf8', from + 4, Math.min(from + 4 + len, to));
  return text.charCodeAt(0) === 0 ? text.slice(1) : text;
}

/** A {@link SCAN_SLICE} of a reverse record. */
export function isReverseSlice(slice: Buffer): boolean {
  return (
    slice.length >= SLICE_AT.data &&
    slice.subarray(SLICE_AT.class, SLICE_AT.data).equals(REVERSE_LOOKUP_CLASS)
  );
}

/**
 * The `dataSlice` completing reverse texts, from the class (a whole account would start with its
 * parent, proving the slice was ignored).
 */
export const reverseTextSlice = (maxTextBytes: number) => ({
  offset: CLASS_OFFSET,
  length: 32 + 4 + maxTextBytes,
});
