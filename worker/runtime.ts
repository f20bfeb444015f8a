import type { Worker } from 'bullmq';
import type { LookupFunction } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import type { Config } from '../src/core/config.js';
import { buildOpsApp } from '../src/core/http/ops-app.js';
import type { Metrics } from '../src/core/metrics.js';
import {
  createRefreshQueue,
  OVERRIDE_REFRESH_QUEUE,
  REFRESH_QUEUE,
  refreshQueueCounts,
} from '../src/core/queue/refresh-queue.js';
import type { RedisAccess, RedisClient, RedisErrorLog } from '../src/core/redis.js';
import { RpcClient } from './rpc/client.js';
import { CreditMeter } from './rpc/credits.js';
import { CreditBudget, creditSharesOf } from '../src/core/rpc/budget.js';
import { EndpointSelector } from '../src/core/rpc/endpoint.js';
import { SlotClock } from '../src/core/rpc/slot.js';
import { Agents } from './rpc/transport.js';
import type { Readiness } from '../src/core/http/ops-routes.js';
import { SteadyWorker } from './steady-worker.js';
import { DecodeThread } from './sns/decode-thread.js';
import type { DiscoveryLane } from './sns/subdomain-discovery.js';
import { createRuntimeKit, openOnKit, type RuntimeKit } from '../src/core/runtime/kit.js';
import { laneRpc } from './follow/lane-rpc.js';
import { systemClock, type Clock } from './follow/types.js';
import { CLOCK_START_WAIT_MS, RedisTime } from '../src/core/redis-time.js';
import { startRegistrySweep } from './registry-sweep.js';
import { startFollower, startRereads } from './follow-jobs.js';
import { publishChange } from '../src/core/queue/refresh-events.js';
import {
  createHotParentScanQueue,
  createHotParentScanWorker,
  runHotParentScan,
  watchHotParentScans,
} from './hot-parent-scan.js';
import { createRefreshWorker } from './refresh-worker.js';
import {
  RegistryIndex,
  REGISTRY_EVENTS,
  REGISTRY_SERVING_VALUE,
  registryServing,
} from '../src/core/cache/registry-index.js';
import { readFollowStatus } from '../src/core/cache/follow-status.js';
import { RegistryFeed } from './registry/feed.js';
import { AUDIT_EVERY_MS, auditRound } from './registry/audit.js';
import {
  createRegistryBuildQueue,
  createRegistryBuildWorker,
  superviseBuild,
} from './registry/build.js';

/** How often the registry index's build is supervised (started, resumed, rebuilt), in ms. */
const REGISTRY_SUPERVISE_MS = 5_000;

/** How long the start waits for the hot-parent scans' scheduling (Redis), in milliseconds. */
const SCHEDULE_START_WAIT_MS = 5_000;

/**
 * How often idle parents are swept from the registry (docs/design.md, "The subdomain cache"): a
 * minute, or a quarter of the stale window when that is shorter, so an entry nobody asks for
 * leaves about when its stale window ends (its keys outlive it only so the sweep finds them).
 */
const sweepEveryMs = (staleMs: number) =>
  Math.max(1_000, Math.min(60_000, Math.floor(staleMs / 4)));

/** Longest label from the configured RPC: a reverse record holds at most about this much text. */
const DEFAULT_MAX_LABEL_BYTES = 1024 * 1024;

type LaneLimits = {
  retries: number;
  refreshMs?: number;
  maxResponseBytes: number;
  decodeMs: number;
  maxLabelBytes: number;
  maxAnswerBytes: number;
};

/**
 * The heap of a decode thread, in MiB: 24 times the largest reply, at least 64, at most 2048.
 * Within the bounds of worker/rpc/bounded-json.ts the worst body found (objects of one distinct key
 * each, at the value cap, padded with a long string) keeps about 10 times its bytes after the
 * parse, a little more during it; the limit must stay well above that, because a thread that
 * reaches its heap limit while it is being terminated aborts the whole process (V8's fatal
 * out-of-memory), not just itself.
 */
export const decodeHeapMb = (maxResponseBytes: number) =>
  Math.min(2048, Math.max(64, Math.ceil((24 * maxResponseBytes) / (1024 * 1024))));

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

async function openWorker(
  kit: RuntimeKit,
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: { serveMetrics: boolean; lookup?: LookupFunction; clock?: () => number },
): Promise<WorkerRuntime> {
  const workerConnection = kit.redis('worker', 'worker blocking connection');
  const command = kit.redis('command', 'worker command connection');
  const queueConnection = kit.redis('queue', 'worker queue connection');
  const endpoints = new EndpointSelector(config);
  const agents = kit.closes('worker rpc agents', new Agents({ lookup: opts.lookup }), (a) =>
    a.destroy(),
  );
  // The configured endpoint's spend, counted across replicas (docs/design.md, "Budget").
  const budget = new CreditBudget({
    redis: command,
    prefix: config.QUEUE_PREFIX,
    creditsPerDay: config.RPC_CREDITS_PER_DAY,
    shares: creditSharesOf(config),
    freshMs: config.CACHE_FRESH_MS,
    metrics,
  });
  // Closes after the jobs and the follower, before the connections: their last spends are added
  // to the day's counter.
  const credits = kit.closes(
    'worker credit counter',
    new CreditMeter({ metrics, redis: command, prefix: config.QUEUE_PREFIX, budget, logger }),
    (c) => c.close(),
  );
  const lane = (limits: LaneLimits): DiscoveryLane => ({
    rpc: new RpcClient({
      metrics,
      agents,
      timeoutMs: config.RPC_TIMEOUT_MS,
      retries: limits.retries,
      maxResponseBytes: limits.maxResponseBytes,
      costs: config.RPC_CREDITS,
      credits,
      isTrusted: (endpoint) =>
        endpoint.kind === 'default' || endpoints.isAllowlisted(new URL(endpoint.url)),
    }),
    thread: new DecodeThread({
      heapMb: decodeHeapMb(limits.maxResponseBytes),
      taskMs: limits.decodeMs,
    }),
    maxLabelBytes: limits.maxLabelBytes,
    maxAnswerBytes: limits.maxAnswerBytes,
    refreshMs: limits.refreshMs,
  });
  const defaultLane = lane({
    retries: config.RPC_RETRIES,
    maxResponseBytes: config.RPC_MAX_RESPONSE_BYTES,
    decodeMs: config.RPC_DECODE_MS,
    maxLabelBytes: DEFAULT_MAX_LABEL_BYTES,
    maxAnswerBytes: config.RPC_MAX_RESPONSE_BYTES,
  });
  // One retry at most: a server that fails twice is as likely to be slow on purpose as by accident.
  const overrideLane = lane({
    retries: Math.min(config.RPC_RETRIES, 1),
    // The request that asked has its answer by then: past it, the server only holds a slot.
    refreshMs: config.SUBDOMAINS_WAIT_MS,
    maxResponseBytes: config.RPC_OVERRIDE_MAX_RESPONSE_BYTES,
    decodeMs: config.RPC_OVERRIDE_DECODE_MS,
    maxLabelBytes: config.RPC_OVERRIDE_MAX_LABEL_BYTES,
    maxAnswerBytes: config.RPC_OVERRIDE_MAX_ANSWER_BYTES,
  });
  const threads = kit.closes(
    'worker decode threads',
    [defaultLane.thread, overrideLane.thread],
    async (all) => {
      await Promise.all(all.map((t) => t.close().catch(() => undefined)));
    },
  );
  // Every time written for freshness (a scan's start, the stream's epoch and healthyUntil, a
  // check's start) is on Redis's clock, the one the API reads them with (docs/design.md,
  // "Freshness").
  const time = kit.closes('worker clock', new RedisTime(command, opts.clock), (t) => t.stop());
  time.start(undefined, (err) => kit.reportError(asError(err), 'worker clock'));
  await time.syncWithin(CLOCK_START_WAIT_MS);
  const clock: Clock = { now: time.now, after: (ms, fn) => systemClock.after(ms, fn) };
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_MS,
    config.CACHE_STALE_MS,
    { ttlMs: config.RPC_OVERRIDE_CACHE_MS, maxBytes: config.RPC_OVERRIDE_CACHE_BYTES },
    time.now,
  );
  // The newest slot the configured RPC has shown, shared by its refreshes and the follower.
  const slots = new SlotClock();
  const queue = kit.closes(
    'worker refresh queue',
    kit.watchErrors(createRefreshQueue(queueConnection, config), 'worker refresh queue'),
    (q) => q.close().catch(() => undefined),
  );
  const freshMs = config.CACHE_FRESH_MS;
  const defaultEndpoint = endpoints.defaultEndpoint;
  const hotParentScan =
    config.HOT_KEYS_TOP_N > 0 && defaultEndpoint
      ? () =>
          runHotParentScan(
            {
              redis: command,
              cache,
              queue,
              prefix: config.QUEUE_PREFIX,
              freshMs,
              topN: config.HOT_KEYS_TOP_N,
              minClients: config.HOT_KEYS_MIN_CLIENTS,
              defaultEndpointId: defaultEndpoint.id,
              budget,
            },
            time.now(),
          )
      : undefined;
  const hotParentScans = hotParentScan
    ? kit.closes(
        'worker hot-parent scan queue',
        kit.watchErrors(
          createHotParentScanQueue(queueConnection, config.QUEUE_PREFIX),
          'worker hot-parent scan queue',
        ),
        (q) => q.close().catch(() => undefined),
      )
    : undefined;
  const redisReady = kit.readiness(command, () => ({
    rpc: config.RPC_URL ? 'configured' : 'unset',
    websocket: follower ? 'configured' : 'off',
  }));
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
  const processorDeps = {
    cache,
    publisher: command,
    prefix: config.QUEUE_PREFIX,
    metrics,
    logger,
    defaultEndpoint: endpoints.defaultEndpoint,
    onError: (err: Error) => kit.reportError(err, 'refresh worker'),
    now: time.now,
  };
  const workers: Worker[] = [
    createRefreshWorker(
      workerConnection,
      config,
      {
        name: REFRESH_QUEUE,
        concurrency: config.WORKER_CONCURRENCY,
        maxPerSecond: config.RPC_MAX_PER_SECOND,
      },
      {
        ...processorDeps,
        lane: defaultLane,
        slots,
        // With a budget, a parent's existence is checked (1 credit) before its scan (10).
        checkParents: config.RPC_CREDITS_PER_DAY !== undefined,
      },
    ),
    createRefreshWorker(
      workerConnection,
      config,
      {
        name: OVERRIDE_REFRESH_QUEUE,
        concurrency: config.RPC_OVERRIDE_CONCURRENCY,
        maxPerSecond: config.RPC_OVERRIDE_MAX_PER_SECOND,
      },
      { ...processorDeps, lane: overrideLane },
    ),
  ];
  if (hotParentScan && hotParentScans) {
    workers.push(
      createHotParentScanWorker(workerConnection, config.QUEUE_PREFIX, hotParentScan, (err) =>
        kit.reportError(err, 'hot-parent scan worker'),
      ),
    );
  }
  // The registry index (docs/design.md, "The registry index"): built in pieces once the stream is
  // followed whole, fed by the stream from then on.
  const registry =
    config.SUBDOMAIN_INDEX === 'registry' && config.RPC_WS_URL && defaultEndpoint
      ? (() => {
          const index = new RegistryIndex(command, config.QUEUE_PREFIX);
          const buildQueue = kit.closes(
            'worker registry build queue',
            kit.watchErrors(
              createRegistryBuildQueue(queueConnection, config.QUEUE_PREFIX),
              'worker registry build queue',
            ),
            (q) => q.close().catch(() => undefined),
          );
          const followRpc = laneRpc(defaultLane, defaultEndpoint, slots);
          const feed = new RegistryFeed({
            index,
            rpc: followRpc,
            logger,
            // The API's live updates of those parents read them again.
            changed: (parentIds) => {
              for (const parent of parentIds) {
                void publishChange(
                  command,
                  config.QUEUE_PREFIX,
                  { endpointId: REGISTRY_EVENTS, parent, ok: true },
                  (err, attempt, final) => {
                    if (final)
                      logger.warn({ err: String(err), attempt }, 'registry: an event was lost');
                  },
                );
              }
            },
            lost: (why) => {
              logger.warn({ why }, 'registry: the stream lost facts; the index is behind');
              void index.markBehind().catch(() => undefined);
            },
          });
          // The build shares nothing a refresh waits on: a lane (decode thread) and a blocking
          // connection of its own, and it stands aside while refresh jobs wait to be taken.
          const buildLane = lane({
            retries: config.RPC_RETRIES,
            maxResponseBytes: config.RPC_MAX_RESPONSE_BYTES,
            decodeMs: config.RPC_DECODE_MS,
            maxLabelBytes: DEFAULT_MAX_LABEL_BYTES,
            maxAnswerBytes: config.RPC_MAX_RESPONSE_BYTES,
          });
          threads.push(buildLane.thread);
          workers.push(
            createRegistryBuildWorker(
              kit.redis('worker', 'worker registry build connection'),
              config.QUEUE_PREFIX,
              {
                index,
                lane: buildLane,
                endpoint: defaultEndpoint,
                slots,
                budget,
                followStatus: () => readFollowStatus(command, config.QUEUE_PREFIX),
                refreshWaiting: () => queue.getJobCountByTypes('wait', 'prioritized'),
                logger,
              },
              (err) => kit.reportError(err, 'registry build worker'),
            ),
          );
          return { index, feed, buildQueue, endpoint: defaultEndpoint, rpc: followRpc };
        })()
      : undefined;
  kit.closes('worker jobs', workers, (all) => closeJobs(all, threads, workerConnection));
  // Whether this worker owns the follow stream (set once the follower exists): it alone audits.
  let streamOwner = () => false;
  if (registry) {
    let supervising: Promise<void> | undefined;
    let auditedAt = Date.now();
    const supervise = () => {
      supervising ??= readFollowStatus(command, config.QUEUE_PREFIX)
        .then(async (status) => {
          await superviseBuild(registry.index, registry.buildQueue, { status, logger });
          const state = await registry.index.state();
          const serving = registryServing(state, status, Date.now());
          metrics.registryState.set(REGISTRY_SERVING_VALUE[serving]);
          metrics.registryShardsDone.set(state.done);
          // The audit: proactive spend, by the stream's owner, while the index serves.
          if (
            serving === 'serving' &&
            streamOwner() &&
            budget.state() === 'normal' &&
            Date.now() - auditedAt >= AUDIT_EVERY_MS
          ) {
            auditedAt = Date.now();
            await auditRound({
              index: registry.index,
              rpc: registry.rpc,
              lane: defaultLane,
              endpoint: registry.endpoint,
              metrics,
              logger,
            });
          }
        })
        .catch((err: unknown) => logger.warn({ err: String(err) }, 'registry: supervision'))
        .finally(() => (supervising = undefined));
    };
    supervise();
    const timer = setInterval(supervise, REGISTRY_SUPERVISE_MS);
    timer.unref();
    kit.closes('worker registry supervision', timer, async (t) => {
      clearInterval(t);
      await supervising;
    });
  }
  // Installed at start and kept installed: a Redis that lost its data lost the scheduler too.
  const scanWatch = hotParentScans
    ? kit.closes(
        'worker hot-parent scan schedule',
        watchHotParentScans({
          queue: hotParentScans,
          freshMs,
          onMissing: () =>
            logger.warn(
              'the hot-parent scans were no longer scheduled (Redis lost its data?): scheduled again',
            ),
          onError: (err) =>
            logger.warn({ err: String(err) }, 'could not schedule hot-parent scans (retried)'),
        }),
        (w) => w.stop(),
      )
    : undefined;
  if (scanWatch) {
    // Bounded, as the API's wait for Redis: BullMQ waits for a ready connection for ever, and a
    // Redis that refuses the worker (protected mode, a bad password) must not keep its ops port,
    // so its health check and /metrics, closed. The scheduling goes on in the background.
    await Promise.race([
      scanWatch.installed,
      sleep(SCHEDULE_START_WAIT_MS, undefined, { ref: false }),
    ]);
  }

  /**
   * Graceful: waits for the active jobs, but not past half the shutdown bound (BullMQ's close can
   * also hang right after a Redis restart). A job cut short is stalled, and another worker takes
   * it over once its lock expires. With Redis unreachable no active job can finish (finishing is
   * a Redis write) and BullMQ's graceful close waits for Redis for ever: close without them.
   */
  async function closeJobs(all: Worker[], threads: DecodeThread[], connection: RedisClient) {
    const reachable = connection.status === 'ready';
    const graceful =
      reachable &&
      (await Promise.race([
        Promise.all(all.map((w) => w.close())).then(() => true),
        sleep(config.SHUTDOWN_TIMEOUT_MS * 0.5, false, { ref: false }),
      ]));
    if (graceful) return;
    if (reachable) {
      logger.warn('active jobs did not finish in time: closing the worker without them');
    }
    // Decodes under way fail at once, so the jobs waiting on them end.
    await Promise.all(threads.map((t) => t.close().catch(() => undefined)));
    await Promise.race([
      Promise.all(all.map((w) => w.close(true))),
      sleep(1_000, undefined, { ref: false }),
    ]);
  }

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
    ? {
        kit,
        config,
        metrics,
        logger,
        command,
        queue,
        cache,
        defaultEndpoint,
        defaultLane,
        slots,
        clock,
        budget,
        credits,
        ...(registry ? { registry: registry.feed } : {}),
      }
    : undefined;
  const rereads = followJobs ? startRereads(followJobs) : undefined;
  const follower =
    followJobs && rereads && config.RPC_WS_URL ? startFollower(followJobs, rereads) : undefined;
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

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));
