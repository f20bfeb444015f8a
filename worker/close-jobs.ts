import type { Worker } from 'bullmq';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerBoot } from './boot.js';

/**
 * Closes the worker's BullMQ workers, gracefully: waits for the active jobs, but not past half the
 * shutdown bound (`SHUTDOWN_TIMEOUT_MS`; BullMQ's close can also hang right after a Redis
 * restart). A job cut short is stalled, and another worker takes it over once its lock expires.
 * With Redis unreachable no active job can finish (finishing is a Redis write) and BullMQ's
 * graceful close waits for Redis for ever: close without them.
 */
export async function closeJobs(
  boot: Pick<WorkerBoot, 'config' | 'logger' | 'threads' | 'workerConnection'>,
  all: Worker[],
): Promise<void> {
  const reachable = boot.workerConnection.status === 'ready';
  const graceful =
    reachable &&
    (await Promise.race([
      Promise.all(all.map((w) => w.close())).then(() => true),
      sleep(boot.config.SHUTDOWN_TIMEOUT_MS * 0.5, false, { ref: false }),
    ]));
  if (graceful) return;
  if (reachable) {
    boot.logger.warn('active jobs did not finish in time: closing the worker without them');
  }
  // Decodes under way fail at once, so the jobs waiting on them end.
  await Promise.all(boot.threads.map((t) => t.close().catch(() => undefined)));
  await Promise.race([
    Promise.all(all.map((w) => w.close(true))),
    sleep(1_000, undefined, { ref: false }),
  ]);
}
