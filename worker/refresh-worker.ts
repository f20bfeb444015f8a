import { Worker, type ConnectionOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../src/config.js';
import type { Metrics } from '../src/metrics/metrics.js';
import { REFRESH_QUEUE, type RefreshJobData } from '../src/queue/refresh-queue.js';
import {
  createRefreshProcessor,
  type RefreshProcessorDeps,
  type RefreshResult,
} from './refresh-processor.js';

/**
 * The BullMQ worker of the refresh queue: `WORKER_CONCURRENCY` jobs at once and at most
 * `RPC_MAX_PER_SECOND` job starts per second across every worker on this Redis (BullMQ's global
 * rate limiter), so a flood of cold parents cannot exceed the provider's plan.
 *
 * @param connection a connection made with `maxRetriesPerRequest: null`, owned by the caller.
 */
export function createRefreshWorker(
  connection: ConnectionOptions,
  config: Pick<Config, 'QUEUE_PREFIX' | 'WORKER_CONCURRENCY' | 'RPC_MAX_PER_SECOND'>,
  deps: RefreshProcessorDeps & { metrics: Metrics; logger: Logger },
  opts: { autorun?: boolean } = {},
): Worker<RefreshJobData, RefreshResult> {
  const worker = new Worker<RefreshJobData, RefreshResult>(
    REFRESH_QUEUE,
    createRefreshProcessor(deps),
    {
      connection,
      prefix: config.QUEUE_PREFIX,
      concurrency: config.WORKER_CONCURRENCY,
      limiter: { max: config.RPC_MAX_PER_SECOND, duration: 1000 },
      autorun: opts.autorun ?? true,
    },
  );
  worker.on('completed', () => deps.metrics.refreshJobs.inc({ outcome: 'completed' }));
  worker.on('failed', (job) => {
    const attempts = job?.opts.attempts ?? 1;
    const final = !job || job.attemptsMade >= attempts || job.finishedOn !== undefined;
    deps.metrics.refreshJobs.inc({ outcome: final ? 'failed' : 'retried' });
  });
  // Without a listener an 'error' event would crash the process; Redis faults are logged instead.
  worker.on('error', (err) => deps.logger.error({ err }, 'refresh worker error'));
  return worker;
}
