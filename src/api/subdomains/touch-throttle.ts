import type { SubdomainCache } from '../../core/cache/subdomain-cache.js';

/** How often one process touches one parent's entry at most. */
export const TOUCH_EVERY_MS = 60_000;
/** Parents remembered as touched; past it the oldest are forgotten (touched again next time). */
const MAX_REMEMBERED = 100_000;

/**
 * Records uses of the configured endpoint's entries (`SubdomainCache.touch`: the registry of
 * followed parents, and the entries' sliding expiry), at most once per parent per
 * {@link TOUCH_EVERY_MS} in this process: a parent asked a thousand times a minute costs one
 * Redis call a minute, and a long-tail parent asked a few times a day stays cached and followed.
 * Fire and forget: a failed touch is retried at the next use after the interval.
 */
export class TouchThrottle {
  private readonly touchedAt = new Map<string, number>();

  constructor(
    private readonly cache: Pick<SubdomainCache, 'touch'>,
    private readonly endpointId: string,
    private readonly now: () => number = Date.now,
  ) {}

  touch(parent: string): void {
    const now = this.now();
    const last = this.touchedAt.get(parent);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
    this.touchedAt.delete(parent);
    this.touchedAt.set(parent, now);
    if (this.touchedAt.size > MAX_REMEMBERED) {
      const oldest = this.touchedAt.keys().next();
      if (!oldest.done) this.touchedAt.delete(oldest.value);
    }
    this.cache.touch(this.endpointId, parent, now).catch(() => this.touchedAt.delete(parent));
  }
}
