import { describe, expect, it } from 'vitest';
import { isSlot, SLOT_MARGIN_S, SLOT_RATE_BOUND, SlotClock } from '../src/rpc/slot.js';
import { classifyProgramAccounts, decodeExistence } from '../src/sns/discovery-decode.js';

/** The slot texts a provider may send that are no slot: JSON reads each as a number or worse. */
const NOT_SLOTS = ['1e309', '-1e309', '9223372036854775808', '-1', '1.5', '"7"', 'null', '{}'];

const reply = (slot: string, value: string) =>
  new TextEncoder().encode(
    `{"jsonrpc":"2.0","id":1,"result":{"context":{"slot":${slot}},"value":${value}}}`,
  );

describe('slots', () => {
  it('are non-negative safe integers', () => {
    for (const slot of [0, 1, 350_000_000, Number.MAX_SAFE_INTEGER])
      expect(isSlot(slot)).toBe(true);
    for (const text of NOT_SLOTS) expect(isSlot(JSON.parse(text))).toBe(false);
    expect(isSlot(Number.MAX_SAFE_INTEGER + 1)).toBe(false);
    expect(isSlot(NaN)).toBe(false);
  });

  it('of scans and existence checks that are no slot read as none', () => {
    for (const text of NOT_SLOTS) {
      expect(decodeExistence('getMultipleAccounts', reply(text, '[null]'), 1, 1).slot).toBe(
        undefined,
      );
      const scan = classifyProgramAccounts(
        'getProgramAccounts',
        reply(text, '[]'),
        1,
        new Uint8Array(32),
      );
      expect(scan.slot).toBeUndefined();
    }
    expect(decodeExistence('getMultipleAccounts', reply('42', '[null]'), 1, 1).slot).toBe(42);
  });
});

describe('SlotClock', () => {
  it('trusts nothing before it has observed a slot, and ignores what is no slot', () => {
    let now = 1_000_000;
    const clock = new SlotClock(() => now);
    expect(clock.ceiling()).toBeUndefined();
    expect(clock.trusts(5)).toBe(false);
    for (const text of NOT_SLOTS) clock.observe(JSON.parse(text));
    expect(clock.newest).toBeUndefined();
    clock.observe(1_000);
    expect(clock.newest).toBe(1_000);
    expect(clock.ceiling()).toBe(1_000 + SLOT_MARGIN_S * SLOT_RATE_BOUND);
    expect(clock.trusts(1_000 + SLOT_MARGIN_S * SLOT_RATE_BOUND)).toBe(true);
    expect(clock.trusts(1_001 + SLOT_MARGIN_S * SLOT_RATE_BOUND)).toBe(false);
    expect(clock.trusts(1.5)).toBe(false);
    // The bound grows with the time since the observation.
    now += 10_000;
    expect(clock.ceiling()).toBe(1_000 + (SLOT_MARGIN_S + 10) * SLOT_RATE_BOUND);
  });

  it('keeps the observation that reaches furthest, whatever order they come in', () => {
    let now = 0;
    const clock = new SlotClock(() => now);
    clock.observe(100, 0);
    clock.observe(90, 10_000); // a lagging node, later: reaches less far than the first
    expect(clock.newest).toBe(100);
    expect(clock.ceiling(10_000)).toBe(100 + (SLOT_MARGIN_S + 10) * SLOT_RATE_BOUND);
    clock.observe(200, 10_000);
    now = 10_000;
    expect(clock.ceiling()).toBe(200 + SLOT_MARGIN_S * SLOT_RATE_BOUND);
    // An observation timed in the future does not lower the bound below the margin.
    expect(clock.ceiling(0)).toBe(200 + SLOT_MARGIN_S * SLOT_RATE_BOUND);
  });
});
