import { createHash } from 'node:crypto';
import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
import type { Config } from '../config.js';

/** The queue of refreshes through the configured `RPC_URL` (and the hot-parent scans). */
export const REFRESH_QUEUE = 'subdomain-refresh';
/**
 * The queue of refreshes through `?rpc=` overrides: its own worker slots and rate, so requests
 * pointed at a slow or hostile server never take the capacity of the configured endpoint.
 */
export const OVERRIDE_REFRESH_QUEUE = 'subdomain-refresh-override';
export const REFRESH_JOB = 'refresh';

/**
 * BullMQ priorities of refresh jobs (1 runs first), by how soon someone sees the result: without
 * them a burst of ahead-of-time refreshes took the rate limiter's starts and cold misses waited.
 */
export const REFRESH_PRIORITY = { coldMiss: 1, change: 2, stale: 5, ahead: 10 } as const;
export type RefreshPriority = keyof typeof REFRESH_PRIORITY;

/**
 * Job counts by state for `sns_queue_jobs`: prioritized jobs (all refreshes, see
 * {@link REFRESH_PRIORITY}) are waiting jobs to the reader, and counted with them.
 */
export async function refreshQueueCounts(
  queue: Queue,
): Promise<Record<'waiting' | 'active' | 'delayed' | 'failed', number>> {
  const c = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
  return {
    waiting: (c.waiting ?? 0) + (c.prioritized ?? 0),
    active: c.active ?? 0,
    delayed: c.delayed ?? 0,
    failed: c.failed ?? 0,
  };
}

/** Refreshes waiting to start, prioritized or not (the queue bound, `QUEUE_MAX_WAITING`). */
export const waitingRefreshes = (queue: Queue): Promise<number> =>
  queue.getJobCountByTypes('waiting', 'prioritized');

/** The name of the custom back-off of refresh jobs (see {@link refreshBackoff}). */
const BACKOFF_TYPE = 'retry-after';
/** Longest wait an upstream's `Retry-After` can impose on a job between attempts. */
const MAX_JOB_RETRY_AFTER_MS = 10 * 60_000;

/**
 * The back-off of refresh jobs: exponential from `JOB_BACKOFF_MS`, but never shorter than the
 * `Retry-After` of the failure (an RpcCallError's `retryAfterMs`, capped at ten minutes): a long
 * `Retry-After` is waited here, between attempts, not in a worker slot (src/worker/rpc/client.ts).
 * Passed to BullMQ workers as `settings.backoffStrategy`.
 */
export function refreshBackoff(baseMs: number) {
  return (attemptsMade: number, _type?: string, err?: Error): number => {
    const exponential = Math.round(baseMs * 2 ** Math.max(0, attemptsMade - 1));
    const asked = (err as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
    const retryAfter = typeof asked === 'number' ? Math.min(asked, MAX_JOB_RETRY_AFTER_MS) : 0;
    return Math.max(exponential, retryAfter);
  };
}

/**
 * What a refresh job carries. The default endpoint travels as `{ kind: 'default' }` so the URL in
 * `RPC_URL` (which may hold an API key) is never written to Redis; an override's URL has to travel,
 * and its jobs are removed as soon as they finish.
 */
export type RefreshJobData = {
  cacheKey: string;
  parent: string;
  endpoint: { kind: 'default' } | { kind: 'override'; url: string };
  /**
   * The slot the scan must reflect at least: a notification's, when one caused the re-read, so a
   * node lagging behind the websocket node cannot answer from before the change.
   */
  minContextSlot?: number;
};

/**
 * The deduplication id of a cache key. BullMQ forbids `:` in custom ids and a hash keeps parent
 * labels (any Unicode) out of BullMQ's key names.
 */
export function refreshDedupId(cacheKey: string): string {
  return createHash('sha256').update(cacheKey).digest('hex').slice(0, 40);
}

/** Job defaults: attempts with exponential back-off on top of the RPC client's own retries. */
export function refreshJobDefaults(
  config: Pick<Config, 'JOB_ATTEMPTS' | 'JOB_BACKOFF_MS'>,
): DefaultJobOptions {
  return {
    attempts: config.JOB_ATTEMPTS,
    backoff: { type: BACKOFF_TYPE, delay: config.JOB_BACKOFF_MS },
    removeOnComplete: { age: 3600, count: 1000 },
    removeOnFail: { age: 7 * 86400, count: 5000 },
  };
}

/**
 * Queues one refresh of `data.cacheKey` on `queue` (the override queue for an override), at
 * `priority` ({@link REFRESH_PRIORITY}),
 * deduplicated on it: while a job for the key is waiting, delayed or active, adding another
 * returns that job (BullMQ deduplication, "simple mode", which ends when the job completes or
 * fails, so a stale entry can always queue its next refresh). Override jobs make one attempt (the
 * request that asked has its 502 by then; a later request queues anew) and are removed as soon as
 * they finish: their URL may carry a credential.
 */
export async function addRefreshJob(
  queue: Queue<RefreshJobData>,
  data: RefreshJobData,
  priority: RefreshPriority,
): Promise<void> {
  const override = data.endpoint.kind === 'override';
  await queue.add(REFRESH_JOB, data, {
    deduplication: { id: refreshDedupId(data.cacheKey) },
    priority: REFRESH_PRIORITY[priority],
    ...(override ? { attempts: 1, removeOnComplete: true, removeOnFail: true } : {}),
  });
}

/**
 * Creates a refresh queue (`REFRESH_QUEUE` unless `name` says otherwise) on a connection made for
 * BullMQ (`maxRetriesPerRequest: null`). The caller owns the connection and closes it after
 * `queue.close()`.
 */
export function createRefreshQueue(
  connection: ConnectionOptions,
  config: Pick<Config, 'QUEUE_PREFIX' | 'JOB_ATTEMPTS' | 'JOB_BACKOFF_MS'>,
  name: string = REFRESH_QUEUE,
): Queue<RefreshJobData> {
  return new Queue<RefreshJobData>(name, {
    connection,
    prefix: config.QUEUE_PREFIX,
    defaultJobOptions: refreshJobDefaults(config),
  });
}
