/**
 * An admission filter: whether a key was (probably) seen before, so keys asked for once never
 * enter the cache. TinyLFU's doorkeeper (Einziger, Friedman, Manes, ACM TOS 2017): a Bloom filter
 * of two bits per key, cleared after `capacity` keys (about 3% false positives at 8 bits per key).
 * Why: one-off names admitted to the derivation LRU evict answers already in V8's old generation,
 * swinging the API's RSS by 100 MiB and more (BENCHMARKS.md); with it, an answer enters on its
 * second request.
 */
export class Doorkeeper {
  private readonly bits: Int32Array;
  private readonly mask: number;
  private added = 0;

  /** @param capacity keys remembered before the filter is cleared (at least 1). */
  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError('capacity must be a positive integer');
    }
    // 8 bits per key, rounded up to a power of two (at least 1024 bits) for masking.
    const bitCount = Math.max(1024, 2 ** Math.ceil(Math.log2(capacity * 8)));
    this.bits = new Int32Array(bitCount / 32);
    this.mask = bitCount - 1;
  }

  /**
   * Records `key` and tells whether it had been recorded since the filter was last cleared. A
   * false answer is always right; a true one is wrong for a small share of keys never seen.
   */
  seenBefore(key: string): boolean {
    // FNV-1a over the UTF-16 code units, then a second index from a multiplicative remix.
    let h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    const a = h & this.mask;
    const b = Math.imul(h ^ (h >>> 16), 0x85ebca6b) & this.mask;
    const wordA = a >>> 5;
    const bitA = 1 << (a & 31);
    const wordB = b >>> 5;
    const bitB = 1 << (b & 31);
    const bits = this.bits;
    if (((bits[wordA] as number) & bitA) !== 0 && ((bits[wordB] as number) & bitB) !== 0) {
      return true;
    }
    bits[wordA] = (bits[wordA] as number) | bitA;
    bits[wordB] = (bits[wordB] as number) | bitB;
    if (++this.added >= this.capacity) {
      bits.fill(0);
      this.added = 0;
    }
    return false;
  }
}
