import { describe, expect, it } from 'vitest';
import { Doorkeeper } from '../src/api/cache/doorkeeper.js';

describe('Doorkeeper (TinyLFU admission filter)', () => {
  it('says no to a key the first time and yes the second', () => {
    const door = new Doorkeeper(1000);
    expect(door.seenBefore('SOL\u0000bonfida')).toBe(false);
    expect(door.seenBefore('SOL\u0000bonfida')).toBe(true);
    expect(door.seenBefore('SOL\u0000bonfidA')).toBe(false);
    expect(door.seenBefore('ETH\u0000bonfida')).toBe(false);
  });

  it('never says no to a key seen since the last clearing, and rarely yes to a new one', () => {
    const capacity = 100_000;
    const door = new Doorkeeper(capacity);
    const seen = Array.from({ length: capacity - 1 }, (_, i) => `SOL\u0000name${i}`);
    for (const key of seen) door.seenBefore(key);
    // Asking again records nothing new, so the filter is not cleared by this loop.
    expect(seen.every((key) => door.seenBefore(key))).toBe(true);
    let falsePositives = 0;
    const fresh = 10_000;
    for (let i = 0; i < fresh; i++) if (door.seenBefore(`ETH\u0000other${i}`)) falsePositives++;
    // Two positions per key at 8 bits a key: about 3% when full.
    expect(falsePositives / fresh).toBeLessThan(0.06);
  });

  it('forgets everything after `capacity` new keys, so it stays bounded and recent', () => {
    const door = new Doorkeeper(3);
    door.seenBefore('a');
    door.seenBefore('b');
    expect(door.seenBefore('a')).toBe(true);
    door.seenBefore('c'); // the third new key: cleared
    expect(door.seenBefore('a')).toBe(false);
    expect(door.seenBefore('a')).toBe(true);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new Doorkeeper(0)).toThrow(RangeError);
    expect(() => new Doorkeeper(1.5)).toThrow(RangeError);
  });
});
