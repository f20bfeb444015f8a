import { LRUCache } from 'lru-cache';
import type { SubdomainCache } from '../../core/cache/subdomain-cache.js';

/** How often one process touches one parent at most, in ms. */
const TOUCH_EVERY_MS = 60_000;

export type ParentTouchesOptions = {
  cache: SubdomainCache;
  /** Where a failed touch is reported (the entry keeps its expiry until the next try). */
  onError: (err: unknown, parent: string) => void;
  /** Parents remembered at most (oldest forgotten first): bounds the memory whatever the traffic. */
  max?: number;
};

/**
 * The API's uses of the configured endpoint's entries, written to Redis at most once per parent
 * per {@link TOUCH_EVERY_MS} per process (docs/design.md, "The subdomain cache"): a touch slides
 * the entry's expiry and its followed-parents score, so a long-tail parent asked a few times a day
 * stays cached (and followed) instead of being scanned again each day. A parent forgotten by the
 * bounded memory is touched again early: one more cheap write, never a missed one.
 */
export class ParentTouches {
  private readonly recent: LRUCache<string, true>;

  constructor(private readonly opts: ParentTouchesOptions) {
    this.recent = new LRUCache<string, true>({ max: opts.max ?? 100_000, ttl: TOUCH_EVERY_MS });
  }

  /**
   * Notes a use of the entry of (endpoint, parent), in the background.
   * @param now Unix ms.
   */
  used(endpointId: string, parent: string, now = Date.now()): void {
    const key = `${endpointId} ${parent}`;
    if (this.recent.has(key)) return;
    this.recent.set(key, true);
    this.opts.cache.touch(endpointId, parent, now).catch((err: unknown) => {
      this.recent.delete(key);
      this.opts.onError(err, parent);
    });
  }
}
