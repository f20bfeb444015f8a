import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
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
import {
  closeRedis,
  createRedis,
  createRedisErrorLog,
  waitReady,
  type RedisAccess,
  type RedisErrorLog,
} from '../core/redis.js';
import { EndpointSelector, type HostResolver } from '../core/rpc/endpoint.js';
import { RecordKeyDeriver } from './sns/record-key.js';
import { HotParentCounter } from '../core/cache/hot-parents.js';
import { DetailsViews } from './subdomains/details-views.js';
import { SubdomainLookup } from './subdomains/lookup.js';
import { CreditBudget } from '../core/rpc/budget.js';
import { LiveUpdates } from './subdomains/live-updates.js';
import { redisKeys } from '../core/redis-keys.js';
import { redisReadiness } from '../core/runtime/readiness.js';
import { closeSteps } from '../core/runtime/shutdown.js';

/** How long the API waits for Redis at start before it listens without it, in milliseconds. */
export const REDIS_START_WAIT_MS = 5_000;

export type ApiRuntime = {
  app: FastifyInstance;
  /**
   * Marks the API not ready, finishes in-flight requests, then closes its Redis connections:
   * every step, even after one failed (then it rejects, once all have run).
   */
  close(): Promise<void>;
};

/**
 * Connects the API's dependencies (three Redis connections: commands, queue, pub/sub) and listens
 * on `HOST:PORT`. It waits at most 5 s for Redis, then starts anyway: derivations answer without it, and the subdomain
 * route fails fast with the envelope until Redis is back.
 *
 * @param opts.resolveHost DNS resolution for the `?rpc=` policy check (tests pass a stub).
 * @param opts.redisErrors where Redis errors are logged, rate-limited (one per process, shared
 *   with the worker); a new one on `logger` if absent.
 * @param opts.sseHeartbeatMs milliseconds between the event streams' heartbeats (15 s; tests
 *   shorten it).
 * @param opts.redisAccess what the Redis user may run (`checkRedisAtStart`); all if absent.
 * @param opts.redisStartWaitMs how long to wait for Redis, in milliseconds
 *   ({@link REDIS_START_WAIT_MS} if absent).
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
  } = {},
): Promise<ApiRuntime> {
  const command = createRedis(config, 'command', 'api', opts.redisAccess);
  const queueConnection = createRedis(config, 'queue', 'api', opts.redisAccess);
  const subscriber = createRedis(config, 'subscriber', 'api', opts.redisAccess);
  const redisErrors = opts.redisErrors ?? createRedisErrorLog(logger);
  redisErrors.watch(command, 'api command connection');
  redisErrors.watch(queueConnection, 'api queue connection');
  redisErrors.watch(subscriber, 'api subscriber connection');
  // Give Redis a moment so the first requests find it, but start without it: derivations do not
  // need it, and readiness tells the load balancer when the subdomain route can answer.
  const startWait = AbortSignal.timeout(opts.redisStartWaitMs ?? REDIS_START_WAIT_MS);
  await Promise.all(
    [command, queueConnection, subscriber].map((c) => waitReady(c, startWait)),
  ).catch(() =>
    logger.warn('Redis is not reachable yet: the subdomain route answers 500 until it is'),
  );
  const queue = createRefreshQueue(queueConnection, config);
  const overrideQueue = createRefreshQueue(queueConnection, config, OVERRIDE_REFRESH_QUEUE);
  queue.on('error', (err) => redisErrors.report(err, 'api refresh queue'));
  overrideQueue.on('error', (err) => redisErrors.report(err, 'api override queue'));
  const listener = new RefreshListener(subscriber, config.QUEUE_PREFIX);
  listener
    .start()
    .catch((err: unknown) => logger.error({ err }, 'could not subscribe to refresh events'));
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_MS,
    config.CACHE_STALE_MS,
  );
  metrics.setQueueCountsSource(() => refreshQueueCounts(queue));

  const hotParents =
    config.HOT_KEYS_TOP_N > 0
      ? new HotParentCounter(
          command,
          config.QUEUE_PREFIX,
          config.CACHE_FRESH_MS,
          config.HOT_KEYS_MAX_TRACKED,
        )
      : undefined;
  hotParents?.start();

  const endpoints = new EndpointSelector(config, opts.resolveHost);
  let closing = false;
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
    budget: new CreditBudget({
      redis: command,
      prefix: config.QUEUE_PREFIX,
      creditsPerDay: config.RPC_CREDITS_PER_DAY,
      freshMs: config.CACHE_FRESH_MS,
      metrics,
    }),
  });
  const details = new DetailsViews({ cache, maxBytes: config.DETAILS_CACHE_BYTES });
  const live = new LiveUpdates({
    cache,
    listener,
    hotParents,
    maxPerClient: config.SSE_MAX_PER_CLIENT,
    maxStreams: config.SSE_MAX_STREAMS,
    heartbeatMs: opts.sseHeartbeatMs,
  });
  const readiness = redisReadiness({
    redis: command,
    key: redisKeys(config.QUEUE_PREFIX).readinessProbe,
    parts: {
      rpc: config.RPC_URL ? 'configured' : 'unset',
      websocket: config.RPC_WS_URL ? 'configured' : 'off',
    },
    closing: () => closing,
  });
  metrics.setRedisUpSource(async () => (await readiness()).parts.redis);
  const app = buildApp({
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
  });
  await app.listen({ port: config.PORT, host: config.HOST });

  let closed: Promise<void> | undefined;
  return {
    app,
    close() {
      closed ??= (async () => {
        closing = true;
        // Every step runs even when one before it fails (a failing app.close() must not leave
        // the Redis connections open), in this order: requests first, connections last.
        const ok = await closeSteps(
          [
            {
              // Requests waiting for a refresh get part of the shutdown bound, then answer 503,
              // so the server's close is not held up by waits that can outlast it.
              name: 'api waiting requests',
              close: async () => lookup.close(config.SHUTDOWN_TIMEOUT_MS * 0.25),
            },
            { name: 'api http server', close: () => app.close() },
            { name: 'api hot-parent counts', close: async () => hotParents?.close() },
            { name: 'api refresh listener', close: () => listener.close() },
            ...[queue, overrideQueue].map((q) => ({
              name: `api queue ${q.name}`,
              close: () =>
                q.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed')),
            })),
            {
              name: 'api redis connections',
              close: async () => {
                await Promise.all([command, queueConnection, subscriber].map(closeRedis));
              },
            },
          ],
          logger,
        );
        if (!ok) throw new Error('the API closed with failures (logged per step)');
      })();
      return closed;
    },
  };
}
