import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import type { Metrics } from '../../core/metrics.js';

/** Answers slower than this are logged at warn level even without the access log. */
const SLOW_REQUEST_SECONDS = 1;

/** The `route` label of requests that matched no route (404s, URLs rejected before routing). */
const UNMATCHED = 'unmatched';

type Observer = { observe(value: number): void };

/**
 * Observes one route's answers in `http_request_duration_seconds` (docs/observability.md:
 * `method`, the route pattern, `status_code`), with one histogram child per method and status
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
 * Counts every answer of `app` in `http_request_duration_seconds` and logs slow ones. Each route
 * gets an `onResponse` hook of its own, added as it is declared (`onRoute`), that knows its
 * pattern: a global hook would read `request.routeOptions`, an object Fastify builds on every
 * access, and look the label set up by a string made per request. Requests that matched no route
 * are counted by one global hook under `route="unmatched"`.
 *
 * Call before any route is declared: routes declared earlier are not counted.
 *
 * @returns the observer of `route="unmatched"`, for answers Fastify sends outside any route's
 *   hooks: its `frameworkErrors` (a URL rejected before routing) must call it once it has sent.
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
  // Hooks on every request are callback-style: no promise per request on the hot path.
  app.addHook('onResponse', (req, reply, done) => {
    if (req.is404) unmatched(req, reply);
    done();
  });
  return unmatched;
}
