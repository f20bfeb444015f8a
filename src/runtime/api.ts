import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { SubdomainCache } from '../cache/subdomain-cache.js';
import type { Config } from '../config.js';
import { buildApp } from '../http/app.js';
import type { Metrics } from '../metrics/metrics.js';
import { RefreshListener } from '../queue/refresh-events.js';
import {
  createRefreshQueue,
  OVERRIDE_REFRESH_QUEUE,
  refreshQueueCounts,
} from '../queue/refresh-queue.js';
import {
  closeRedis,
  createRedis,
  createRedisErrorLog,
  probeRedis,
  waitReady,
  type RedisErrorLog,
  type RedisProbe,
} from '../redis.js';
import { EndpointSelector, type HostResolver } from '../rpc/endpoint.js';
import { RecordKeyDeriver } from '../sns/record-key.js';
import { HotParentCounter } from '../subdomains/hot-parents.js';
import { SubdomainLookup } from '../subdomains/lookup.js';
import { redisKeys } from '../redis-keys.js';

/** How long one readiness probe of Redis answers /readyz, in milliseconds. */
const READINESS_PROBE_MS = 1_000;

export type ApiRuntime = {
  app: FastifyInstance;
  /** Marks the API not ready, finishes in-flight requests, then closes its Redis connections. */
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
 */
export async function startApi(
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: { resolveHost?: HostResolver; redisErrors?: RedisErrorLog } = {},
): Promise<ApiRuntime> {
  const command = createRedis(config, 'command', 'api');
  const queueConnection = createRedis(config, 'queue', 'api');
  const subscriber = createRedis(config, 'subscriber', 'api');
  const redisErrors = opts.redisErrors ?? createRedisErrorLog(logger);
  redisErrors.watch(command, 'api command connection');
  redisErrors.watch(queueConnection, 'api queue connection');
  redisErrors.watch(subscriber, 'api subscriber connection');
  // Give Redis a moment so the first requests find it, but start without it: derivations do not
  // need it, and readiness tells the load balancer when the subdomain route can answer.
  await Promise.all([command, queueConnection, subscriber].map((c) => waitReady(c, 5_000))).catch(
    () => logger.warn('Redis is not reachable yet: the subdomain route answers 500 until it is'),
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
    config.CACHE_FRESH_SECONDS * 1000,
    config.CACHE_STALE_SECONDS * 1000,
  );
  metrics.setQueueCountsSource(() => refreshQueueCounts(queue));

  const hotParents =
    config.HOT_KEYS_TOP_N > 0
      ? new HotParentCounter(
          command,
          config.QUEUE_PREFIX,
          config.CACHE_FRESH_SECONDS * 1000,
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
  });
  // One probe a second at most, however many /readyz requests arrive: the route is public, and
  // each probe is a write.
  let probing: Promise<RedisProbe> | undefined;
  let probedAt = 0;
  const probe = () => {
    if (!probing || Date.now() - probedAt >= READINESS_PROBE_MS) {
      probedAt = Date.now();
      probing = probeRedis(command, redisKeys(config.QUEUE_PREFIX).readinessProbe);
    }
    return probing;
  };
  const app = buildApp({
    config,
    metrics,
    logger,
    rateLimitRedis: command,
    queue,
    deriver: new RecordKeyDeriver(),
    endpoints,
    lookup,
    readiness: async () => {
      const redis = await probe();
      return {
        // Writes refused (Redis at its maxmemory) is said in `parts`, not by leaving the load
        // balancer: derivations and cached answers still work, and every replica shares Redis.
        ready: !closing && redis.reachable,
        parts: {
          redis: redis.reachable,
          redisWrites: redis.writable,
          rpc: config.RPC_URL ? 'configured' : 'unset',
          websocket: config.RPC_WS_URL ? 'configured' : 'off',
        },
      };
    },
  });
  await app.listen({ port: config.PORT, host: config.HOST });

  let closed: Promise<void> | undefined;
  return {
    app,
    close() {
      closed ??= (async () => {
        closing = true;
        // Requests waiting for a refresh get part of the shutdown bound, then answer 503, so the
        // server's close is not held up by waits that can outlast it.
        lookup.close(config.SHUTDOWN_TIMEOUT_MS * 0.25);
        await app.close();
        await hotParents?.close();
        await listener.close();
        for (const q of [queue, overrideQueue]) {
          await q.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
        }
        await Promise.all([command, queueConnection, subscriber].map(closeRedis));
      })();
      return closed;
    },
  };
}
