/**
 * Whether `value` is a slot: a non-negative safe integer (JSON also carries `1e309`, `-1`, `1.5`
 * and integers past 2^53).
 */
export const isSlot = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0;

/**
 * Slots per second a believable slot may have advanced since the newest one observed. The chain
 * targets 400 ms a slot (2.5 per second) and does not go faster; the bound leaves room above that
 * so that a long wait between observations never makes an honest slot look ahead.
 */
export const SLOT_RATE_BOUND = 4;

/**
 * Seconds of slots (at {@link SLOT_RATE_BOUND}) a believable slot may lead the newest observed:
 * websocket nodes lead HTTP ones by seconds, and a minute also bounds what one bad slot holds back.
 */
export const SLOT_MARGIN_S = 60;

/**
 * What {@link SlotClock.observe} made of one HTTP reply's slot:
 * - `trusted`: within the ceiling (or confirmed by another reply when there was none yet); the
 *   reply may be stored at its slot.
 * - `ahead`: past the ceiling; the reply's slot is not believed (its data may still be used, as a
 *   reply without a slot), and the clock is left as it was.
 * - `unconfirmed`: no ceiling yet, and no earlier reply of this process agrees with it.
 * - `invalid`: not a slot ({@link isSlot}).
 */
export type SlotVerdict = 'trusted' | 'ahead' | 'unconfirmed' | 'invalid';

/** Replies of a process kept while none agrees with another (see {@link SlotClock}). */
const CANDIDATES = 4;

/**
 * The newest slot the configured RPC has shown over HTTP, and from it the highest slot believable
 * now: the anchor's slot plus ({@link SLOT_MARGIN_S} + seconds since) x {@link SLOT_RATE_BOUND}.
 * The rules (two agreeing replies anchor it, one reply moves it at most the margin, only this
 * process's HTTP replies count) and why: docs/design.md, "Freshness". One per worker process.
 */
export class SlotClock {
  /** The observation that gives the ceiling (the newest slot, adjusted for its age). */
  private anchor: { slot: number; at: number } | undefined;
  private highest: number | undefined;
  /** Replies not believed yet: before the first anchor, or far below it. */
  private candidates: Array<{ slot: number; at: number }> = [];

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Records that the RPC reflected `slot` at time `at` (Unix milliseconds of this process's
   * clock, default now) in an HTTP reply, and says whether to believe it ({@link SlotVerdict}).
   */
  observe(slot: unknown, at: number = this.now()): SlotVerdict {
    if (!isSlot(slot) || !Number.isFinite(at)) return 'invalid';
    const seen = { slot, at };
    const anchor = this.anchor;
    if (anchor) {
      const ceiling = this.ceiling(at);
      if (ceiling !== undefined && slot > ceiling) return 'ahead';
      if (slot >= anchor.slot - SLOT_MARGIN_S * SLOT_RATE_BOUND) {
        this.highest = Math.max(this.highest ?? slot, slot);
        if (reach(seen) > reach(anchor)) this.anchor = seen;
        this.candidates = [];
        return 'trusted';
      }
    }
    const peer = this.candidates.find((c) => agree(c, seen));
    if (!peer) {
      this.candidates.push(seen);
      if (this.candidates.length > CANDIDATES) this.candidates.shift();
      // Far below a ceiling: a slot that low holds nothing back, so it may be stored at it.
      return anchor ? 'trusted' : 'unconfirmed';
    }
    this.anchor = reach(peer) <= reach(seen) ? peer : seen;
    this.highest = Math.max(peer.slot, slot);
    this.candidates = [];
    return 'trusted';
  }

  /** The newest slot believed; undefined before the first anchor. */
  get newest(): number | undefined {
    return this.highest;
  }

  /** The highest slot believable now (see the class); undefined before the first anchor. */
  ceiling(at: number = this.now()): number | undefined {
    if (!this.anchor) return undefined;
    const seconds = Math.max(0, (at - this.anchor.at) / 1000) + SLOT_MARGIN_S;
    return Math.floor(this.anchor.slot + seconds * SLOT_RATE_BOUND);
  }

  /** Whether `slot` is a slot and at most the {@link ceiling}; false before the first anchor. */
  trusts(slot: unknown, at: number = this.now()): slot is number {
    const ceiling = this.ceiling(at);
    return isSlot(slot) && ceiling !== undefined && slot <= ceiling;
  }
}

/** How far an observation lets the ceiling reach: its slot, less the rate over its time. */
const reach = (o: { slot: number; at: number }) => o.slot - (o.at / 1000) * SLOT_RATE_BOUND;

/** Whether two observations could both be honest: each within the margin and rate of the other. */
function agree(a: { slot: number; at: number }, b: { slot: number; at: number }): boolean {
  const seconds = Math.abs(b.at - a.at) / 1000 + SLOT_MARGIN_S;
  return Math.abs(b.slot - a.slot) <= seconds * SLOT_RATE_BOUND;
}
