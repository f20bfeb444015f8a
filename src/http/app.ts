import cors from '@fastify/cors';
import etag from '@fastify/etag';
import rateLimit from '@fastify/rate-limit';
import type { Queue } from 'bullmq';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Socket } from 'node:net';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { RedisClient } from '../redis.js';
import type { SubdomainCache } from '../cache/subdomain-cache.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { EndpointSelector } from '../rpc/endpoint.js';
import type { RecordKeyDeriver } from '../sns/record-key.js';
import type { SubdomainLookup } from '../subdomains/lookup.js';
import { ERROR_TEXT, errorEnvelope } from '../errors.js';
import { clientErrorHandler, installErrorHandling } from './error-handler.js';
import { adminPlugin, ADMIN_PREFIX } from './plugins/admin.js';
import { docsPlugin } from './plugins/docs.js';
import { homeRoutes } from './routes/home.js';
import { opsRoutes } from './routes/ops.js';
import { recordKeyRoutes } from './routes/record-key.js';
import { subdomainRoutes } from './routes/subdomains.js';

/** Everything the HTTP app needs, made by the caller (the entry file, or a test). */
export type AppDeps = {
  config: Pick<
    Config,
    | 'CACHE_FRESH_SECONDS'
    | 'CACHE_STALE_SECONDS'
    | 'ADMIN_TOKEN'
    | 'COLD_MISS_LIMIT'
    | 'COLD_MISS_WINDOW_SECONDS'
    | 'TRUST_PROXY'
    | 'QUEUE_PREFIX'
  >;
  /** Where the per-client limit of cold misses counts (shared by every API replica); in memory if absent. */
  rateLimitRedis?: RedisClient;
  metrics: Metrics;
  deriver: RecordKeyDeriver;
  endpoints: EndpointSelector;
  lookup?: SubdomainLookup;
  cache?: SubdomainCache;
  isReady: () => Promise<boolean>;
  /** The refresh queue, for the queue UI (shown only when `ADMIN_TOKEN` is set). */
  queue?: Queue;
  /** The process logger (`createLogger` in src/logger.ts: request URLs logged redacted). */
  logger: FastifyBaseLogger;
};

/**
 * Longest path parameter accepted. Labels of hundreds of characters must reach the route and get
 * a JSON answer (DESIGN.md); Node's 16 KiB header limit bounds the URL anyway.
 */
const MAX_PARAM_LENGTH = 8192;

/**
 * Builds the API: routes, schemas, the error envelope, CORS and request metrics. It opens no
 * connection and listens on nothing; the caller does both, and closes what it passed in.
 */
export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A connection silent this long is dropped (slow-loris, forgotten sockets), in milliseconds.
    connectionTimeout: 60_000,
    // Behind a CDN or load balancer, the client address (for the cold-miss limit) is X-Forwarded-For's.
    trustProxy: deps.config.TRUST_PROXY,
    clientErrorHandler,
    // Errors raised before routing (a broken percent-escape) get the envelope too.
    frameworkErrors: (_err, _req, reply) => {
      void (reply as FastifyReply).code(400).send(errorEnvelope(ERROR_TEXT.invalidInput));
    },
    // Requests that arrive on open connections while closing get the envelope (hook below).
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  installErrorHandling(app);

  // Connections that have not sent a byte yet (browsers and load balancers open spare ones) are
  // neither idle keep-alives nor in flight, so close() would wait for them forever: track them
  // from 'connection' to their first byte, and drop them when closing begins.
  const silentSockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    silentSockets.add(socket);
    const forget = () => silentSockets.delete(socket);
    socket.once('data', forget);
    socket.once('close', forget);
  });

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const socket of silentSockets) socket.destroy();
    silentSockets.clear();
  });
  app.addHook('onRequest', async (_req, reply) => {
    if (closing) {
      return reply.code(503).header('connection', 'close').send(errorEnvelope('Shutting down'));
    }
  });
  // A keep-alive connection whose request was in flight when close began would otherwise stay
  // open until its keep-alive time-out, holding close() up: end it with the answer.
  app.addHook('onSend', async (_req, reply) => {
    if (closing) reply.header('connection', 'close');
  });

  app.addHook('onResponse', async (req, reply) => {
    deps.metrics.httpDuration.observe(
      {
        method: req.method,
        route: req.routeOptions.url ?? 'unmatched',
        status_code: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
  });

  void app.register(cors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'OPTIONS'],
    // Let pages on other origins read the cache state and revalidate.
    exposedHeaders: ['X-Cache', 'Age', 'ETag', 'Retry-After'],
  });
  // Strong ETags over the body, and 304 on If-None-Match (RFC 9110 §13.1.2).
  void app.register(etag);
  void app.register(docsPlugin);
  // Not global: only requests that would start a new refresh are counted (see SubdomainLookup).
  void app.register(rateLimit, {
    global: false,
    max: deps.config.COLD_MISS_LIMIT,
    timeWindow: deps.config.COLD_MISS_WINDOW_SECONDS * 1000,
    ...(deps.rateLimitRedis ? { redis: deps.rateLimitRedis } : {}),
    nameSpace: `${deps.config.QUEUE_PREFIX}:cold-miss-limit:`,
    // A Redis fault must not turn into refusals: the cache read fails on its own anyway.
    skipOnError: true,
  });
  void app.register(recordKeyRoutes, { deriver: deps.deriver });
  void app.register(subdomainRoutes, {
    endpoints: deps.endpoints,
    lookup: deps.lookup,
    cache: deps.cache,
    freshSeconds: deps.config.CACHE_FRESH_SECONDS,
    staleSeconds: deps.config.CACHE_STALE_SECONDS,
  });
  void app.register(homeRoutes);
  if (deps.config.ADMIN_TOKEN && deps.queue) {
    void app.register(adminPlugin, {
      prefix: ADMIN_PREFIX,
      queue: deps.queue,
      token: deps.config.ADMIN_TOKEN,
    });
  }
  void app.register(opsRoutes, {
    registry: deps.metrics.registry,
    isReady: async () => !closing && (await deps.isReady()),
  });
  return app;
}
