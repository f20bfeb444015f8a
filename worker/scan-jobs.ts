import type { Worker } from 'bullmq';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerBoot } from './boot.js';
import {
  createHotParentScanQueue,
  createHotParentScanWorker,
  runHotParentScan,
  watchHotParentScans,
  type HotParentScanWatch,
} from './hot-parent-scan.js';

/** How long the start waits for the hot-parent scans' scheduling (Redis), in milliseconds. */
const SCHEDULE_START_WAIT_MS = 5_000;

/** The hot-parent scans' jobs (refresh-ahead), opened in the worker's order by its runtime. */
export type ScanJobs = {
  /** The BullMQ worker of the scans; the caller closes it with the other jobs. */
  work(): Worker;
  /**
   * Installs the scans' scheduler and keeps it installed, stopped with the kit; resolves once the
   * first install settled, or after {@link SCHEDULE_START_WAIT_MS}.
   */
  watch(): Promise<HotParentScanWatch>;
};

/**
 * Opens the queue of hot-parent scans (docs/design.md, "The refresh queue"), closed with the
 * kit; undefined without refresh-ahead (`HOT_KEYS_TOP_N=0`) or without a configured endpoint.
 */
export function openScanJobs(boot: WorkerBoot): ScanJobs | undefined {
  const { kit, config, logger, time } = boot;
  const defaultEndpoint = boot.endpoints.defaultEndpoint;
  if (config.HOT_KEYS_TOP_N <= 0 || !defaultEndpoint) return undefined;
  const freshMs = config.CACHE_FRESH_MS;
  const scan = () =>
    runHotParentScan(
      {
        redis: boot.command,
        cache: boot.cache,
        queue: boot.queue,
        prefix: config.QUEUE_PREFIX,
        freshMs,
        topN: config.HOT_KEYS_TOP_N,
        minClients: config.HOT_KEYS_MIN_CLIENTS,
        defaultEndpointId: defaultEndpoint.id,
        budget: boot.budget,
      },
      time.now,
    );
  const queue = kit.closes(
    'worker hot-parent scan queue',
    kit.watchErrors(
      createHotParentScanQueue(boot.queueConnection, config.QUEUE_PREFIX),
      'worker hot-parent scan queue',
    ),
    (q) => q.close().catch(() => undefined),
  );
  return {
    work: () =>
      createHotParentScanWorker(boot.workerConnection, config.QUEUE_PREFIX, scan, (err) =>
        kit.reportError(err, 'hot-parent scan worker'),
      ),
    async watch() {
      // Installed at start and kept installed: a Redis that lost its data lost the scheduler too.
      const watch = kit.closes(
        'worker hot-parent scan schedule',
        watchHotParentScans({
          queue,
          freshMs,
          onMissing: () =>
            logger.warn(
              'the hot-parent scans were no longer scheduled (Redis lost its data?): scheduled again',
            ),
          onError: (err) =>
            logger.warn({ err: String(err) }, 'could not schedule hot-parent scans (retried)'),
        }),
        (w) => w.stop(),
      );
      // Bounded, as the API's wait for Redis: BullMQ waits for a ready connection for ever, and a
      // Redis that refuses the worker (protected mode, a bad password) must not keep its ops
      // port, so its health check and /metrics, closed. The scheduling goes on in the background.
      await Promise.race([
        watch.installed,
        sleep(SCHEDULE_START_WAIT_MS, undefined, { ref: false }),
      ]);
      return watch;
    },
  };
}
