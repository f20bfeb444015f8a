import { createHash } from 'node:crypto';
import { Queue, type ConnectionOptions, type DefaultJobOptions } from 'bullmq';
import type { Config } from '../config.js';

/** BullMQ queue name (DESIGN.md, "The refresh worker"). */
export const REFRESH_QUEUE = 'subdomain-refresh';
export const REFRESH_JOB = 'refresh';

/**
 * What a refresh job carries. The default endpoint travels as `{ kind: 'default' }` so the URL in
 * `RPC_URL` (which may hold an API key) is never written to Redis; an override's URL has to travel,
 * and its jobs are removed as soon as they finish.
 */
export type RefreshJobData = {
  cacheKey: string;
  parent: string;
  endpoint: { kind: 'default' } | { kind: 'override'; url: string };
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
    backoff: { type: 'exponential', delay: config.JOB_BACKOFF_MS },
    removeOnComplete: { age: 3600, count: 1000 },
    removeOnFail: { age: 7 * 86400, count: 5000 },
  };
}

/**
 * Queues one refresh of `data.cacheKey`, deduplicated on it: while a job for the key is waiting,
 * delayed or active, adding another returns that job (BullMQ deduplication, "simple mode", which
 * ends when the job completes or fails, so a stale entry can always queue its next refresh).
 * Override jobs are removed as soon as they finish: their URL may carry a credential.
 */
export async function addRefreshJob(
  queue: Queue<RefreshJobData>,
  data: RefreshJobData,
): Promise<void> {
  const override = data.endpoint.kind === 'override';
  await queue.add(REFRESH_JOB, data, {
    deduplication: { id: refreshDedupId(data.cacheKey) },
    ...(override ? { removeOnComplete: true, removeOnFail: true } : {}),
  });
}

/**
 * Creates the refresh queue on a connection made for BullMQ (`maxRetriesPerRequest: null`).
 * The caller owns the connection and closes it after `queue.close()`.
 */
export function createRefreshQueue(
  connection: ConnectionOptions,
  config: Pick<Config, 'QUEUE_PREFIX' | 'JOB_ATTEMPTS' | 'JOB_BACKOFF_MS'>,
): Queue<RefreshJobData> {
  return new Queue<RefreshJobData>(REFRESH_QUEUE, {
    connection,
    prefix: config.QUEUE_PREFIX,
    defaultJobOptions: refreshJobDefaults(config),
  });
}
