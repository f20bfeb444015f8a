import type { onSendHookHandler } from 'fastify';
import { ERROR_TEXT, errorEnvelope } from '../errors.js';

/** CORS for @fastify/cors: any origin reads answers (GET, HEAD) and the cache headers. */
export const CORS_OPTIONS = {
  origin: '*',
  methods: ['GET', 'HEAD', 'OPTIONS'],
  exposedHeaders: ['X-Cache', 'Age', 'ETag', 'Retry-After'],
} as const;

/**
 * The headers @fastify/cors adds to a non-preflight answer. The hottest routes skip its hook
 * (BENCHMARKS.md, "Costs the code's comments refer to") and send these; the error handler adds
 * them to every error (test/http-extras.test.ts checks they match).
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

/** @fastify/cors answers a non-preflight `OPTIONS` a text/plain 400; this sends the envelope. */
export const preflightErrorAsEnvelope: onSendHookHandler = (_req, reply, payload, done) => {
  if (reply.statusCode !== 400) return done(null, payload);
  reply.type('application/json; charset=utf-8');
  done(null, NOT_A_PREFLIGHT);
};
