/** A non-negative safe integer (JSON also carries `1e309`, `-1`, `1.5`, integers past 2^53). */
export const isSlot = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0;

/**
 * Slots per second a believable slot may advance: above the chain's 2.5 so a long gap between
 * observations never makes an honest slot look ahead.
 */
export const SLOT_RATE_BOUND = 4;

/**
 * Seconds of lead allowed over the newest observed slot: websocket nodes lead HTTP ones by
 * seconds; a minute also bounds what one bad slot holds back.
 */
export const SLOT_MARGIN_S = 60;

/**
 * {@link SlotClock.observe}'s verdict on a reply's slot: `trusted` (store at it), `ahead` (past
 * the ceiling: use the data as slotless), `unconfirmed` (no ceiling and no agreeing reply yet),
 * `invalid`.
 */
export type SlotVerdict = 'trusted' | 'ahead' | 'unconfirmed' | 'invalid';

/** Unagreeing replies kept. */
const CANDIDATES = 4;

/**
 * The newest slot seen over HTTP and the ceiling it implies: anchor slot + (margin + seconds
 * since) x rate. One per worker process; why: docs/design.md, "Freshness".
 */
export class SlotClock {
  private anchor: { slot: number; at: number } | undefined;
  private highest: number | undefined;
  /** Replies not believed yet: before the first anchor, or far below it. */
  private candidates: Array<{ slot: number; at: number }> = [];

  constructor(private readonly now: () => number = Date.now) {}

  /** Records an HTTP reply's `slot` seen at `at` (ms) and says whether to believe it. */
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

  /** The newest slot believed, if anchored. */
  get newest(): number | undefined {
    return this.highest;
  }

  /** The highest slot believable at `at`, if anchored. */
  ceiling(at: number = this.now()): number | undefined {
    if (!this.anchor) return undefined;
    const seconds = Math.max(0, (at - this.anchor.at) / 1000) + SLOT_MARGIN_S;
    return Math.floor(this.anchor.slot + seconds * SLOT_RATE_BOUND);
  }

  /** `slot` is a slot at most the ceiling; false before the first anchor. */
  trusts(slot: unknown, at: number = this.now()): slot is number {
    const ceiling = this.ceiling(at);
    return isSlot(slot) && ceiling !== undefined && slot <= ceiling;
  }
}

/** How far an observation lets the ceiling reach. */
const reach = (o: { slot: number; at: number }) => o.slot - (o.at / 1000) * SLOT_RATE_BOUND;

/** Both could be honest: within margin and rate of each other. */
function agree(a: { slot: number; at: number }, b: { slot: number; at: number }): boolean {
  const seconds = Math.abs(b.at - a.at) / 1000 + SLOT_MARGIN_S;
  return Math.abs(b.slot - a.slot) <= seconds * SLOT_RATE_BOUND;
}
