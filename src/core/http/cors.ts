import type { onSendHookHandler } from 'fastify';
import { ERROR_TEXT, errorEnvelope } from '../errors.js';

/**
 * CORS (Fetch standard, "CORS protocol"): any origin may read the answers, with GET and HEAD, and
 * pages may read the cache headers. @fastify/cors applies these options to every route and
 * answers preflights.
 */
export const CORS_OPTIONS = {
  origin: '*',
  methods: ['GET', 'HEAD', 'OPTIONS'],
  // Let pages on other origins read the cache state and revalidate.
  exposedHeaders: ['X-Cache', 'Age', 'ETag', 'Retry-After'],
} as const;

/**
 * What @fastify/cors adds to a non-preflight answer with {@link CORS_OPTIONS}: two constant headers.
 * The hottest routes opt out of its per-request hook (`config: { cors: false }`, BENCHMARKS.md,
 * "Costs the code's comments refer to") and send these with their answers; the error handler adds them to every
 * error answer, so those routes' errors carry them too; preflights still go to @fastify/cors.
 * test/http-extras.test.ts checks all of them give the same headers.
 */
export const CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-origin': CORS_OPTIONS.origin,
  'access-control-expose-headers': CORS_OPTIONS.exposedHeaders.join(', '),
});

const NOT_A_PREFLIGHT = JSON.stringify(
  errorEnvelope(
    ERROR_TEXT.invalidInput,
    'OPTIONS is answered for CORS preflights only: send Origin and Access-Control-Request-Method',
  ),
);

/**
 * An `onSend` hook for @fastify/cors's `OPTIONS` route: an `OPTIONS` that is no preflight (no
 * `Origin` or no `Access-Control-Request-Method`) gets the plugin's 400 in `text/plain`; this
 * sends the error envelope instead, as every other error answer. Preflights (204) pass as they are.
 */
export const preflightErrorAsEnvelope: onSendHookHandler = (_req, reply, payload, done) => {
  if (reply.statusCode !== 400) return done(null, payload);
  reply.type('application/json; charset=utf-8');
  done(null, NOT_A_PREFLIGHT);
};
