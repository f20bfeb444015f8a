import type { Worker } from 'bullmq';
import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import type { Config } from '../src/core/config.js';
import { buildOpsApp } from '../src/core/http/ops-app.js';
import type { Readiness } from '../src/core/http/ops-routes.js';
import type { Metrics } from '../src/core/metrics.js';
import { refreshQueueCounts } from '../src/core/queue/refresh-queue.js';
import type { RedisAccess, RedisErrorLog } from '../src/core/redis.js';
import { createRuntimeKit, openOnKit, type RuntimeKit } from '../src/core/runtime/kit.js';
import { bootWorker } from './boot.js';
import { closeJobs } from './close-jobs.js';
import { startFollower, startRereads } from './follow-jobs.js';
import { createRefreshWorkers } from './refresh-jobs.js';
import { openRegistryJobs } from './registry-jobs.js';
import { startRegistrySweep, sweepEveryMs } from './registry-sweep.js';
import { openScanJobs } from './scan-jobs.js';
import { SteadyWorker } from './steady-worker.js';

export type WorkerRuntime = {
  metricsPort: number | undefined;
  /**
   * The websocket's state: `off` without one (`RPC_WS=off`, no `RPC_URL`, no hot parents), else
   * whether it is open now.
   */
  websocket(): 'off' | 'connected' | 'disconnected';
  /** The kit's close ({@link RuntimeKit.close}): follower, jobs, ops server, queues, then Redis. */
  close(): Promise<void>;
};

/**
 * Opens the worker's resources through one {@link RuntimeKit} (Redis connections for BullMQ's
 * blocking reads, commands and the queue) and starts its workers. A failed start closes what it
 * had opened.
 *
 * @param opts.serveMetrics serve `/metrics`, `/healthz`, `/readyz` on `WORKER_METRICS_PORT`.
 * @param opts.lookup DNS resolution for RPC connections (tests stage DNS rebinding with it).
 * @param opts.redisErrors the process's Redis error log (see `startApi`).
 * @param opts.redisAccess what the Redis user may run (`checkRedisAtStart`); all if absent.
 */
export async function startWorker(
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: {
    serveMetrics: boolean;
    lookup?: LookupFunction;
    redisErrors?: RedisErrorLog;
    redisAccess?: RedisAccess;
    /** This process's own clock, Unix ms (`Date.now`; tests skew it). */
    clock?: () => number;
  },
): Promise<WorkerRuntime> {
  const kit = createRuntimeKit({
    name: 'worker',
    config,
    logger,
    redisErrors: opts.redisErrors,
    redisAccess: opts.redisAccess,
  });
  return openOnKit(kit, (k) => openWorker(k, config, metrics, logger, opts));
}

/**
 * The worker's boot (./boot.ts), its readiness and ops server, then its jobs, each from the file
 * that holds it. The order is the close order reversed: the follower closes first, the ops server
 * after the jobs (it answers while they drain), the queues and connections last.
 */
async function openWorker(
  kit: RuntimeKit,
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: { serveMetrics: boolean; lookup?: LookupFunction; clock?: () => number },
): Promise<WorkerRuntime> {
  const boot = await bootWorker(kit, config, metrics, logger, opts);
  const { workerConnection, queueConnection, command, queue, cache } = boot;
  const defaultEndpoint = boot.endpoints.defaultEndpoint;
  const scans = openScanJobs(boot);
  // Known before the follower starts: /metrics reads the parts (redis_up) while the worker opens.
  const following = Boolean(defaultEndpoint && config.RPC_WS_URL);
  const redisReady = kit.readiness(command, () => ({
    rpc: config.RPC_URL ? 'configured' : 'unset',
    websocket: following ? 'configured' : 'off',
  }));
  const workers: Worker[] = [];
  // Ready means the worker can do its job: Redis answers (the probe's write) and it takes jobs,
  // which the probe's connection does not show: its own connections are up, every BullMQ worker
  // runs, and the last fetch of each succeeded (a refused script, e.g. an ACL without EVALSHA,
  // fails every fetch while Redis answers the probe).
  const readiness = async (): Promise<Readiness> => {
    const { ready, parts } = await redisReady();
    const takesJobs =
      !kit.closing &&
      workerConnection.status === 'ready' &&
      queueConnection.status === 'ready' &&
      workers.every((w) => w.isRunning() && !(w instanceof SteadyWorker && w.fetchFailing));
    // Refresh-ahead is part of the job when configured: not ready while its scheduler is missing
    // and could not be installed again.
    // Said only while Redis answers, as the API does: the last check is all it knows otherwise.
    const refreshAhead = scanWatch ? scanWatch.state() : 'off';
    return {
      ready: ready && takesJobs && refreshAhead !== 'stopped',
      parts: { ...parts, queue: takesJobs, ...(parts.redis ? { refreshAhead } : {}) },
    };
  };
  metrics.setRedisUpSource(async () => (await redisReady()).parts.redis);
  // The API's ops routes, in the same shapes. Opened before the jobs so it closes after them:
  // /metrics, and /readyz (503 once closing), answer while they drain.
  const opsApp = opts.serveMetrics
    ? kit.closes(
        'worker ops server',
        buildOpsApp({ logger, registry: metrics.registry, readiness }),
        (a) => a.close(),
      )
    : undefined;
  workers.push(...createRefreshWorkers(boot));
  if (scans) workers.push(scans.work());
  const registry =
    config.SUBDOMAIN_INDEX === 'registry' && config.RPC_WS_URL && defaultEndpoint
      ? openRegistryJobs(boot, defaultEndpoint)
      : undefined;
  if (registry) workers.push(registry.worker);
  kit.closes('worker jobs', workers, (all) => closeJobs(boot, all));
  // Whether this worker owns the follow stream (set once the follower exists): it alone audits.
  let streamOwner = () => false;
  registry?.supervise(() => streamOwner());
  const scanWatch = await scans?.watch();

  // Parents idle past the stale window leave the registry the chain is followed for.
  if (defaultEndpoint) {
    kit.closes(
      'worker registry sweep',
      startRegistrySweep({
        cache,
        endpointId: defaultEndpoint.id,
        logger,
        everyMs: sweepEveryMs(config.CACHE_STALE_MS),
      }),
      (stop) => stop(),
    );
  }

  // The follower's jobs (./follow-jobs.ts): the re-read job, then the follower. Every cached
  // parent follows the chain through one stream, owned by one worker at a time (docs/design.md,
  // "Freshness"); without a websocket the clock keeps entries fresh. Declared last, so it closes
  // first: its lease goes back at once to another worker.
  const followJobs = defaultEndpoint
    ? { ...boot, defaultEndpoint, ...(registry ? { registry: registry.feed } : {}) }
    : undefined;
  const rereads = followJobs ? startRereads(followJobs) : undefined;
  const follower =
    followJobs && rereads && following ? startFollower(followJobs, rereads) : undefined;

  if (follower) streamOwner = () => follower.owner;

  metrics.setQueueCountsSource(() => refreshQueueCounts(queue));
  await opsApp?.listen({ port: config.WORKER_METRICS_PORT, host: config.HOST });
  const opsAddress = opsApp?.server.address();
  return {
    metricsPort: typeof opsAddress === 'object' && opsAddress ? opsAddress.port : undefined,
    websocket: () => (!follower ? 'off' : follower.connected ? 'connected' : 'disconnected'),
    close: () => kit.close(),
  };
}
