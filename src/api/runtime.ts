import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { FollowStatusReader } from '../core/cache/follow-status.js';
import { RegistryIndex } from '../core/cache/registry-index.js';
import { REGISTRY_SERVING_VALUE, type RegistryServing } from '../core/cache/registry-serving.js';
import { RegistrySource } from './subdomains/registry-source.js';
import { SubdomainCache } from '../core/cache/subdomain-cache.js';
import type { Config } from '../core/config.js';
import { buildApp } from './http/app.js';
import type { Metrics } from '../core/metrics.js';
import { RefreshListener } from '../core/queue/refresh-events.js';
import {
  createRefreshQueue,
  OVERRIDE_REFRESH_QUEUE,
  refreshQueueCounts,
} from '../core/queue/refresh-queue.js';
import { waitReady, type RedisAccess, type RedisErrorLog } from '../core/redis.js';
import { EndpointSelector, type HostResolver } from '../core/rpc/endpoint.js';
import { checkNameTables } from './sns/name-tables.js';
import { RecordKeyDeriver } from './sns/record-key.js';
import { HotParentCounter } from '../core/cache/hot-parents.js';
import { DetailsViews } from './subdomains/details-views.js';
import { SubdomainLookup } from './subdomains/lookup.js';
import { creditBudgetOf } from '../core/rpc/budget.js';
import { ParentTouches } from './subdomains/parent-touches.js';
import { LiveUpdates } from './subdomains/live-updates.js';
import { buildOpsApp } from '../core/http/ops-app.js';
import { createRuntimeKit, openOnKit, type RuntimeKit } from '../core/runtime/kit.js';
import { CLOCK_START_WAIT_MS, RedisTime } from '../core/redis-time.js';
import { redisKeys } from '../core/redis-keys.js';
import type { Readiness } from '../core/http/ops-routes.js';
import {
  createHotParentScanQueue,
  readRefreshAhead,
  type RefreshAheadState,
} from '../core/queue/hot-parent-scans.js';

/** How long the API waits for Redis at start before it listens without it, in milliseconds. */
export const REDIS_START_WAIT_MS = 5_000;

export type ApiRuntime = {
  app: FastifyInstance;
  /** The port `/metrics` answers on (`API_METRICS_PORT`), undefined when not served. */
  metricsPort: number | undefined;
  /** The kit's close ({@link RuntimeKit.close}): waiting requests, server, then Redis. */
  close(): Promise<void>;
};

/**
 * Opens the API's resources through one {@link RuntimeKit} and listens on `HOST:PORT`. It waits at
 * most `redisStartWaitMs` for Redis, then starts anyway: derivations answer without it, and the
 * subdomain route fails fast until it is back. A failed start closes what it had opened.
 *
 * @throws NameTablesError before opening anything, on a Node that lower-cases names with other
 *   Unicode tables than the documented ones (./sns/name-tables.ts).
 * @param opts.resolveHost DNS resolution for the `?rpc=` policy check (tests pass a stub).
 * @param opts.redisErrors the process's Redis error log (shared with the worker); a new one if
 *   absent.
 * @param opts.sseHeartbeatMs milliseconds between the event streams' heartbeats (15 s if absent).
 * @param opts.redisAccess what the Redis user may run (`checkRedisAtStart`); all if absent.
 * @param opts.redisStartWaitMs milliseconds to wait for Redis ({@link REDIS_START_WAIT_MS}).
 */
export async function startApi(
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: {
    resolveHost?: HostResolver;
    redisErrors?: RedisErrorLog;
    sseHeartbeatMs?: number;
    redisAccess?: RedisAccess;
    redisStartWaitMs?: number;
    /** This process's own clock, Unix ms (`Date.now`; tests skew it). */
    clock?: () => number;
    /**
     * Serve `/metrics`, `/healthz`, `/readyz` on `API_METRICS_PORT` (default true); false with
     * `ROLE=all`, whose worker serves the one registry on `WORKER_METRICS_PORT`.
     */
    serveMetrics?: boolean;
  } = {},
): Promise<ApiRuntime> {
  checkNameTables();
  const kit = createRuntimeKit({
    name: 'api',
    config,
    logger,
    redisErrors: opts.redisErrors,
    redisAccess: opts.redisAccess,
  });
  return openOnKit(kit, (k) => openApi(k, config, metrics, logger, opts));
}

async function openApi(
  kit: RuntimeKit,
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: {
    resolveHost?: HostResolver;
    sseHeartbeatMs?: number;
    redisStartWaitMs?: number;
    clock?: () => number;
    serveMetrics?: boolean;
  },
): Promise<ApiRuntime> {
  const command = kit.redis('command', 'api command connection');
  const queueConnection = kit.redis('queue', 'api queue connection');
  const subscriber = kit.redis('subscriber', 'api subscriber connection');
  // Start without Redis after a moment: derivations do not need it, and readiness tells the load
  // balancer when the subdomain route can answer.
  const startWait = AbortSignal.timeout(opts.redisStartWaitMs ?? REDIS_START_WAIT_MS);
  await Promise.all(
    [command, queueConnection, subscriber].map((c) => waitReady(c, startWait)),
  ).catch(() =>
    logger.warn('Redis is not reachable yet: the subdomain route answers 500 until it is'),
  );
  const closeQueue = (q: Queue) =>
    q.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
  const queue = kit.closes(
    'api queue refresh',
    kit.watchErrors(createRefreshQueue(queueConnection, config), 'api refresh queue'),
    closeQueue,
  );
  const overrideQueue = kit.closes(
    'api queue override',
    kit.watchErrors(
      createRefreshQueue(queueConnection, config, OVERRIDE_REFRESH_QUEUE),
      'api override queue',
    ),
    closeQueue,
  );
  const listener = kit.closes(
    'api refresh listener',
    new RefreshListener(subscriber, config.QUEUE_PREFIX),
    (l) => l.close(),
  );
  listener
    .start()
    .catch((err: unknown) => logger.error({ err }, 'could not subscribe to refresh events'));
  // Freshness compares times the workers wrote: all on Redis's clock (docs/design.md, "Freshness").
  const time = kit.closes('api clock', new RedisTime(command, opts.clock), (t) => t.stop());
  time.start(undefined, (err) => kit.reportError(asError(err), 'api clock'));
  await time.syncWithin(CLOCK_START_WAIT_MS);
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_MS,
    config.CACHE_STALE_MS,
    undefined,
    time.now,
  );
  metrics.setQueueCountsSource(() => refreshQueueCounts(queue));

  const hotParents =
    config.HOT_KEYS_TOP_N > 0
      ? kit.closes(
          'api hot-parent counts',
          new HotParentCounter(
            command,
            config.QUEUE_PREFIX,
            config.CACHE_FRESH_MS,
            config.HOT_KEYS_MAX_TRACKED,
          ),
          (h) => h.close(),
        )
      : undefined;
  hotParents?.start();

  const follow = new FollowStatusReader(command, config.QUEUE_PREFIX, {
    onError: (err) => kit.reportError(asError(err), 'api follow status'),
  });
  const touches = new ParentTouches({
    cache,
    onError: (err) => kit.reportError(asError(err), 'api entry touch'),
  });
  const endpoints = new EndpointSelector(config, opts.resolveHost);
  // Every parent from the index of the whole registry while it serves, and through a heal's
  // window (docs/design.md, "The registry index").
  const registry =
    config.SUBDOMAIN_INDEX === 'registry'
      ? new RegistrySource({
          index: new RegistryIndex(command, config.QUEUE_PREFIX),
          status: () => follow.current(),
          window: cache,
          now: () => cache.now(),
          onError: (err) => kit.reportError(asError(err), 'api registry state'),
          onState: (state) => metrics.registryState.set(REGISTRY_SERVING_VALUE[state]),
        })
      : undefined;
  const lookup = new SubdomainLookup({
    cache,
    queues: { default: queue, override: overrideQueue },
    listener,
    metrics,
    logger,
    waitMs: config.SUBDOMAINS_WAIT_MS,
    maxWaiting: config.QUEUE_MAX_WAITING,
    hotParents,
    localCacheBytes: config.LOCAL_CACHE_BYTES,
    localEndpointId: endpoints.defaultEndpoint?.id,
    // The configured endpoint's daily credit budget, read from Redis at most every second.
    budget: creditBudgetOf(config, command, metrics),
    follow,
    touches,
    registry,
    eventsSent: async () =>
      Number(await command.get(redisKeys(config.QUEUE_PREFIX).refreshEventsSent)) || 0,
  });
  const details = new DetailsViews({
    cache,
    maxBytes: config.DETAILS_CACHE_BYTES,
    status: () => follow.current(),
  });
  const defaultId = endpoints.defaultEndpoint?.id;
  const live = new LiveUpdates({
    cache,
    listener,
    hotParents,
    touch: defaultId === undefined ? undefined : (parent) => touches.used(defaultId, parent),
    ...(registry ? { registry } : {}),
    maxPerClient: config.SSE_MAX_PER_CLIENT,
    maxStreams: config.SSE_MAX_STREAMS,
    heartbeatMs: opts.sseHeartbeatMs,
  });
  const redisReady = kit.readiness(command, () => ({
    rpc: config.RPC_URL ? 'configured' : 'unset',
    websocket: config.RPC_WS_URL ? 'configured' : 'off',
    ...(registry ? { index: registryPart(registry.serving()) } : {}),
  }));
  // Whether the workers refresh hot parents ahead, read from the scans' scheduler (a part only:
  // the API answers without it).
  const scans =
    config.HOT_KEYS_TOP_N > 0 && config.RPC_URL
      ? kit.closes(
          'api hot-parent scan queue',
          kit.watchErrors(
            createHotParentScanQueue(queueConnection, config.QUEUE_PREFIX),
            'api hot-parent scan queue',
          ),
          closeQueue,
        )
      : undefined;
  const refreshAhead = memoized(READINESS_READ_MS, async (): Promise<RefreshAheadState> => {
    if (!scans) return 'off';
    return readRefreshAhead(scans, config.CACHE_FRESH_MS).catch(() => 'stopped' as const);
  });
  const readiness = async (): Promise<Readiness> => {
    const state = await redisReady();
    if (!state.parts.redis) return state;
    return { ...state, parts: { ...state.parts, refreshAhead: await refreshAhead() } };
  };
  metrics.setRedisUpSource(async () => (await redisReady()).parts.redis);
  const app = kit.closes(
    'api http server',
    buildApp({
      config,
      metrics,
      logger,
      rateLimitRedis: command,
      queue,
      deriver: new RecordKeyDeriver(),
      endpoints,
      lookup,
      details,
      live,
      readiness,
    }),
    (a) => a.close(),
  );
  // Declared after the server so it runs before it: waiting requests get part of the shutdown
  // bound, then answer 503, so they cannot hold the server's close past it.
  kit.closes('api waiting requests', lookup, (l) => l.close(config.SHUTDOWN_TIMEOUT_MS * 0.25));
  // Budget and spend figures are not for the public port (docs/observability.md).
  const opsApp =
    opts.serveMetrics === false
      ? undefined
      : kit.closes(
          'api metrics server',
          buildOpsApp({ logger, registry: metrics.registry, readiness }),
          (a) => a.close(),
        );
  await opsApp?.listen({ port: config.API_METRICS_PORT, host: config.HOST });
  await app.listen({ port: config.PORT, host: config.HOST });
  const opsAddress = opsApp?.server.address();
  return {
    app,
    metricsPort: typeof opsAddress === 'object' && opsAddress ? opsAddress.port : undefined,
    close: () => kit.close(),
  };
}

/** `/readyz`'s `index` part: `off` never shows (the part is absent then), `none` covers it. */
const registryPart = (state: RegistryServing) => (state === 'off' ? 'none' : state);

/** Least time between two reads of the scans' scheduler for `/readyz`, in milliseconds. */
const READINESS_READ_MS = 1_000;

/** `read`, asked at most every `everyMs` (one read in flight; the last answer in between). */
function memoized<T>(everyMs: number, read: () => Promise<T>): () => Promise<T> {
  let last: Promise<T> | undefined;
  let at = 0;
  return () => {
    if (!last || Date.now() - at >= everyMs) {
      at = Date.now();
      last = read();
    }
    return last;
  };
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));
