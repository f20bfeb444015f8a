import { Queue, type ConnectionOptions } from 'bullmq';

/**
 * The hot-parent scans' queue and job scheduler, as both runtimes see them: the worker installs the
 * scheduler and runs the scans (worker/hot-parent-scan.ts); the API only reads whether they run,
 * for `/readyz` (docs/design.md, "Shutdown, liveness and readiness").
 */

/**
 * The queue of hot-parent scans, apart from the refresh queues: a scan is bookkeeping (a few Redis
 * reads), and on a refresh queue it took a start of the RPC rate limiter each time.
 */
export const HOT_PARENT_SCAN_QUEUE = 'hot-parent-scans';
/** The id of the BullMQ job scheduler that runs the scans (one per deployment). */
export const HOT_PARENT_SCHEDULER_ID = 'hot-parents';

/**
 * How often the hot parents are checked: six times per freshness window (at least every
 * 500 ms), so an entry is refreshed within its last third of freshness, before it goes stale.
 */
export const hotParentScanIntervalMs = (freshMs: number) => Math.max(500, Math.floor(freshMs / 6));

/**
 * How late the scheduler's next run may be before refresh-ahead counts as stopped: three scans, and
 * at least 30 s, because the run time was computed on a worker's clock and is read on another
 * machine's (a skew under that is tolerated).
 */
const refreshAheadOverdueMs = (freshMs: number) =>
  Math.max(30_000, 3 * hotParentScanIntervalMs(freshMs));

/**
 * `/readyz`'s `refreshAhead`: `off` when the configuration runs no refresh-ahead
 * (`HOT_KEYS_TOP_N=0` or no `RPC_URL`); `running` while the scheduler exists and its next run is
 * not overdue; `stopped` when it is missing (Redis lost its data, no worker has started) or no
 * worker takes its runs.
 */
export type RefreshAheadState = 'running' | 'stopped' | 'off';

/** The queue of hot-parent scans (for its scheduler). */
export function createHotParentScanQueue(connection: ConnectionOptions, prefix: string): Queue {
  return new Queue(HOT_PARENT_SCAN_QUEUE, { connection, prefix });
}

/**
 * Whether the scans run, read from Redis (one round trip): `running` or `stopped`
 * ({@link RefreshAheadState}).
 *
 * @param now the reader's clock, in Unix milliseconds.
 * @throws the Redis error when the scheduler cannot be read.
 */
export async function readRefreshAhead(
  queue: Queue,
  freshMs: number,
  now = Date.now(),
): Promise<'running' | 'stopped'> {
  const scheduler = await queue.getJobScheduler(HOT_PARENT_SCHEDULER_ID);
  if (!scheduler) return 'stopped';
  const next = scheduler.next ?? Number.POSITIVE_INFINITY;
  return now - next > refreshAheadOverdueMs(freshMs) ? 'stopped' : 'running';
}
