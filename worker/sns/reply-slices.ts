import { fromBase58Into, KeySet, REVERSE_LOOKUP_CLASS, toBase58 } from '../../src/core/sns/pda.js';
import type { CanonicalAccounts } from './canonical-accounts.js';
import { INLINE_TEXT_BYTES, reverseTextAt, SCAN_SLICE, SLICE_AT } from './name-slices.js';

/**
 * What a scan reply's slices (./name-slices.ts `SCAN_SLICE`) say, read for its classification
 * (./scan-classify.ts): an account's owner, and the reply's reverse records with their labels.
 */

const CLASS_B64_AT = (SLICE_AT.class / 3) * 4;
/** The reverse class's first 30 bytes in base64, at {@link CLASS_B64_AT} in reverse slices. */
const REVERSE_CLASS_B64_PREFIX = REVERSE_LOOKUP_CLASS.subarray(0, 30).toString('base64');

/**
 * The owner in a slice's base64 text, as base58, through `known` (owner text -> base58): a parent's
 * subdomains share few owners, and a lookup costs a fraction of an encoding.
 */
export function sliceOwner(text: string, known: Map<string, string>): string {
  const head = text.slice(0, 44);
  let owner = known.get(head);
  if (owner === undefined) {
    owner = toBase58(Buffer.from(head, 'base64').subarray(SLICE_AT.owner, SLICE_AT.class));
    known.set(head, owner);
  }
  return owner;
}

/** A scan reply's reverse records, from {@link readReverses}. */
export type Reverses = {
  /**
   * This parent's reverse records by key: the label their whole text gives ('' for none, and for
   * a cut text).
   */
  labels: Map<string, string>;
  /** Reverse records whose text the slice cut. */
  cut: Set<string>;
};

/** The reverse records among `accounts`. */
export function readReverses({ pubkeys, texts }: CanonicalAccounts): Reverses {
  const reverses: Reverses = { labels: new Map(), cut: new Set() };
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i] as string;
    if (text.startsWith(REVERSE_CLASS_B64_PREFIX, CLASS_B64_AT)) {
      addReverse(pubkeys[i] as string, text, reverses);
    }
  }
  return reverses;
}

/** Where {@link addReverse} decodes a slice: one buffer for all, no allocation a record. */
const SLICE = Buffer.alloc(SCAN_SLICE.length);

/** Adds the account `pubkey` to `reverses` if its slice `text` is a reverse record's. */
function addReverse(pubkey: string, text: string, reverses: Reverses): void {
  // What Buffer.from(text, 'base64') holds (the same decoder), at most a slice long.
  const bytes = SLICE.write(text, 'base64');
  if (
    bytes < SLICE_AT.data ||
    SLICE.compare(REVERSE_LOOKUP_CLASS, 0, 32, SLICE_AT.class, SLICE_AT.data) !== 0
  ) {
    return;
  }
  if (bytes === SCAN_SLICE.length && SLICE.readUInt32LE(SLICE_AT.data) > INLINE_TEXT_BYTES) {
    reverses.labels.set(pubkey, '');
    reverses.cut.add(pubkey);
  } else {
    reverses.labels.set(pubkey, reverseTextAt(SLICE, SLICE_AT.data, bytes) ?? '');
  }
}

/**
 * The reverse records by their bytes, for finding candidate keys without base58 (a key that is not
 * 32 bytes can never be a candidate).
 */
export function keysByBytes(reverses: Reverses): KeySet<string> {
  const known = new KeySet<string>(reverses.labels.size);
  const bytes = Buffer.alloc(32);
  for (const key of reverses.labels.keys()) if (fromBase58Into(key, bytes)) known.add(bytes, key);
  return known;
}
