import {
  INLINE_TEXT_BYTES,
  isReverseSlice,
  reverseText,
  SCAN_SLICE,
  SLICE_AT,
} from './discovery-decode.js';
import {
  hashName,
  nameAccountKey,
  reverseKeyFromDomainKey,
  toBase58,
} from '../../src/core/sns/pda.js';

/**
 * What a `programSubscribe` notification under a parent proves, read from the scan's slice
 * (docs/design.md, "Freshness"): a `reverse` record naming `label`; a `subdomain` (owner, for a
 * transfer); `unproven` (cut text, or key not derived from it: only a scan tells); `empty` (a
 * text the SDK does not list).
 */
export type Change =
  | { kind: 'reverse'; subdomain: string; label: string }
  | { kind: 'subdomain'; subdomain: string; owner: string }
  | { kind: 'unproven' }
  | { kind: 'empty' };

/** The SDK's `getDomainKeySync` for `label.parent`, given the parent's 32-byte key. */
export function subdomainKey(label: string, parentKey: Uint8Array): string {
  return toBase58(nameAccountKey(hashName(`\0${label}`), undefined, parentKey));
}

/**
 * Classifies an account notified under a parent.
 *
 * @param slice its data as {@link SCAN_SLICE} cuts it.
 */
export function classifyChange(pubkey: string, slice: Buffer, parentKey: Uint8Array): Change {
  if (slice.length < SLICE_AT.class) return { kind: 'unproven' };
  if (!isReverseSlice(slice)) {
    const owner = toBase58(slice.subarray(SLICE_AT.owner, SLICE_AT.class));
    return { kind: 'subdomain', subdomain: pubkey, owner };
  }
  const payload = slice.subarray(SLICE_AT.data);
  if (payload.length < 4) return { kind: 'unproven' };
  if (slice.length === SCAN_SLICE.length && payload.readUInt32LE(0) > INLINE_TEXT_BYTES) {
    return { kind: 'unproven' };
  }
  const label = reverseText(payload);
  if (!label) return { kind: 'empty' };
  const subdomain = subdomainKey(label, parentKey);
  if (toBase58(reverseKeyFromDomainKey(subdomain, parentKey)) !== pubkey) {
    return { kind: 'unproven' };
  }
  return { kind: 'reverse', subdomain, label };
}
