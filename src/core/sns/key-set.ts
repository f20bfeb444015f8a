/**
 * Accounts known by their 32 bytes, each with a value, for looking up many candidate keys that
 * sit in memory as words (./pda.ts's `existingNameAccountKey` reads them from the module's
 * memory): an open-addressing table of the keys' first words, every hit checked on all eight. A
 * lookup allocates nothing, where a map by a string of the bytes made one string a candidate.
 */
/** A key's bytes, and the same memory as words. */
const KEY_BYTES = new Uint8Array(32);
const KEY_WORDS = new Uint32Array(KEY_BYTES.buffer);

export class KeySet<T> {
  /** Each key's eight words (as {@link find} takes them), in the order added. */
  private readonly words: Uint32Array;
  /** Per slot, the index of the key there plus one; 0 for none. */
  private readonly slots: Int32Array;
  private readonly mask: number;
  private readonly values: T[] = [];

  /** @param capacity the most keys that will be added. */
  constructor(readonly capacity: number) {
    let size = 16;
    while (size < 2 * capacity) size *= 2;
    this.slots = new Int32Array(size);
    this.mask = size - 1;
    this.words = new Uint32Array(8 * Math.max(1, capacity));
  }

  /** How many keys were added. */
  get size(): number {
    return this.values.length;
  }

  /**
   * Adds the 32 bytes `key` with `value` (a key added again keeps its first value).
   * @throws RangeError past the capacity, or for a key that is not 32 bytes.
   */
  add(key: Uint8Array, value: T): void {
    if (key.length !== 32) throw new RangeError('a key is 32 bytes');
    KEY_BYTES.set(key);
    if (this.indexOf(KEY_WORDS, 0) >= 0) return;
    const index = this.values.length;
    if (index >= this.capacity) throw new RangeError(`more than ${this.capacity} keys`);
    this.words.set(KEY_WORDS, 8 * index);
    let slot = (KEY_WORDS[0] as number) & this.mask;
    while (this.slots[slot] !== 0) slot = (slot + 1) & this.mask;
    this.slots[slot] = index + 1;
    this.values.push(value);
  }

  /**
   * The value of the key whose eight words (as a `Uint32Array` over its 32 bytes reads them: the
   * platform's byte order) are `words[at]` to `words[at + 7]`, or undefined.
   */
  find(words: Uint32Array, at: number): T | undefined {
    const index = this.indexOf(words, at);
    return index < 0 ? undefined : this.values[index];
  }

  private indexOf(words: Uint32Array, at: number): number {
    const known = this.words;
    // Keys are hashes or keys made from them: their first word is as good as any hash of them.
    for (let slot = (words[at] as number) & this.mask; ; slot = (slot + 1) & this.mask) {
      const held = (this.slots[slot] as number) - 1;
      if (held < 0) return -1;
      const k = 8 * held;
      if (
        known[k] === words[at] &&
        known[k + 1] === words[at + 1] &&
        known[k + 2] === words[at + 2] &&
        known[k + 3] === words[at + 3] &&
        known[k + 4] === words[at + 4] &&
        known[k + 5] === words[at + 5] &&
        known[k + 6] === words[at + 6] &&
        known[k + 7] === words[at + 7]
      ) {
        return held;
      }
    }
  }
}
