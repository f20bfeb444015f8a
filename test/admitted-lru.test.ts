import { describe, expect, it } from 'vitest';
import { AdmittedLru } from '../src/api/cache/admitted-lru.js';

describe('AdmittedLru', () => {
  it("keeps a key's value from its second offer on, and makes it only then", () => {
    const lru = new AdmittedLru<{ v: number }>(10);
    let made = 0;
    const make = () => ({ v: ++made });
    lru.offer('a', make);
    // A key offered once is not kept, and its value is never made.
    expect(made).toBe(0);
    expect(lru.get('a')).toBeUndefined();
    lru.offer('a', make);
    expect(made).toBe(1);
    expect(lru.get('a')).toEqual({ v: 1 });
    lru.offer('b', make);
    expect(made).toBe(1);
  });

  it('evicts the least recently used key past its size', () => {
    const lru = new AdmittedLru<{ k: string }>(2);
    for (const k of ['a', 'b', 'c', 'a', 'b', 'c']) lru.offer(k, () => ({ k }));
    expect(lru.get('a')).toBeUndefined();
    expect(lru.get('b')).toEqual({ k: 'b' });
    expect(lru.get('c')).toEqual({ k: 'c' });
  });
});
