import type { Logger } from 'pino';
import type { SubdomainCache } from '../src/core/cache/subdomain-cache.js';

/** How often the followed-parents registry is swept. */
const SWEEP_EVERY_MS = 60_000;
/**
 * How often idle parents are swept from the registry (docs/design.md, "The subdomain cache"): a
 * minute, or a quarter of the stale window when that is shorter, so an entry nobody asks for
 * leaves about when its stale window ends (its keys outlive it only so the sweep finds them).
 */
export const sweepEveryMs = (staleMs: number) =>
  Math.max(1_000, Math.min(SWEEP_EVERY_MS, Math.floor(staleMs / 4)));
/** Batches one sweep runs at most (each a bounded Lua script); the rest waits for the next. */
const MAX_BATCHES = 10;

/**
 * Runs the sweep of the configured endpoint's followed parents (`SubdomainCache.sweep`) every
 * {@link SWEEP_EVERY_MS}: parents nobody asked for (nor scanned) for `CACHE_STALE` leave the
 * registry the follower follows, with their keys and member-parents fields (docs/design.md, "The
 * subdomain cache"). Every worker runs it; the script is atomic and idempotent, so two sweeping
 * at once remove each parent once.
 *
 * @returns a stop function (waits for a sweep under way).
 */
export function startRegistrySweep(opts: {
  cache: SubdomainCache;
  endpointId: string;
  logger: Logger;
  everyMs?: number;
}): () => Promise<void> {
  let running: Promise<void> | undefined;
  const sweep = async () => {
    let removed = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      const batch = await opts.cache.sweep(opts.endpointId);
      removed += batch.removed;
      if (!batch.more) break;
    }
    if (removed > 0) opts.logger.info({ removed }, 'swept idle parents from the cache');
    // The fields of parents whose members expired before the sweep reached them: 5,000 fields a
    // run, so a pass over an index of a million accounts' fields in under four hours.
    const index = await opts.cache.sweepIndex(opts.endpointId, 5_000);
    if (index.dropped > 0) {
      opts.logger.info({ dropped: index.dropped }, 'swept orphan member-parents fields');
    }
  };
  const timer = setInterval(() => {
    running ??= sweep()
      .catch((err: unknown) => opts.logger.warn({ err: String(err) }, 'registry sweep'))
      .finally(() => (running = undefined));
  }, opts.everyMs ?? SWEEP_EVERY_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
