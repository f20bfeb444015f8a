import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import type { Queue } from 'bullmq';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../core/config.js';
import type { Metrics } from '../../core/metrics.js';
import type { EndpointSelector } from '../../core/rpc/endpoint.js';
import type { RecordKeyDeriver } from '../sns/record-key.js';
import type { DetailsViews } from '../subdomains/details-views.js';
import type { SubdomainLookup } from '../subdomains/lookup.js';
import type { LiveUpdates } from '../subdomains/live-updates.js';
import { ERROR_TEXT, errorEnvelope } from '../../core/errors.js';
import { CORS_OPTIONS, preflightErrorAsEnvelope } from '../../core/http/cors.js';
import {
  clientErrorHandler,
  frameworkErrorDetail,
  installErrorHandling,
} from '../../core/http/error-handler.js';
import { deferredChildLogger } from './request-logger.js';
import { installEtags } from './etag.js';
import { instrumentRequests } from './request-metrics.js';
import { adminPlugin, ADMIN_PREFIX } from './plugins/admin.js';
import { closeSilentSockets } from './plugins/close-silent-sockets.js';
import { docsPlugin } from './plugins/docs.js';
import { homeRoutes } from './routes/home.js';
import { opsRoutes, type Readiness } from '../../core/http/ops-routes.js';
import { recordKeyRoutes } from './routes/record-key.js';
import { recordTypesRoutes } from './routes/record-types.js';
import { subdomainDetailsRoutes } from './routes/subdomain-details.js';
import { subdomainRoutes } from './routes/subdomains.js';
import { subdomainEventRoutes } from './routes/subdomain-events.js';
import { redisKeys } from '../../core/redis-keys.js';
import { clientKey } from './subdomain-answers.js';

const MISSING_HOST_DETAIL = 'an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2)';

/** See `requestTimeout` below. */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Everything the HTTP app needs, made by the caller (the entry file, or a test). */
export type AppDeps = {
  config: Pick<
    Config,
    | 'CACHE_FRESH_SECONDS'
    | 'CACHE_STALE_SECONDS'
    | 'ADMIN_TOKEN'
    | 'ACCESS_LOG'
    | 'COLD_MISS_LIMIT'
    | 'COLD_MISS_WINDOW_MS'
    | 'TRUST_PROXY'
    | 'QUEUE_PREFIX'
    | 'DERIVATION_CACHE_SIZE'
  >;
  /** Where the per-client limit of cold misses counts (shared by every API replica); in memory if absent. */
  rateLimitRedis?: RedisClient;
  metrics: Metrics;
  deriver: RecordKeyDeriver;
  endpoints: EndpointSelector;
  /** The subdomain cache's answers (runtime.ts makes it, whether Redis answers yet or not). */
  lookup: SubdomainLookup;
  /** The rendered `/details` views. */
  details: DetailsViews;
  /** The event streams of `/subdomains/:parent/events`. */
  live: LiveUpdates;
  /** What `/readyz` reports (see `opsRoutes`); the app adds the shutdown. */
  readiness: () => Promise<Readiness>;
  /** The refresh queue, for the queue UI (shown only when `ADMIN_TOKEN` is set). */
  queue?: Queue;
  /** The process logger (`createLogger` in src/core/logger.ts: request URLs logged redacted). */
  logger: FastifyBaseLogger;
};

/**
 * Longest path parameter accepted. Labels of hundreds of characters must reach the route and get
 * a JSON answer (docs/design.md, "Endpoints and the error contract"); Node's 16 KiB header limit
 * bounds the URL anyway.
 */
const MAX_PARAM_LENGTH = 8192;

/**
 * `TRUST_PROXY` as Fastify's `trustProxy`. A hop count becomes proxy-addr's hop rule (the socket's
 * peer and the `hops - 1` entries nearest it are proxies): Fastify 5 takes a bare number as "trust
 * none", since a hop count cannot tell a proxy from a client that connects directly.
 */
function fastifyTrustProxy(
  setting: Config['TRUST_PROXY'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting === false ? false : [...setting];
}

/**
 * Builds the API: routes, schemas, the error envelope, CORS and request metrics. It opens no
 * connection and listens on nothing; the caller does both, and closes what it passed in.
 */
export function buildApp(deps: AppDeps): FastifyInstance {
  // Set by instrumentRequests below, before any request can arrive.
  let countUnrouted: (req: FastifyRequest, reply: FastifyReply) => void = () => undefined;
  const app = Fastify({
    loggerInstance: deps.logger,
    // Two log lines per request cost more than the whole derivation route (BENCHMARKS.md): the
    // access log is opt-in (`ACCESS_LOG=true`); failures and slow answers are logged anyway.
    logController: new LogController({ disableRequestLogging: !deps.config.ACCESS_LOG }),
    // A request's child logger is made when it logs a line, not for every request.
    childLoggerFactory: deferredChildLogger,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A request must arrive whole within this many milliseconds, and a connection that sends
    // nothing is answered 408 and closed after as long (slow-loris, forgotten sockets): Node
    // checks every connection at once every few seconds. Fastify's `connectionTimeout` would arm
    // a socket timer on every request instead.
    requestTimeout: REQUEST_TIMEOUT_MS,
    // Behind a CDN or load balancer, the client address (for the cold-miss limit) is taken from
    // X-Forwarded-For, right to left past the trusted proxies (src/core/config.ts, TRUST_PROXY).
    trustProxy: fastifyTrustProxy(deps.config.TRUST_PROXY),
    clientErrorHandler,
    // Node answers an HTTP/1.1 request without Host a bare 400 before any handler runs (no hook
    // for it): the onRequest hook below answers it with the envelope instead.
    http: { requireHostHeader: false },
    // Errors raised before routing (a broken percent-escape) get the envelope too.
    frameworkErrors: (err, req, reply) => {
      void (reply as FastifyReply)
        .code(400)
        .send(errorEnvelope(ERROR_TEXT.invalidInput, frameworkErrorDetail(err)));
      // No route's hooks run for these: counted here (elapsed time 0, no routing happened).
      countUnrouted(req, reply);
    },
    // Requests that arrive on open connections while closing get the envelope (hook below).
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  countUnrouted = instrumentRequests(app, deps.metrics);
  installErrorHandling(app);

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  void app.register(closeSilentSockets);
  // Hooks on every request are callback-style: no promise per request on the hot path. One hook
  // for both checks: the common case costs one more property read, not one more hook.
  app.addHook('onRequest', (req, reply, done) => {
    if (!closing && req.raw.headers.host) return done();
    if (closing) {
      void reply
        .code(503)
        .header('connection', 'close')
        .header('retry-after', '1')
        .send(
          errorEnvelope('Shutting down', 'this instance is stopping: retry, another will answer'),
        );
      return;
    }
    // HTTP/1.0 may leave Host out; HTTP/1.1 must send it (RFC 9112 §3.2), and Node's own check
    // (requireHostHeader, off above) refused an empty one too.
    if (req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor === 0) return done();
    void reply
      .code(400)
      .header('connection', 'close')
      .send(errorEnvelope(ERROR_TEXT.invalidInput, MISSING_HOST_DETAIL));
  });
  // A keep-alive connection whose request was in flight when close began would otherwise stay
  // open until its keep-alive time-out, holding close() up: end it with the answer.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  // Only the OPTIONS route (@fastify/cors's), declared below: no hook on any other route.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('OPTIONS')) return;
    const existing = route.onSend;
    route.onSend =
      existing === undefined
        ? preflightErrorAsEnvelope
        : [...(Array.isArray(existing) ? existing : [existing]), preflightErrorAsEnvelope];
  });
  void app.register(cors, {
    ...CORS_OPTIONS,
    methods: [...CORS_OPTIONS.methods],
    exposedHeaders: [...CORS_OPTIONS.exposedHeaders],
  });
  // Strong ETags over the body, and 304 on If-None-Match (RFC 9110 §13.1.2).
  installEtags(app);
  void app.register(docsPlugin);
  // Not global: only requests that would start a new refresh are counted (see SubdomainLookup).
  void app.register(rateLimit, {
    global: false,
    max: deps.config.COLD_MISS_LIMIT,
    timeWindow: deps.config.COLD_MISS_WINDOW_MS,
    ...(deps.rateLimitRedis ? { redis: deps.rateLimitRedis } : {}),
    nameSpace: redisKeys(deps.config.QUEUE_PREFIX).coldMissLimitNamespace,
    // The one client identity: the hot-parent ranking counts the same key (SubdomainLookup).
    keyGenerator: clientKey,
    // A Redis fault must not turn into refusals: the cache read fails on its own anyway.
    skipOnError: true,
  });
  void app.register(recordKeyRoutes, {
    deriver: deps.deriver,
    cacheSize: deps.config.DERIVATION_CACHE_SIZE,
  });
  void app.register(recordTypesRoutes);
  void app.register(subdomainRoutes, {
    endpoints: deps.endpoints,
    lookup: deps.lookup,
    freshSeconds: deps.config.CACHE_FRESH_SECONDS,
    staleSeconds: deps.config.CACHE_STALE_SECONDS,
  });
  void app.register(subdomainDetailsRoutes, {
    endpoints: deps.endpoints,
    lookup: deps.lookup,
    views: deps.details,
    freshSeconds: deps.config.CACHE_FRESH_SECONDS,
    staleSeconds: deps.config.CACHE_STALE_SECONDS,
  });
  void app.register(subdomainEventRoutes, {
    endpoints: deps.endpoints,
    lookup: deps.lookup,
    live: deps.live,
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
    readiness: async () => {
      const readiness = await deps.readiness();
      return closing ? { ...readiness, ready: false } : readiness;
    },
  });
  return app;
}
