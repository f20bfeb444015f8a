import type { ConnectionOptions, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../src/core/config.js';
import { REFRESH_OUTCOME, type Metrics } from '../src/core/metrics.js';
import { refreshBackoff, type RefreshJobData } from '../src/core/queue/refresh-queue.js';
import {
  createRefreshProcessor,
  type RefreshProcessorDeps,
  type RefreshResult,
} from './refresh-processor.js';
import { SteadyWorker } from './steady-worker.js';

/**
 * A BullMQ worker of a refresh queue: `lane.concurrency` jobs at once and at most
 * `lane.maxPerSecond` job starts per second across every worker on this Redis (BullMQ's global
 * rate limiter), so a flood of cold parents cannot exceed the provider's plan. The configured
 * endpoint's queue (`REFRESH_QUEUE`, with `WORKER_CONCURRENCY` and `RPC_MAX_PER_SECOND`) and the
 * overrides' queue each have one.
 *
 * @param connection a connection made with `maxRetriesPerRequest: null`, owned by the caller.
 */
export function createRefreshWorker(
  connection: ConnectionOptions,
  config: Pick<
    Config,
    'QUEUE_PREFIX' | 'WORKER_LOCK_MS' | 'WORKER_STALLED_INTERVAL_MS' | 'JOB_BACKOFF_MS'
  >,
  queue: { name: string; concurrency: number; maxPerSecond: number },
  deps: RefreshProcessorDeps & {
    metrics: Metrics;
    logger: Logger;
    /** Where the worker's 'error' events go (a rate-limited log); logged with their stack if absent. */
    onError?: (err: Error) => void;
  },
  opts: { autorun?: boolean } = {},
): Worker<RefreshJobData, RefreshResult | undefined> {
  const refresh = createRefreshProcessor(deps);
  // A failed fetch waits before the next (SteadyWorker): a refused command must not spin.
  const worker = new SteadyWorker<RefreshJobData, RefreshResult | undefined>(
    queue.name,
    (job, token, signal) => refresh(job, token, signal),
    {
      connection,
      prefix: config.QUEUE_PREFIX,
      concurrency: queue.concurrency,
      limiter: { max: queue.maxPerSecond, duration: 1000 },
      settings: { backoffStrategy: refreshBackoff(config.JOB_BACKOFF_MS) },
      // A job whose worker died (crash, SIGKILL) is taken over by another worker once its lock has
      // expired and the next stalled-job check runs: at most about lock + 2 intervals later.
      lockDuration: config.WORKER_LOCK_MS,
      stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
      autorun: opts.autorun ?? true,
    },
  );
  worker.on('completed', () =>
    deps.metrics.refreshJobs.inc({ outcome: REFRESH_OUTCOME.completed }),
  );
  worker.on('failed', (job) => {
    const attempts = job?.opts.attempts ?? 1;
    const final = !job || job.attemptsMade >= attempts || job.finishedOn !== undefined;
    deps.metrics.refreshJobs.inc({
      outcome: final ? REFRESH_OUTCOME.failed : REFRESH_OUTCOME.retried,
    });
  });
  // Without a listener an 'error' event would crash the process; Redis faults are logged instead.
  worker.on('error', deps.onError ?? ((err) => deps.logger.error({ err }, 'refresh worker error')));
  return worker;
}
