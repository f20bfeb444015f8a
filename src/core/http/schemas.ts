import {
  Type,
  type Static,
  type TLiteral,
  type TObject,
  type TProperties,
  type TSchema,
  type TUnsafe,
} from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';

/** `{ s: "ok", result }`, the envelope of every success answer. */
export type OkEnvelope<T> = { s: 'ok'; result: T };

/** Builds the envelope of a success answer. */
export const ok = <T>(result: T): OkEnvelope<T> => ({ s: 'ok', result });

/**
 * A schema shared by routes: `components.schemas.<$id>` of the OpenAPI document, so a generated
 * client names its types (`SubdomainList`, `ErrorEnvelope`) rather than numbering inline ones.
 */
export type Component = TSchema & { readonly $id: string };

/** `schema` (made with the option `$id: id`) typed as the {@link Component} it is. */
export const component = <T extends TSchema, const Id extends string>(
  id: Id,
  schema: T,
): T & { readonly $id: Id } => {
  if ((schema as { $id?: unknown }).$id !== id) throw new Error(`schema is not named ${id}`);
  return schema as T & { readonly $id: Id };
};

/** `{ s: "error", result: "<short text>" }`, the error envelope of every refusal and failure. */
export const errorEnvelopeSchema = component(
  'ErrorEnvelope',
  Type.Object(
    {
      s: Type.Literal('error'),
      result: Type.String({
        description: "The contract's short text: branch on it and the status",
      }),
      detail: Type.Optional(
        Type.String({
          description: 'What was wrong and what is accepted (for people, not parsing)',
        }),
      ),
    },
    { $id: 'ErrorEnvelope', description: 'The answer of every refusal and failure' },
  ),
);

/**
 * The success envelope `{ s: "ok", result, ...extra }` as a shared schema named `id` (a
 * component of the OpenAPI document; {@link useSchemas} declares it, {@link refResponse} uses it).
 *
 * @param result the schema of `result`.
 * @param extra properties after `result` (a page's `next`, /readyz's `parts`).
 */
export function okEnvelope<
  const Id extends string,
  R extends TSchema,
  E extends TProperties = Record<never, never>,
>(
  id: Id,
  result: R,
  description: string,
  extra?: E,
): TObject<{ s: TLiteral<'ok'>; result: R } & E> & { $id: Id } {
  return Type.Object(
    { s: Type.Literal('ok'), result, ...(extra as E) },
    { $id: id, description },
  ) as TObject<{ s: TLiteral<'ok'>; result: R } & E> & { $id: Id };
}

/**
 * Declares the shared schemas a route plugin refers to, those `app` does not know yet (a plugin
 * sees its parents' schemas; siblings may each declare the same one). @fastify/swagger lists each
 * under `components.schemas` by its `$id` (./../../api/http/plugins/docs.ts names them so).
 */
export function useSchemas(
  app: Pick<FastifyInstance, 'addSchema' | 'getSchema'>,
  schemas: readonly Component[],
): void {
  for (const schema of schemas) if (!app.getSchema(schema.$id)) app.addSchema(schema);
}

/** What the OpenAPI document says of one answer besides its schema. */
export type AnswerDoc = {
  /** What the status means on this route. */
  description: string;
  /** Examples of the body; the first is the one Swagger UI shows. */
  examples?: readonly unknown[];
  /** Response headers, as OpenAPI header objects ({@link HEADER}). */
  headers?: Record<string, unknown>;
};

/**
 * One answer of a route whose body is the shared schema `component`: `allOf: [$ref]` beside the
 * answer's own description, examples and headers, which @fastify/swagger would drop next to a bare
 * `$ref` (an example on the media object is what Swagger UI shows).
 */
export function refResponse<T extends Component>(component: T, doc: AnswerDoc): TUnsafe<Static<T>> {
  return Type.Unsafe<Static<T>>({ allOf: [{ $ref: `${component.$id}#` }], ...doc });
}

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
 * One error status of a route for the OpenAPI document: the envelope ({@link errorEnvelopeSchema},
 * shared), what the status means there, an example `result` and, for 429/503, `Retry-After`.
 * The route's plugin declares the envelope with {@link useSchemas}.
 */
export function errorResponse(
  description: string,
  result: string,
  headers?: Record<string, unknown>,
): TUnsafe<Static<typeof errorEnvelopeSchema>> {
  return refResponse(errorEnvelopeSchema, {
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
