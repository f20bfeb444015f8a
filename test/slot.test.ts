import { describe, expect, it } from 'vitest';
import { isSlot, SLOT_MARGIN_S, SLOT_RATE_BOUND, SlotClock } from '../src/core/rpc/slot.js';
import { classifyProgramAccounts, decodeExistence } from '../worker/sns/discovery-decode.js';

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
  const MARGIN = SLOT_MARGIN_S * SLOT_RATE_BOUND;

  it('trusts nothing until two replies agree, and ignores what is no slot', () => {
    let now = 1_000_000;
    const clock = new SlotClock(() => now);
    expect(clock.ceiling()).toBeUndefined();
    expect(clock.trusts(5)).toBe(false);
    for (const text of NOT_SLOTS) expect(clock.observe(JSON.parse(text))).toBe('invalid');
    expect(clock.observe(1_000)).toBe('unconfirmed');
    expect(clock.newest).toBeUndefined();
    expect(clock.trusts(1_000)).toBe(false);
    now += 400;
    expect(clock.observe(1_001)).toBe('trusted');
    expect(clock.newest).toBe(1_001);
    // The lower-reaching of the two anchors (one slot in 400 ms reaches less far than 4 a second).
    expect(clock.ceiling()).toBe(1_001 + MARGIN);
    expect(clock.trusts(1_001 + MARGIN)).toBe(true);
    expect(clock.trusts(1_002 + MARGIN)).toBe(false);
    expect(clock.trusts(1.5)).toBe(false);
    // The bound grows with the time since the observation.
    now += 10_000;
    expect(clock.ceiling()).toBe(1_001 + (SLOT_MARGIN_S + 10) * SLOT_RATE_BOUND);
  });

  it('keeps the observation that reaches furthest, whatever order they come in', () => {
    let now = 0;
    const clock = new SlotClock(() => now);
    clock.observe(100, 0);
    clock.observe(100, 0);
    clock.observe(90, 10_000); // a lagging node, later: reaches less far than the first
    expect(clock.newest).toBe(100);
    expect(clock.ceiling(10_000)).toBe(100 + (SLOT_MARGIN_S + 10) * SLOT_RATE_BOUND);
    clock.observe(200, 10_000);
    now = 10_000;
    expect(clock.ceiling()).toBe(200 + MARGIN);
    // An observation timed in the future does not lower the bound below the margin.
    expect(clock.ceiling(0)).toBe(200 + MARGIN);
  });

  it('is not moved by one reply far ahead, at start or after', () => {
    let now = 0;
    const clock = new SlotClock(() => now);
    // First reply of the process from a node of another cluster: outvoted, not taken.
    expect(clock.observe(1_000_000_500)).toBe('unconfirmed');
    now = 400;
    expect(clock.observe(500)).toBe('unconfirmed');
    now = 800;
    expect(clock.observe(501)).toBe('trusted');
    expect(clock.ceiling()).toBeLessThan(1_000);
    // Anchored: a reply past the ceiling is refused and changes nothing, however often it comes.
    for (let i = 0; i < 5; i++) expect(clock.observe(1_000_000_502)).toBe('ahead');
    expect(clock.newest).toBe(501);
    expect(clock.trusts(1_000_000_502)).toBe(false);
    // One reply can raise the anchor by at most the margin.
    expect(clock.observe(501 + MARGIN)).toBe('trusted');
    expect(clock.observe(502 + 2 * MARGIN)).toBe('ahead');
  });

  it('never refuses an honest chain: 2.5 slots a second, right after start and after minutes of silence', () => {
    let now = 0;
    const clock = new SlotClock(() => now);
    const chain = (ms: number) => 300_000_000 + Math.floor((ms / 1000) * 2.5);
    // Two nodes, one lagging by 20 s of chain, answering in turn.
    const lag = 50;
    const verdicts: string[] = [];
    for (const at of [0, 300, 2_000, 2_100, 60_000, 60_500, 60_600, 600_000, 600_100, 3_600_000]) {
      now = at;
      verdicts.push(clock.observe(chain(at) - (verdicts.length % 2 === 1 ? lag : 0)));
    }
    expect(verdicts[0]).toBe('unconfirmed');
    expect(verdicts.slice(1).every((v) => v === 'trusted')).toBe(true);
    // A notification from a websocket node a few seconds ahead, after ten minutes of nothing.
    now = 4_200_000;
    expect(clock.trusts(chain(now) + 10)).toBe(true);
  });

  it('takes a new anchor from two replies that agree far below it', () => {
    let now = 0;
    const clock = new SlotClock(() => now);
    clock.observe(1_000_000_000);
    clock.observe(1_000_000_001); // two bad replies at start (one node, answering twice)
    now = 1_000;
    expect(clock.observe(500)).toBe('trusted');
    expect(clock.trusts(1_000_000_000)).toBe(true);
    now = 1_400;
    expect(clock.observe(501)).toBe('trusted');
    expect(clock.trusts(1_000_000_000)).toBe(false);
    expect(clock.newest).toBe(501);
  });
});
