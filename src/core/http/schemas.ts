import {
  Type,
  type TLiteral,
  type TObject,
  type TObjectOptions,
  type TProperties,
  type TSchema,
} from '@fastify/type-provider-typebox';

/** `{ s: "ok", result }`, the envelope of every success answer. */
export type OkEnvelope<T> = { s: 'ok'; result: T };

/** Builds the envelope of a success answer. */
export const ok = <T>(result: T): OkEnvelope<T> => ({ s: 'ok', result });

/** `{ s: "error", result: "<short text>" }`, the error envelope of every refusal and failure. */
export const errorEnvelopeSchema = Type.Object({
  s: Type.Literal('error'),
  result: Type.String(),
  detail: Type.Optional(
    Type.String({ description: 'What was wrong and what is accepted (for people, not parsing)' }),
  ),
});

/*
 * What the OpenAPI document (/docs, /openapi.json) says of each answer: a description, an example
 * and the headers. Declarative only: @fastify/swagger reads `description`, `examples` and
 * `headers`; the serializer of a status compiles once at start-up and ignores them, and the hot
 * routes send rendered strings that no serializer touches.
 */

/** The response headers the routes set, as OpenAPI header objects (name -> schema). */
export const HEADER = {
  etag: {
    type: 'string',
    description:
      'Strong validator of the body (FNV-1a, quoted). Sent back in If-None-Match it gets 304 ' +
      'when the body is the same (RFC 9110).',
  },
  immutable: {
    type: 'string',
    description:
      '`public, max-age=31536000, immutable`: a derivation never changes, so any cache may keep ' +
      'it for a year.',
  },
  typesCacheControl: {
    type: 'string',
    description: '`public, max-age=3600`: the record types change only with the SDK.',
  },
  subdomainsCacheControl: {
    type: 'string',
    description:
      'Default endpoint: `public, max-age=<CACHE_FRESH_SECONDS>, stale-while-revalidate=<S>, ' +
      'stale-if-error=<S>`, S being `CACHE_STALE_SECONDS - CACHE_FRESH_SECONDS`, so a CDN or ' +
      'browser keeps the answer exactly for the freshness it has left (max-age - Age, RFC 9111). ' +
      'Through `?rpc=`: `no-store`.',
  },
  age: {
    type: 'string',
    description:
      'Seconds since the worker fetched this list from the RPC, or 0 for a `HIT` past the ' +
      'freshness window (kept current by following the chain) (default endpoint only; absent ' +
      'with `?rpc=`).',
  },
  xCache: {
    type: 'string',
    enum: ['HIT', 'STALE', 'MISS'],
    description:
      'HIT: fresh from the cache. STALE: past its freshness, served at once while one refresh ' +
      'runs (stale-while-revalidate). MISS: nothing cached; this request waited for a refresh.',
  },
  retryAfter: {
    type: 'string',
    description: 'Whole seconds to wait before trying again.',
  },
} as const;

/**
 * The success answer of a route, `{ s: "ok", result }`, for the OpenAPI document (`options`:
 * description, examples, headers) and the serializer.
 *
 * @param result the schema of `result`.
 * @param extra properties after `result` (/readyz's `parts`).
 */
export function okResponse<R extends TSchema, E extends TProperties = Record<never, never>>(
  result: R,
  options: TObjectOptions,
  extra?: E,
): TObject<{ s: TLiteral<'ok'>; result: R } & E> {
  return Type.Object({ s: Type.Literal('ok'), result, ...(extra as E) }, options);
}

/**
 * One error status of a route for the OpenAPI document: the envelope, what the status means
 * there, an example `result` and, for 429/503, `Retry-After`.
 */
export function errorResponse(
  description: string,
  result: string,
  headers?: Record<string, unknown>,
): TSchema {
  return Type.Object(errorEnvelopeSchema.properties, {
    description,
    examples: [{ s: 'error', result }],
    ...(headers ? { headers } : {}),
  });
}

/** 304 to a request whose If-None-Match holds the current ETag: no body. */
export const notModifiedResponse = Type.Null({
  description:
    'Not modified: If-None-Match held the current ETag. No body; the same caching headers.',
  headers: { ETag: HEADER.etag },
});

/** 503 while the process shuts down: any route, once closing has begun. */
export const SHUTTING_DOWN =
  '`Shutting down`: the process is draining (SIGTERM); retry on another replica.';

/** 500 of a fault of our own. */
export const INTERNAL = '`Internal error`: a fault of the gateway (logged with its cause).';
