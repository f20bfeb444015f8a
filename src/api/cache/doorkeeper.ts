/**
 * TinyLFU's doorkeeper: a Bloom filter (two bits per key, 8 bits per key of capacity) cleared
 * after `capacity` keys, telling whether a key was probably seen before. Why: one-off names
 * admitted to the derivation LRU evicted answers from V8's old generation and swung the API's
 * RSS (BENCHMARKS.md).
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
    // Power of two for masking.
    const bitCount = Math.max(1024, 2 ** Math.ceil(Math.log2(capacity * 8)));
    this.bits = new Int32Array(bitCount / 32);
    this.mask = bitCount - 1;
  }

  /** Records `key`; true if probably recorded since the last clear (false is always right). */
  seenBefore(key: string): boolean {
    // FNV-1a, then a second index by multiplicative remix.
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
