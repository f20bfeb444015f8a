import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Static } from '@fastify/type-provider-typebox';
import { boundedMemo } from '../../core/cache/bounded-memo.js';
import type { EndpointSelector } from '../../core/rpc/endpoint.js';
import { parseParentLabel } from '../sns/names.js';
import type { PageRequest } from '../subdomains/page-selection.js';
import type { LookupOptions, LookupResult, SubdomainLookup } from '../subdomains/lookup.js';
import { cacheHeaders, setCacheHeaders, type CachedReply } from './cache-headers.js';
import { requesterOf } from './cold-miss.js';
import { pageRequestOf } from './paged-answer.js';
import type { cachedAnswerQuery, parentParams } from './subdomain-schemas.js';

/** What {@link cachedAnswers} needs (made in src/api/runtime.ts). */
export type CachedAnswerDeps = {
  endpoints: EndpointSelector;
  lookup: SubdomainLookup;
  freshSeconds: number;
  staleSeconds: number;
};

/** The entry found for a request, and where its answer goes: what a route's send renders. */
export type FoundAnswer = CachedReply & {
  readonly found: LookupResult;
  /** The parent asked for, parsed. */
  readonly parent: string;
};

/**
 * Sends an answer made from a cache entry. Warm answers go synchronously and return nothing
 * (no promise on that path).
 */
export type SendCached = (answer: FoundAnswer) => Promise<unknown> | undefined;

/** A request to a route reading the subdomain cache, as typed by its schemas. */
export type CachedAnswerRequest = FastifyRequest & {
  readonly params: Static<typeof parentParams>;
  readonly query: Static<typeof cachedAnswerQuery>;
};

/** See {@link cachedAnswers}. */
export type CachedAnswers = ReturnType<typeof cachedAnswers>;

/**
 * The one step from request to cache answer, made once per route plugin: parse (memoized) and
 * select the endpoint, charging the client's cold-miss limit (./cold-miss.ts), look up; the route
 * sets the caching headers (./cache-headers.ts) with `setHeaders` and renders. A warm parent on
 * the default endpoint is answered synchronously from the process's copy: no promise, no Redis.
 *
 * @param app the plugin's instance (its `createRateLimit()` is the cold-miss limit).
 * @param options how the route uses its answers ({@link LookupOptions}).
 * @throws (from `answer`) InvalidInputError for a bad parent, page or `?rpc=`; NotConfiguredError
 *   without `?rpc=` and RPC_URL; whatever the lookup throws.
 */
export function cachedAnswers(
  app: FastifyInstance,
  deps: CachedAnswerDeps,
  options: LookupOptions = {},
) {
  const checkColdMiss = app.createRateLimit();
  const headers = cacheHeaders(deps.freshSeconds, deps.staleSeconds);
  const parentOf = boundedMemo(parseParentLabel, { maxEntries: 10_000, maxInputLength: 64 });

  /** Everything but a warm hit. */
  const answerThroughRedis = async (
    req: CachedAnswerRequest,
    reply: FastifyReply,
    parent: string,
    page: PageRequest | undefined,
    send: SendCached,
  ) => {
    const requester = requesterOf(req, checkColdMiss);
    const endpoint = await deps.endpoints.select(req.query.rpc, requester.charge);
    const found = await deps.lookup.lookup(parent, endpoint, requester, options);
    return send({ reply, endpoint, found, page, parent, now: deps.lookup.now() });
  };

  return {
    checkColdMiss,
    parentOf,
    /** Answers through `send`. */
    answer(
      req: CachedAnswerRequest,
      reply: FastifyReply,
      send: SendCached,
    ): Promise<unknown> | undefined {
      const parent = parentOf(req.params.parent);
      const page = pageRequestOf(req.query);
      if (req.query.rpc === undefined) {
        const endpoint = deps.endpoints.selectDefault();
        const now = deps.lookup.now();
        const found = deps.lookup.peek(parent, endpoint, req.client, now);
        if (found) return send({ reply, endpoint, found, page, parent, now });
      }
      return answerThroughRedis(req, reply, parent, page, send);
    },
    /** {@link setCacheHeaders} with this freshness, for the entry and state `shown`. */
    setHeaders: (to: CachedReply, shown: Pick<LookupResult, 'entry' | 'state'>): FastifyReply =>
      setCacheHeaders(headers, to, shown),
  };
}
