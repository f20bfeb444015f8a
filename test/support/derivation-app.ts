import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { SubdomainCache } from '../../src/core/cache/subdomain-cache.js';
import { loadConfig } from '../../src/core/config.js';
import { buildApp } from '../../src/api/http/app.js';
import { createMetrics } from '../../src/core/metrics.js';
import { createRefreshQueue, OVERRIDE_REFRESH_QUEUE } from '../../src/core/queue/refresh-queue.js';
import { RefreshListener } from '../../src/core/queue/refresh-events.js';
import { closeRedis, createRedis } from '../../src/core/redis.js';
import { EndpointSelector } from '../../src/core/rpc/endpoint.js';
import { RecordKeyDeriver } from '../../src/api/sns/record-key.js';
import { DetailsViews } from '../../src/api/subdomains/details-views.js';
import { LiveUpdates } from '../../src/api/subdomains/live-updates.js';
import { SubdomainLookup } from '../../src/api/subdomains/lookup.js';

/** Nothing listens here: the app's Redis is down for its whole life. */
const NO_REDIS = 'redis://127.0.0.1:1';

/**
 * The app with its Redis down and no RPC_URL: derivations must not need either (docs/design.md,
 * "Shape"). The cache-reading parts are the runtime's own (src/api/runtime.ts makes them the same
 * way), over connections that never succeed; they are closed with the app.
 *
 * @param env configuration variables, over the defaults.
 */
export function derivationApp(
  deriver = new RecordKeyDeriver(),
  env: { [name: string]: string } = {},
): FastifyInstance {
  const config = loadConfig({ ...env, REDIS_URL: NO_REDIS });
  const logger = pino({ level: 'silent' });
  const metrics = createMetrics(new Registry(), { defaultMetrics: false });
  const command = createRedis(config, 'command', 'derivation-test');
  const queueConnection = createRedis(config, 'queue', 'derivation-test');
  const subscriber = createRedis(config, 'subscriber', 'derivation-test');
  const connections = [command, queueConnection, subscriber];
  // The refusals are expected: unheard, ioredis would print each one.
  for (const c of connections) c.on('error', () => undefined);
  const queues = {
    default: createRefreshQueue(queueConnection, config),
    override: createRefreshQueue(queueConnection, config, OVERRIDE_REFRESH_QUEUE),
  };
  for (const q of Object.values(queues)) q.on('error', () => undefined);
  const listener = new RefreshListener(subscriber, config.QUEUE_PREFIX);
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_SECONDS * 1000,
    config.CACHE_STALE_SECONDS * 1000,
  );
  const app = buildApp({
    config,
    metrics,
    logger,
    deriver,
    endpoints: new EndpointSelector({
      RPC_URL: undefined,
      RPC_OVERRIDE: 'on',
      RPC_OVERRIDE_ALLOWLIST: [],
    }),
    lookup: new SubdomainLookup({
      cache,
      queues,
      listener,
      metrics,
      logger,
      waitMs: config.SUBDOMAINS_WAIT_MS,
      maxWaiting: config.QUEUE_MAX_WAITING,
    }),
    details: new DetailsViews({ cache, maxBytes: config.DETAILS_CACHE_BYTES }),
    live: new LiveUpdates({
      cache,
      listener,
      maxPerClient: config.SSE_MAX_PER_CLIENT,
      maxStreams: config.SSE_MAX_STREAMS,
    }),
    readiness: async () => ({
      ready: true,
      parts: { redis: true, redisWrites: true, rpc: 'configured', websocket: 'off' },
    }),
  });
  app.addHook('onClose', async () => {
    await listener.close();
    await Promise.all(Object.values(queues).map((q) => q.close()));
    await Promise.all(connections.map(closeRedis));
  });
  return app;
}
