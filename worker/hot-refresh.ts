import type { Queue } from 'bullmq';
import type { RedisClient } from '../src/redis.js';
import type { SubdomainCache } from '../src/cache/subdomain-cache.js';
import { addRefreshJob, type RefreshJobData } from '../src/queue/refresh-queue.js';
import { hottestParents } from '../src/subdomains/hot-keys.js';

/** The job the scheduler adds; the refresh worker dispatches on this name. */
export const HOT_SCAN_JOB = 'hot-scan';
const SCHEDULER_ID = 'hot-parents';

/**
 * How often the hottest parents are checked: six times per freshness window (at least every
 * 500 ms), so an entry is refreshed within its last third of freshness, before it goes stale.
 */
export const hotScanIntervalMs = (freshMs: number) => Math.max(500, Math.floor(freshMs / 6));

/**
 * Installs (or updates) the BullMQ job scheduler of hot-parent scans. Idempotent: every worker
 * calls it at start and BullMQ keeps one scheduler per id.
 */
export async function scheduleHotScans(
  queue: Queue<RefreshJobData>,
  freshMs: number,
): Promise<void> {
  await queue.upsertJobScheduler(
    SCHEDULER_ID,
    { every: hotScanIntervalMs(freshMs) },
    { name: HOT_SCAN_JOB, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
}

export type HotScanDeps = {
  redis: RedisClient;
  cache: SubdomainCache;
  queue: Queue<RefreshJobData>;
  prefix: string;
  freshMs: number;
  /** How many of the most requested parents to keep fresh (`HOT_KEYS_TOP_N`). */
  topN: number;
  /** The cache id of the default endpoint; overrides are never refreshed ahead. */
  defaultEndpointId: string;
};

/**
 * One scan: for each of the `topN` most requested parents of the last two windows, queue a refresh
 * when its entry would go stale before two more scans have run (or is missing). Parents nobody
 * asks for drop out of the counts and their entries expire.
 *
 * @returns how many parents were looked at and how many refreshes were queued.
 */
export async function runHotScan(
  deps: HotScanDeps,
  now = Date.now(),
): Promise<{ scanned: number; queued: number }> {
  const parents = await hottestParents(deps.redis, deps.prefix, deps.freshMs, deps.topN, now);
  const refreshAfterMs = deps.freshMs - 2 * hotScanIntervalMs(deps.freshMs);
  let queued = 0;
  for (const parent of parents) {
    const cacheKey = deps.cache.key(deps.defaultEndpointId, parent);
    const entry = await deps.cache.get(cacheKey);
    if (entry && now - entry.fetchedAt < refreshAfterMs) continue;
    await addRefreshJob(deps.queue, { cacheKey, parent, endpoint: { kind: 'default' } }, 'ahead');
    queued++;
  }
  return { scanned: parents.length, queued };
}
