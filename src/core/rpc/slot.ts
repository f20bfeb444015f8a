/**
 * Slots as the RPC reports them, and how far ahead of what it has shown one may be believed
 * (docs/design.md, "Freshness").
 */

/**
 * Whether `value` is a slot: a non-negative safe integer. JSON lets a provider send `1e309`
 * (Infinity once parsed), `9223372036854775808` (rounded to a float no chain has reached), `-1` or
 * `1.5`; none of them is a slot, and none may be stored, compared or passed on as one.
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
 * Seconds of slots (at {@link SLOT_RATE_BOUND}) a believable slot may be ahead of the newest one
 * observed at the moment it was observed. Websocket notifications come from nodes that may lead
 * the node an HTTP reply came from by a few seconds (providers balance the two apart); a minute
 * covers that many times over, and bounds what one bad slot can hold an entry back to about
 * 100 s of chain.
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
 * The newest slot the configured RPC has shown over HTTP (the `context.slot` of scans and
 * existence checks), and from it the highest slot believable now: the anchor's slot plus
 * ({@link SLOT_MARGIN_S} + seconds since it was observed) x {@link SLOT_RATE_BOUND}.
 *
 * No one reply moves it far. The first anchor of a process is two replies that agree (each
 * within the margin and the rate of the other), the lower of the two: a process starts with no
 * slot believed, and a first reply from a node of another cluster, or a buggy one, is outvoted
 * instead of taken. After that a reply past the ceiling is `ahead` and changes nothing; one within
 * it may raise the anchor by at most the margin. A reply more than the margin below the anchor's
 * slot (no honest node lags that far, and the chain never goes back) hints the anchor is wrong:
 * two such that agree become the anchor instead (lowering the ceiling costs re-reads, never
 * freezes an entry).
 *
 * Only HTTP replies of this process move it: never a notification (one accepted near the bound
 * would raise it for the next, and a provider could walk it to any slot in a few hundred frames),
 * and never a slot read back from the store (a bad one stored once would lift the ceiling of
 * every later process, and its time comes from another machine's clock). One per worker process,
 * shared by its refreshes and its watcher.
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
