import type { ConnectionOptions, Queue, Worker } from 'bullmq';
import {
  createHotParentScanQueue,
  HOT_PARENT_SCAN_QUEUE,
  HOT_PARENT_SCHEDULER_ID,
  hotParentScanIntervalMs,
} from '../src/core/queue/hot-parent-scans.js';
import type { RedisClient } from '../src/core/redis.js';
import type { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { addRefreshJob, type RefreshJobData } from '../src/core/queue/refresh-queue.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { LuaScript, replyStrings } from '../src/core/lua-script.js';
import { topHotParents } from '../src/core/cache/hot-parents.js';
import type { CreditBudget } from '../src/core/rpc/budget.js';
import { awaitsHeal, followedFresh, readFollowStatus } from '../src/core/cache/follow-status.js';
import { SteadyWorker } from './steady-worker.js';

export { HOT_PARENT_SCAN_QUEUE, createHotParentScanQueue, hotParentScanIntervalMs };
const HOT_PARENT_SCAN_JOB = 'hot-scan';

/**
 * Installs (or updates) the BullMQ job scheduler of hot-parent scans on
 * {@link HOT_PARENT_SCAN_QUEUE}. Idempotent: every worker calls it at start and BullMQ keeps one
 * scheduler per id.
 */
async function scheduleHotParentScans(queue: Queue, freshMs: number): Promise<void> {
  await queue.upsertJobScheduler(
    HOT_PARENT_SCHEDULER_ID,
    { every: hotParentScanIntervalMs(freshMs) },
    { name: HOT_PARENT_SCAN_JOB, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
}

/** The most time between two checks of the scheduler ({@link watchHotParentScans}). */
const WATCH_MAX_MS = 10_000;

/** What {@link watchHotParentScans} returns. */
export type HotParentScanWatch = {
  /** The first install (at start), settled: true when it succeeded. */
  readonly installed: Promise<boolean>;
  /** `running` once the scheduler was installed, or found by the last check; else `stopped`. */
  state(): 'running' | 'stopped';
  /**
   * Stops the checks. One under way is not waited for: BullMQ waits for a ready connection for
   * ever (a Redis refusing the worker), and the shutdown must not; its failure is not reported.
   */
  stop(): void;
};

/**
 * Installs the scans' job scheduler ({@link scheduleHotParentScans}) and keeps it installed:
 * BullMQ keeps it in Redis only, so a Redis that loses its data (restarted without persistence, a
 * failover to an empty replica) loses it, and refresh-ahead stopped in silence until the next
 * worker start. Then checks every scan interval (10 s at most) that it exists, and installs it
 * again when it does not. One check at a time; one that fails (Redis away) is tried again at the
 * next tick, as is a failed first install.
 *
 * @param opts.onMissing called each time a check found the scheduler missing (a warning).
 * @param opts.onError called with a check's or an install's failure.
 */
export function watchHotParentScans(opts: {
  queue: Queue;
  freshMs: number;
  onMissing: () => void;
  onError: (err: unknown) => void;
}): HotParentScanWatch {
  let state: 'running' | 'stopped' = 'stopped';
  let checking: Promise<boolean> | undefined;
  let stopped = false;
  const install = () => scheduleHotParentScans(opts.queue, opts.freshMs);
  const check = async (): Promise<boolean> => {
    try {
      if (state === 'stopped') {
        await install();
      } else if ((await opts.queue.getJobScheduler(HOT_PARENT_SCHEDULER_ID)) == null) {
        state = 'stopped';
        if (stopped) return false;
        opts.onMissing();
        await install();
      }
      state = 'running';
      return true;
    } catch (err) {
      if (!stopped) opts.onError(err);
      return false;
    }
  };
  const tick = () => {
    checking ??= check().finally(() => (checking = undefined));
    return checking;
  };
  const installed = tick();
  const timer = setInterval(
    () => void tick(),
    Math.min(WATCH_MAX_MS, hotParentScanIntervalMs(opts.freshMs)),
  );
  timer.unref();
  return {
    installed,
    state: () => state,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/**
 * The worker of hot-parent scans: one at a time, no rate limit (no RPC call; the refreshes it
 * queues go through the refresh queue's limiter).
 *
 * @param onError where the worker's 'error' events go (Redis faults).
 */
export function createHotParentScanWorker(
  connection: ConnectionOptions,
  prefix: string,
  scan: () => Promise<unknown>,
  onError: (err: Error) => void,
): Worker {
  const worker = new SteadyWorker(
    HOT_PARENT_SCAN_QUEUE,
    async () => {
      await scan();
    },
    { connection, prefix, concurrency: 1 },
  );
  worker.on('error', onError);
  return worker;
}

export type HotParentScanDeps = {
  redis: RedisClient;
  cache: SubdomainCache;
  queue: Queue<RefreshJobData>;
  prefix: string;
  freshMs: number;
  /** How many of the most requested parents to keep fresh (`HOT_KEYS_TOP_N`). */
  topN: number;
  /** Distinct clients a parent needs in a window to be kept fresh (`HOT_KEYS_MIN_CLIENTS`). */
  minClients: number;
  /** The cache id of the default endpoint; overrides are never refreshed ahead. */
  defaultEndpointId: string;
  /** The daily credit budget: nothing is refreshed ahead past its soft threshold. */
  budget?: CreditBudget;
};

/**
 * One scan (docs/design.md, "The refresh queue"): queues a refresh for each of the `topN` most
 * requested parents ({@link topHotParents}) whose entry would go stale before two more scans, or
 * is missing, unless the follow stream keeps it fresh (`followedFresh`) or will once the heal
 * under way vouches (`awaitsHeal`, bounded in time); at most `topN` distinct
 * parents per window, as these refreshes are charged to no client. None while the daily credit
 * budget is past its soft threshold (docs/design.md, "Budget").
 *
 * @param clock the deployment's clock (Unix ms, src/core/redis-time.ts): read when the scan
 *   begins, and again once the follow status is read, to judge the entries against it.
 * @returns how many parents were looked at and how many refreshes were queued.
 */
export async function runHotParentScan(
  deps: HotParentScanDeps,
  clock: () => number = Date.now,
): Promise<{ scanned: number; queued: number }> {
  const now = clock();
  // Past the budget's soft threshold the credits go to the refreshes someone asks for.
  if (deps.budget && deps.budget.state(now) !== 'normal') return { scanned: 0, queued: 0 };
  const parents = await topHotParents(
    deps.redis,
    deps.prefix,
    deps.freshMs,
    deps.topN,
    deps.minClients,
    now,
  );
  const refreshAfterMs = deps.freshMs - 2 * hotParentScanIntervalMs(deps.freshMs);
  const keys = redisKeys(deps.prefix);
  if (parents.length === 0) return { scanned: 0, queued: 0 };
  const status = await readFollowStatus(deps.redis, deps.prefix);
  // Judged by the clock read after the status, not when the scan began: a socket lost in between
  // leaves a status whose heal began after that first reading, and `awaitsHeal` takes a heal
  // begun later than the time it is given for none: every hot parent would be scanned during it.
  const judgedAt = clock();
  const due: string[] = [];
  for (const parent of parents) {
    const entry = await deps.cache.head(deps.defaultEndpointId, parent);
    // Fresh for a while yet, kept fresh by following the chain, or about to be again once the
    // heal under way vouches (docs/design.md, "Freshness").
    if (
      entry &&
      (judgedAt - entry.fetchedAt < refreshAfterMs ||
        followedFresh(entry, status, judgedAt) ||
        awaitsHeal(entry, status, judgedAt))
    ) {
      continue;
    }
    due.push(parent);
  }
  if (due.length === 0) return { scanned: parents.length, queued: 0 };
  const window = Math.floor(now / deps.freshMs);
  const admitted = await ADMIT_AHEAD.run(
    deps.redis,
    [keys.hotParentsAhead(window)],
    [deps.freshMs * 2, deps.topN, ...due],
  );
  for (const parent of admitted) {
    const cacheKey = deps.cache.key(deps.defaultEndpointId, parent);
    await addRefreshJob(deps.queue, { cacheKey, parent, endpoint: { kind: 'default' } }, 'ahead');
  }
  return { scanned: parents.length, queued: admitted.length };
}

/**
 * Admits parents to the window's refreshes ahead (the file says how): uncharged refreshes go to at
 * most `HOT_KEYS_TOP_N` parents per window, however the ranking turns within it.
 */
const ADMIT_AHEAD = new LuaScript(new URL('./lua/admit-ahead.lua', import.meta.url), replyStrings);
