import { createHash } from 'node:crypto';
import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
import type { Config } from '../config.js';

/** Refreshes through `RPC_URL`, and hot-parent scans. */
export const REFRESH_QUEUE = 'subdomain-refresh';
/** Refreshes through `?rpc=`: own slots and rate, so a hostile server never takes `RPC_URL`'s. */
export const OVERRIDE_REFRESH_QUEUE = 'subdomain-refresh-override';
export const REFRESH_JOB = 'refresh';

/**
 * BullMQ priorities (1 first), by how soon someone sees the result: without them a burst of
 * ahead-of-time refreshes took the limiter's starts and cold misses waited.
 */
const REFRESH_PRIORITY = { coldMiss: 1, change: 2, stale: 5, ahead: 10 } as const;
/** A name in {@link REFRESH_PRIORITY}. */
export type RefreshPriority = keyof typeof REFRESH_PRIORITY;

/** Job counts for `sns_queue_jobs`; prioritized jobs count as waiting. */
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

/** Refreshes waiting, prioritized or not (the `QUEUE_MAX_WAITING` bound). */
export const waitingRefreshes = (queue: Queue): Promise<number> =>
  queue.getJobCountByTypes('waiting', 'prioritized');

const BACKOFF_TYPE = 'retry-after';
/** Cap on an upstream `Retry-After` between attempts. */
const MAX_JOB_RETRY_AFTER_MS = 10 * 60_000;

/**
 * BullMQ `backoffStrategy`: exponential from `JOB_BACKOFF_MS`, at least the failure's
 * `retryAfterMs` (capped): a long `Retry-After` is waited between attempts, not in a slot.
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
 * A refresh job. The default endpoint travels as `{ kind: 'default' }` so `RPC_URL` (maybe an API
 * key) is never written to Redis; override jobs are removed on finishing.
 */
export type RefreshJobData = {
  cacheKey: string;
  parent: string;
  endpoint: { kind: 'default' } | { kind: 'override'; url: string };
  /** A notification's slot, so a node lagging the websocket node cannot answer from before it. */
  minContextSlot?: number;
  /**
   * The client whose request started the refresh (`req.client`), charged its credits; absent: the
   * proactive share pays (refresh ahead, a re-read after a change). docs/design.md, "Budget".
   */
  client?: string;
  /**
   * Queued by a cold miss, whose request waits on the refresh: a large scan is then answered
   * before its write is done (docs/design.md, "Early answers").
   */
  coldMiss?: boolean;
};

/** Dedup id of a cache key: BullMQ forbids `:` in ids; a hash keeps labels out of its keys. */
export function refreshDedupId(cacheKey: string): string {
  return createHash('sha256').update(cacheKey).digest('hex').slice(0, 40);
}

/** Job defaults; attempts come on top of the RPC client's own retries. */
function refreshJobDefaults(
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
 * Queues one refresh, deduplicated on its key (BullMQ "simple mode": until the job ends, so a
 * stale entry can always queue its next). Override jobs make one attempt (the request has its 502
 * by then) and are removed at once: their URL may carry a credential.
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

/** A refresh queue on a BullMQ connection the caller owns (closed after `queue.close()`). */
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
