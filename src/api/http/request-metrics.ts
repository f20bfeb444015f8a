import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import type { Metrics } from '../../core/metrics.js';

/** Slower answers are logged at warn even without the access log. */
const SLOW_REQUEST_SECONDS = 1;

/** `route` label of requests no route matched. */
const UNMATCHED = 'unmatched';

type Observer = { observe(value: number): void };

/**
 * One route's `http_request_duration_seconds` observer, a histogram child per method and status
 * made on first use: prom-client would otherwise hash a label object on every observation.
 */
function routeObserver(metrics: Metrics, route: string) {
  const children = new Map<string, Map<number, Observer>>();
  return (req: FastifyRequest, reply: FastifyReply): void => {
    const { method } = req;
    const status = reply.statusCode;
    let byStatus = children.get(method);
    if (!byStatus) {
      byStatus = new Map();
      children.set(method, byStatus);
    }
    let child = byStatus.get(status);
    if (!child) {
      child = metrics.httpDuration.labels({ method, route, status_code: String(status) });
      byStatus.set(status, child);
    }
    const seconds = reply.elapsedTime / 1000;
    child.observe(seconds);
    if (seconds >= SLOW_REQUEST_SECONDS) {
      req.log.warn({ req, statusCode: status, seconds }, 'slow request');
    }
  };
}

/**
 * Counts every answer in `http_request_duration_seconds` and logs slow ones. Each route gets its
 * own `onResponse` hook knowing its pattern: a global hook would read `request.routeOptions`,
 * which Fastify builds on every access. Call before any route is declared.
 *
 * @returns the `route="unmatched"` observer, which `frameworkErrors` must call after sending.
 */
export function instrumentRequests(
  app: FastifyInstance,
  metrics: Metrics,
): (req: FastifyRequest, reply: FastifyReply) => void {
  app.addHook('onRoute', (route) => {
    const observe = routeObserver(metrics, route.url);
    const hook: onResponseHookHandler = (req, reply, done) => {
      observe(req, reply);
      done();
    };
    const existing = route.onResponse;
    route.onResponse =
      existing === undefined ? hook : [...(Array.isArray(existing) ? existing : [existing]), hook];
  });
  const unmatched = routeObserver(metrics, UNMATCHED);
  // Callback-style: no promise per request.
  app.addHook('onResponse', (req, reply, done) => {
    if (req.is404) unmatched(req, reply);
    done();
  });
  return unmatched;
}
