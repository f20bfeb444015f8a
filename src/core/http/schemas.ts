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

/** The success envelope. */
export type OkEnvelope<T> = { s: 'ok'; result: T };

/** A success envelope. */
export const ok = <T>(result: T): OkEnvelope<T> => ({ s: 'ok', result });

/** A shared schema (OpenAPI `components.schemas.<$id>`), so generated clients name their types. */
export type Component = TSchema & { readonly $id: string };

/** `schema` (made with `$id: id`) typed as a {@link Component}; throws if the id differs. */
export const component = <T extends TSchema, const Id extends string>(
  id: Id,
  schema: T,
): T & { readonly $id: Id } => {
  if ((schema as { $id?: unknown }).$id !== id) throw new Error(`schema is not named ${id}`);
  return schema as T & { readonly $id: Id };
};

/** The error envelope of every refusal and failure. */
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
 * The success envelope as component `id`.
 *
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
 * Declares the shared schemas `app` does not know yet (a plugin sees its parents' schemas;
 * siblings may declare the same one).
 */
export function useSchemas(
  app: Pick<FastifyInstance, 'addSchema' | 'getSchema'>,
  schemas: readonly Component[],
): void {
  for (const schema of schemas) if (!app.getSchema(schema.$id)) app.addSchema(schema);
}

/** An answer's OpenAPI description besides its schema. */
export type AnswerDoc = {
  description: string;
  /** The first is what Swagger UI shows. */
  examples?: readonly unknown[];
  /** OpenAPI header objects ({@link HEADER}). */
  headers?: Record<string, unknown>;
};

/**
 * An answer whose body is `component`: `allOf: [$ref]`, because @fastify/swagger drops a
 * description, examples and headers beside a bare `$ref`.
 */
export function refResponse<T extends Component>(component: T, doc: AnswerDoc): TUnsafe<Static<T>> {
  return Type.Unsafe<Static<T>>({ allOf: [{ $ref: `${component.$id}#` }], ...doc });
}

/*
 * Descriptions, examples and headers below are for the OpenAPI document only: serializers ignore
 * them, and hot routes send rendered strings.
 */

/** Response headers as OpenAPI header objects. */
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

/** A route's error status for OpenAPI (the plugin declares the envelope: {@link useSchemas}). */
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

/** 304: no body. */
export const notModifiedResponse = Type.Null({
  description:
    'Not modified: If-None-Match held the current ETag. No body; the same caching headers.',
  headers: { ETag: HEADER.etag },
});

/** 503 on any route once closing has begun. */
export const SHUTTING_DOWN =
  '`Shutting down`: the process is draining (SIGTERM); retry on another replica.';

/** 500 of our own fault. */
export const INTERNAL = '`Internal error`: a fault of the gateway (logged with its cause).';
