/** The chain's index of stored accounts by the bytes a name account's filters compare. */
import type { MemcmpHint, StoredAccount } from './chain-view.js';

/**
 * Stored accounts by the bytes a name account's filters compare: its first one and two bytes
 * (the shards of a registry's bootstrap), bytes 0..32 (the parent) and bytes 64..96 (the class),
 * each a map from those bytes (latin1) to the accounts holding them, in the order they were
 * stored. A filtered read then walks one bucket instead of the whole program.
 */
export class FieldIndex {
  readonly #first1 = new Map<string, Set<StoredAccount>>();
  readonly #first2 = new Map<string, Set<StoredAccount>>();
  readonly #parent = new Map<string, Set<StoredAccount>>();
  readonly #nameClass = new Map<string, Set<StoredAccount>>();

  /** Indexes `account` under each field its data is long enough to hold. */
  add(account: StoredAccount): void {
    for (const [map, field] of this.#fieldsOf(account.data)) {
      let bucket = map.get(field);
      if (!bucket) {
        bucket = new Set();
        map.set(field, bucket);
      }
      bucket.add(account);
    }
  }

  /** Removes `account` (the object `add` took) from its buckets. */
  delete(account: StoredAccount): void {
    for (const [map, field] of this.#fieldsOf(account.data)) {
      const bucket = map.get(field);
      bucket?.delete(account);
      if (bucket?.size === 0) map.delete(field);
    }
  }

  /**
   * The smallest bucket that holds every account passing one of `hints`, or undefined when no
   * hint fits an index (a memcmp elsewhere, or shorter than a byte).
   */
  narrowest(hints: readonly MemcmpHint[]): ReadonlySet<StoredAccount> | undefined {
    let best: ReadonlySet<StoredAccount> | undefined;
    for (const { offset, bytes } of hints) {
      let bucket: ReadonlySet<StoredAccount> | undefined;
      if (offset === 0 && bytes.length >= 32) bucket = this.#lookup(this.#parent, bytes, 0, 32);
      else if (offset === 0 && bytes.length >= 2) bucket = this.#lookup(this.#first2, bytes, 0, 2);
      else if (offset === 0 && bytes.length === 1) bucket = this.#lookup(this.#first1, bytes, 0, 1);
      else if (offset <= 64 && offset + bytes.length >= 96) {
        bucket = this.#lookup(this.#nameClass, bytes, 64 - offset, 96 - offset);
      } else continue;
      if (!best || bucket.size < best.size) best = bucket;
    }
    return best;
  }

  #lookup(
    map: Map<string, Set<StoredAccount>>,
    bytes: Buffer,
    from: number,
    to: number,
  ): ReadonlySet<StoredAccount> {
    return map.get(bytes.toString('latin1', from, to)) ?? EMPTY_SET;
  }

  *#fieldsOf(data: Buffer): Iterable<[Map<string, Set<StoredAccount>>, string]> {
    if (data.length >= 1) yield [this.#first1, data.toString('latin1', 0, 1)];
    if (data.length >= 2) yield [this.#first2, data.toString('latin1', 0, 2)];
    if (data.length >= 32) yield [this.#parent, data.toString('latin1', 0, 32)];
    if (data.length >= 96) yield [this.#nameClass, data.toString('latin1', 64, 96)];
  }
}

const EMPTY_SET: ReadonlySet<StoredAccount> = new Set();
