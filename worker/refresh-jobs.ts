import type { Worker } from 'bullmq';
import { OVERRIDE_REFRESH_QUEUE, REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import type { WorkerBoot } from './boot.js';
import { createRefreshWorker } from './refresh-worker.js';

/**
 * The refresh workers (docs/design.md, "The refresh queue"): the configured endpoint's queue on
 * the default lane (`WORKER_CONCURRENCY`, `RPC_MAX_PER_SECOND`; with a credit budget, a parent's
 * existence is checked before its scan) and the overrides' queue on theirs. The caller closes
 * them with the other jobs (./close-jobs.ts).
 */
export function createRefreshWorkers(boot: WorkerBoot): Worker[] {
  const { kit, config, endpoints } = boot;
  // The configured endpoint's decode thread boots now, not on the first refresh: booting it then
  // took the CPU the first reply was being read with (docs/design.md, "Replies from an RPC").
  if (endpoints.defaultEndpoint) boot.defaultLane.thread.warm();
  const processorDeps = {
    cache: boot.cache,
    publisher: boot.command,
    prefix: config.QUEUE_PREFIX,
    metrics: boot.metrics,
    logger: boot.logger,
    defaultEndpoint: endpoints.defaultEndpoint,
    onError: (err: Error) => kit.reportError(err, 'refresh worker'),
    now: boot.time.now,
  };
  return [
    createRefreshWorker(
      boot.workerConnection,
      config,
      {
        name: REFRESH_QUEUE,
        concurrency: config.WORKER_CONCURRENCY,
        maxPerSecond: config.RPC_MAX_PER_SECOND,
      },
      {
        ...processorDeps,
        lane: boot.defaultLane,
        slots: boot.slots,
        // With a budget, a parent's existence is checked (1 credit) before its scan (10).
        checkParents: config.RPC_CREDITS_PER_DAY !== undefined,
      },
    ),
    createRefreshWorker(
      boot.workerConnection,
      config,
      {
        name: OVERRIDE_REFRESH_QUEUE,
        concurrency: config.RPC_OVERRIDE_CONCURRENCY,
        maxPerSecond: config.RPC_OVERRIDE_MAX_PER_SECOND,
      },
      { ...processorDeps, lane: boot.overrideLane },
    ),
  ];
}
