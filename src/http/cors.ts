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
 * The hottest routes opt out of its per-request hook (`config: { cors: false }`, about 1.5 µs a
 * request, BENCHMARKS.md) and send these with their answers; the error handler adds them to every
 * error answer, so those routes' errors carry them too; preflights still go to @fastify/cors.
 * test/http-extras.test.ts checks all of them give the same headers.
 */
export const CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-origin': CORS_OPTIONS.origin,
  'access-control-expose-headers': CORS_OPTIONS.exposedHeaders.join(', '),
});
