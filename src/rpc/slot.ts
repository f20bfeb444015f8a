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
 * The newest slot the configured RPC has shown over HTTP (the `context.slot` of scans and
 * existence checks), and from it the highest slot believable now: that slot plus
 * ({@link SLOT_MARGIN_S} + seconds since it was observed) x {@link SLOT_RATE_BOUND}.
 *
 * Only HTTP replies move it, never a notification: a notification accepted because it is within
 * the bound would otherwise raise the bound for the next one, and a provider could walk it to any
 * slot in a few hundred frames. One per worker process, shared by its refreshes and its watcher.
 */
export class SlotClock {
  /** The observation that gives the highest ceiling (the newest slot, adjusted for its age). */
  private anchor: { slot: number; at: number } | undefined;
  private highest: number | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Records that the RPC reflected `slot` at time `at` (Unix milliseconds, default now). Anything
   * that is not a slot ({@link isSlot}) is ignored.
   */
  observe(slot: unknown, at: number = this.now()): void {
    if (!isSlot(slot) || !Number.isFinite(at)) return;
    this.highest = Math.max(this.highest ?? slot, slot);
    const reach = (o: { slot: number; at: number }) => o.slot - (o.at / 1000) * SLOT_RATE_BOUND;
    if (!this.anchor || reach({ slot, at }) > reach(this.anchor)) this.anchor = { slot, at };
  }

  /** The newest slot observed; undefined before the first. */
  get newest(): number | undefined {
    return this.highest;
  }

  /** The highest slot believable now (see the class); undefined before the first observation. */
  ceiling(at: number = this.now()): number | undefined {
    if (!this.anchor) return undefined;
    const seconds = Math.max(0, (at - this.anchor.at) / 1000) + SLOT_MARGIN_S;
    return Math.floor(this.anchor.slot + seconds * SLOT_RATE_BOUND);
  }

  /** Whether `slot` is a slot and at most the {@link ceiling}; false before any observation. */
  trusts(slot: unknown, at: number = this.now()): slot is number {
    const ceiling = this.ceiling(at);
    return isSlot(slot) && ceiling !== undefined && slot <= ceiling;
  }
}
