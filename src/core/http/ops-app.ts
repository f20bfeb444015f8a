import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
} from 'fastify';
import type { Registry } from 'prom-client';
import { ERROR_TEXT, errorEnvelope } from '../errors.js';
import { clientErrorHandler, frameworkErrorDetail, installErrorHandling } from './error-handler.js';
import { opsRoutes, type Readiness } from './ops-routes.js';

/** See `requestTimeout` below, in milliseconds. */
const OPS_REQUEST_TIMEOUT_MS = 60_000;

/**
 * The ops routes alone (`/healthz`, `/readyz`, `/metrics`: src/core/http/ops-routes.ts) with the API's
 * error handling, so they answer in the same shapes as the API's: the worker serves this on
 * `WORKER_METRICS_PORT`, having no other HTTP surface, and the API on `API_METRICS_PORT`, so its
 * budget and spend figures are never on the public port. No access log (Prometheus scrapes every
 * few seconds). It listens on nothing; the caller does, and closes it.
 *
 * @param deps.readiness what `/readyz` reports (see `redisReadiness`).
 */
export function buildOpsApp(deps: {
  logger: FastifyBaseLogger;
  registry: Registry;
  readiness: () => Promise<Readiness>;
}): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new LogController({ disableRequestLogging: true }),
    // A scrape arrives whole in milliseconds: a connection that sends nothing for this long is
    // answered 408 and closed (forgotten sockets, slow-loris on the ops port).
    requestTimeout: OPS_REQUEST_TIMEOUT_MS,
    clientErrorHandler,
    frameworkErrors: (err, _req, reply) => {
      void (reply as FastifyReply)
        .code(400)
        .send(errorEnvelope(ERROR_TEXT.invalidInput, frameworkErrorDetail(err)));
    },
    // Closing ends every connection at once, a scrape in flight included: the process is
    // stopping, and its last figures are no use to anyone.
    forceCloseConnections: true,
  }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandling(app);
  void app.register(opsRoutes, { registry: deps.registry, readiness: deps.readiness });
  return app;
}
