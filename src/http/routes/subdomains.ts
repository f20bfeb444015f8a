import { fnv1a } from '@fastify/etag';
import type { FastifyReply } from 'fastify';
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CacheEntry, SubdomainCache } from '../../cache/subdomain-cache.js';
import { InternalError, ok, RateLimitedError } from '../../errors.js';
import type { EndpointSelector } from '../../rpc/endpoint.js';
import { parseParentLabel } from '../../sns/names.js';
import type { SubdomainLookup } from '../../subdomains/lookup.js';
import { errorEnvelopeSchema } from '../schemas.js';

export type SubdomainRouteDeps = {
  endpoints: EndpointSelector;
  /** Absent when the API was built without Redis: the route then answers 500. */
  lookup: SubdomainLookup | undefined;
  cache: SubdomainCache | undefined;
  freshSeconds: number;
  staleSeconds: number;
};

/**
 * HTTP caching of one answer (RFC 9111): `max-age` is the entry's freshness lifetime and `Age` how
 * long ago the worker fetched it, so a CDN or browser keeps it exactly for the freshness left;
 * after that it may serve it stale while revalidating, or on error, for the rest of the stale
 * window (DESIGN.md, "HTTP caching").
 */
function cacheHeaders(entry: CacheEntry, fresh: number, stale: number, now = Date.now()) {
  const age = Math.max(0, Math.floor((now - entry.fetchedAt) / 1000));
  const afterExpiry = Math.max(0, stale - fresh);
  return {
    age: String(age),
    'cache-control': `public, max-age=${fresh}, stale-while-revalidate=${afterExpiry}, stale-if-error=${afterExpiry}`,
  };
}

/**
 * `GET /subdomains/:parent[?rpc=URL]` (spec §4.2), answered from the Redis cache
 * ({@link SubdomainLookup}), with `X-Cache: HIT|STALE|MISS`. Answers through an override are
 * `Cache-Control: no-store`: they must not be shared under the gateway's URL.
 */
/**
 * The answer body and its ETag, made once per cache entry: a warm hit returns the same entry
 * object (SubdomainLookup's in-process copy), so it is sent as a ready string, not serialized
 * and hashed again. Same bytes and validator as the schema's serializer and @fastify/etag give.
 */
const rendered = new WeakMap<CacheEntry, { body: string; etag: string }>();
function render(entry: CacheEntry): { body: string; etag: string } {
  let out = rendered.get(entry);
  if (!out) {
    const body = JSON.stringify(ok(entry.labels));
    out = { body, etag: `"${fnv1a(body)}"` };
    rendered.set(entry, out);
  }
  return out;
}

export const subdomainRoutes: FastifyPluginAsyncTypebox<SubdomainRouteDeps> = async (app, deps) => {
  // Per-client limit of cold misses (@fastify/rate-limit, registered by buildApp).
  const checkColdMiss = app.createRateLimit();

  app.get(
    '/subdomains/:parent',
    {
      schema: {
        tags: ['sns'],
        summary:
          'Subdomain labels of a top-level .sol name (only those with a reverse record), sorted',
        params: Type.Object({ parent: Type.String({ description: 'One label, without .sol' }) }),
        querystring: Type.Object({
          rpc: Type.Optional(
            Type.String({
              minLength: 1,
              description: 'Another Solana JSON-RPC endpoint, for this request',
            }),
          ),
        }),
        response: {
          200: Type.Object({ s: Type.Literal('ok'), result: Type.Array(Type.String()) }),
          '4xx': errorEnvelopeSchema,
          '5xx': errorEnvelopeSchema,
        },
      },
    },
    async (req, reply) => {
      const parent = parseParentLabel(req.params.parent);
      const endpoint = await deps.endpoints.select(req.query.rpc);
      if (!deps.lookup || !deps.cache) throw new InternalError('no cache configured');
      const { entry, state } = await deps.lookup.lookup(parent, endpoint, async () => {
        const limit = await checkColdMiss(req);
        if (!limit.isAllowed && limit.isExceeded) {
          throw new RateLimitedError('client over its cold-miss limit', limit.ttlInSeconds);
        }
      });
      reply.header('x-cache', state);
      if (endpoint.kind === 'override') reply.header('cache-control', 'no-store');
      else reply.headers(cacheHeaders(entry, deps.freshSeconds, deps.staleSeconds));
      const { body, etag } = render(entry);
      // A ready string bypasses the schema serializer (the type provider only knows objects).
      return (reply as FastifyReply)
        .type('application/json; charset=utf-8')
        .header('etag', etag)
        .send(body);
    },
  );
};
