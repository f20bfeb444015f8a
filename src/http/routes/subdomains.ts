import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { SubdomainCache } from '../../cache/subdomain-cache.js';
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
  staleSeconds: number;
};

/**
 * `GET /subdomains/:parent[?rpc=URL]` (spec §4.2), answered from the Redis cache
 * ({@link SubdomainLookup}). Headers: `X-Cache: HIT|STALE|MISS`, and `Cache-Control` with the
 * freshness left, or `no-store` for an override (DESIGN.md, "HTTP caching").
 */
export const subdomainRoutes: FastifyPluginAsyncTypebox<SubdomainRouteDeps> = async (app, deps) => {
  // Per-client limit of cold misses (@fastify/rate-limit, registered by buildApp).
  const checkColdMiss = app.createRateLimit();
  app.get(
    '/subdomains/:parent',
    {
      schema: {
        params: Type.Object({ parent: Type.String() }),
        querystring: Type.Object({ rpc: Type.Optional(Type.String({ minLength: 1 })) }),
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
      if (endpoint.kind === 'override') {
        reply.header('cache-control', 'no-store');
      } else {
        const maxAge = deps.cache.freshSecondsLeft(entry);
        reply.header(
          'cache-control',
          `public, max-age=${maxAge}, stale-while-revalidate=${deps.staleSeconds}, stale-if-error=${deps.staleSeconds}`,
        );
      }
      return ok(entry.labels as string[]);
    },
  );
};
