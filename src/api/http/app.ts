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
import { clientIdentity } from './plugins/client-identity.js';
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

const MISSING_HOST_DETAIL = 'an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2)';

/** `requestTimeout`, ms. */
export const REQUEST_TIMEOUT_MS = 60_000;

/** What the HTTP app needs, made by the caller. */
export type AppDeps = {
  config: Pick<
    Config,
    | 'CACHE_FRESH_SECONDS'
    | 'CACHE_STALE_SECONDS'
    | 'ADMIN_TOKEN'
    | 'ADMIN_QUEUES_WRITE'
    | 'ACCESS_LOG'
    | 'COLD_MISS_LIMIT'
    | 'COLD_MISS_WINDOW_MS'
    | 'TRUST_PROXY'
    | 'QUEUE_PREFIX'
    | 'DERIVATION_CACHE_SIZE'
  >;
  /** Where the cold-miss limit counts (shared by replicas); in memory if absent. */
  rateLimitRedis?: RedisClient;
  metrics: Metrics;
  deriver: RecordKeyDeriver;
  endpoints: EndpointSelector;
  lookup: SubdomainLookup;
  details: DetailsViews;
  /** `/subdomains/:parent/events` streams. */
  live: LiveUpdates;
  /** `/readyz`; the app adds the shutdown. */
  readiness: () => Promise<Readiness>;
  /** For the queue UI (only with `ADMIN_TOKEN`). */
  queue?: Queue;
  /** `createLogger`'s, which redacts request URLs. */
  logger: FastifyBaseLogger;
};

/**
 * Longest path parameter: labels of hundreds of characters must reach the route and get a JSON
 * answer; Node's 16 KiB header limit bounds the URL anyway.
 */
const MAX_PARAM_LENGTH = 8192;

/**
 * `TRUST_PROXY` as Fastify's `trustProxy`: a hop count becomes a hop rule, since Fastify 5 takes
 * a bare number as "trust none".
 */
function fastifyTrustProxy(
  setting: Config['TRUST_PROXY'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting === false ? false : [...setting];
}

/** Builds the API; it opens and listens on nothing, and the caller closes what it passed in. */
export function buildApp(deps: AppDeps): FastifyInstance {
  // Set by instrumentRequests below, before any request can arrive.
  let countUnrouted: (req: FastifyRequest, reply: FastifyReply) => void = () => undefined;
  const app = Fastify({
    loggerInstance: deps.logger,
    // Two log lines per request cost more than the derivation route (BENCHMARKS.md): opt-in.
    logController: new LogController({ disableRequestLogging: !deps.config.ACCESS_LOG }),
    childLoggerFactory: deferredChildLogger,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Whole request within this, and idle connections get 408 (slow-loris): Node sweeps them all
    // every few seconds, where `connectionTimeout` would arm a timer per request.
    requestTimeout: REQUEST_TIMEOUT_MS,
    trustProxy: fastifyTrustProxy(deps.config.TRUST_PROXY),
    clientErrorHandler,
    // Node's Host check answers a bare 400 with no hook; the onRequest hook sends the envelope.
    http: { requireHostHeader: false },
    frameworkErrors: (err, req, reply) => {
      void (reply as FastifyReply)
        .code(400)
        .send(errorEnvelope(ERROR_TEXT.invalidInput, frameworkErrorDetail(err)));
      // No route hooks run for these: counted here.
      countUnrouted(req, reply);
    },
    // Requests on open connections while closing get the envelope (hook below).
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  countUnrouted = instrumentRequests(app, deps.metrics);
  installErrorHandling(app, {
    countRefusal: (reason) => deps.metrics.httpRefusals.inc({ reason }),
  });

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  void app.register(closeSilentSockets);
  // Each request's client key (`req.client`), this app's IPv6 keys kept by it.
  void app.register(clientIdentity);
  // Callback-style hooks: no promise per request on the hot path; one hook for both checks.
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
    // HTTP/1.0 may omit Host; HTTP/1.1 must send it (RFC 9112 §3.2), non-empty.
    if (req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor === 0) return done();
    void reply
      .code(400)
      .header('connection', 'close')
      .send(errorEnvelope(ERROR_TEXT.invalidInput, MISSING_HOST_DETAIL));
  });
  // A keep-alive connection in flight at close would hold close() up until its time-out.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  // The OPTIONS route (@fastify/cors's) only: no hook on any other route.
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
  installEtags(app);
  void app.register(docsPlugin);
  // Not global: only requests that start a refresh are counted.
  void app.register(rateLimit, {
    global: false,
    max: deps.config.COLD_MISS_LIMIT,
    timeWindow: deps.config.COLD_MISS_WINDOW_MS,
    ...(deps.rateLimitRedis ? { redis: deps.rateLimitRedis } : {}),
    nameSpace: redisKeys(deps.config.QUEUE_PREFIX).coldMissLimitNamespace,
    // One client identity with the hot-parent ranking.
    keyGenerator: (req) => req.client,
    // A Redis fault must not become refusals: the cache read fails on its own anyway.
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
      writable: deps.config.ADMIN_QUEUES_WRITE,
    });
  }
  void app.register(opsRoutes, {
    registry: deps.metrics.registry,
    // Budget and spend figures stay off the public port: /metrics is on API_METRICS_PORT.
    metrics: false,
    readiness: async () => {
      const readiness = await deps.readiness();
      return closing ? { ...readiness, ready: false } : readiness;
    },
  });
  return app;
}
