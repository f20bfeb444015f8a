import {
  INLINE_TEXT_BYTES,
  isReverseSlice,
  reverseText,
  SCAN_SLICE,
  SLICE_AT,
} from './discovery-decode.js';
import { hashName, nameAccountKey, reverseKeyFromDomainKey, toBase58 } from '../../core/sns/pda.js';

/**
 * What one `programSubscribe` notification under a parent proves (docs/design.md, "Freshness"),
 * read from the scan's `dataSlice`:
 * - `reverse`: a reverse record at the key derived from its text: it names `label` for the
 *   subdomain account `subdomain`, once that account exists.
 * - `subdomain`: another account under the parent, with the owner in its header (a transfer).
 * - `unproven`: a text cut at the slice, or a key not derived from its text: only a scan tells.
 * - `empty`: a reverse record with an empty text, which the SDK does not list.
 */
export type Change =
  | { kind: 'reverse'; subdomain: string; label: string }
  | { kind: 'subdomain'; subdomain: string; owner: string }
  | { kind: 'unproven' }
  | { kind: 'empty' };

/**
 * The subdomain name account of `label` under the parent: the SDK's `getDomainKeySync` for
 * `label.parent`, `"\0" + label` hashed under the parent's key.
 *
 * @param parentKey the parent's name account (32 bytes).
 */
export function subdomainKey(label: string, parentKey: Uint8Array): string {
  return toBase58(nameAccountKey(hashName(`\0${label}`), undefined, parentKey));
}

/**
 * Classifies an account notified under a parent.
 *
 * @param pubkey the notified account (base58, as the notification carries it).
 * @param slice its data as the {@link SCAN_SLICE} cuts it.
 * @param parentKey the parent's name account (32 bytes).
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
