import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@fastify/type-provider-typebox';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
import { boundedMemo } from '../../core/cache/bounded-memo.js';
import type { CacheEntry } from '../../core/cache/subdomain-cache.js';
import { RateLimitedError } from '../../core/errors.js';
import type { EndpointSelector, RpcEndpoint } from '../../core/rpc/endpoint.js';
import { parseParentLabel } from '../sns/names.js';
import type { PageRequest } from '../subdomains/page-selection.js';
import type { CacheState, LookupResult, Requester, SubdomainLookup } from '../subdomains/lookup.js';
import { CORS_HEADERS } from '../../core/http/cors.js';
import {
  PAGED_CORS_HEADERS,
  pageQueryProperties,
  pageRequestOf,
  TOTAL_COUNT_HEADER,
} from './paged-answer.js';
import { component, HEADER, okEnvelope } from '../../core/http/schemas.js';

/** What the routes reading the subdomain cache share: schemas, the request step, headers. */

/** `?rpc=` of every route reading the subdomain cache. */
export const rpcQueryProperty = {
  rpc: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        'Another Solana JSON-RPC endpoint, for this request: an https URL whose host resolves ' +
        'only to public addresses, or one of RPC_OVERRIDE_ALLOWLIST; refused (400) when ' +
        'RPC_OVERRIDE=off. Its answers are `no-store` and cached apart. No example: one would ' +
        'send a real DNS lookup from the docs page.',
    }),
  ),
};

/** `next` of a paged answer. */
const nextProperty = {
  next: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description:
        'Only with `limit`: the last label of this page, to pass as `after` for the next one; ' +
        'null when no more labels follow.',
    }),
  ),
};

/** `/subdomains/:parent`'s answer. */
export const subdomainList = okEnvelope(
  'SubdomainList',
  Type.Array(Type.String()),
  'The subdomain labels of a parent, sorted; with `limit`, one page of them and `next`.',
  nextProperty,
);

/** One row of `/subdomains/:parent/details`. */
export const subdomainDetail = component(
  'SubdomainDetail',
  Type.Object(
    {
      label: Type.String({ description: 'the label, as `/subdomains/:parent` lists it' }),
      key: Type.String({ description: "the subdomain's name account (base58)" }),
      owner: Type.String({ description: "the owner in the name account's header (base58)" }),
    },
    { $id: 'SubdomainDetail', description: 'A subdomain with its name account and owner.' },
  ),
);

/** `/subdomains/:parent/details`'s answer. */
export const subdomainDetails = okEnvelope(
  'SubdomainDetails',
  Type.Array(Type.Unsafe<Static<typeof subdomainDetail>>({ $ref: `${subdomainDetail.$id}#` })),
  'The subdomains of a parent with name account and owner, in the order of `SubdomainList`; ' +
    'with `limit`, one page of them and `next`.',
  nextProperty,
);

/** `?rpc=` and the page parameters. */
export const cachedAnswerQuery = Type.Object({ ...rpcQueryProperty, ...pageQueryProperties });

/** `:parent` of every route reading the subdomain cache. */
export const parentParams = Type.Object({
  parent: Type.String({
    description:
      'One top-level name as one label (`67679`), without the `.sol`/`.sns` suffix; trimmed and ' +
      'lower-cased. `67679.sol` is two labels (the subdomain `67679` of `sol`) and is refused.',
    examples: ['67679'],
  }),
});

/** What {@link cachedAnswers} needs (made in src/api/runtime.ts). */
export type CachedAnswerDeps = {
  endpoints: EndpointSelector;
  lookup: SubdomainLookup;
  freshSeconds: number;
  staleSeconds: number;
};

/**
 * Sends an answer made from a cache entry. Warm answers go synchronously and return nothing
 * (no promise on that path).
 *
 * @param now ms since the epoch when the entry was found, for `Age`.
 */
export type SendCached = (
  reply: FastifyReply,
  endpoint: RpcEndpoint,
  found: LookupResult,
  page: PageRequest | undefined,
  parent: string,
  now: number,
) => Promise<unknown> | undefined;

/** A request to a route reading the subdomain cache, as typed by its schemas. */
export type CachedAnswerRequest = FastifyRequest & {
  readonly params: Static<typeof parentParams>;
  readonly query: Static<typeof cachedAnswerQuery>;
};

/** See {@link cachedAnswers}. */
export type CachedAnswers = ReturnType<typeof cachedAnswers>;

/**
 * The one step from request to cache answer, made once per route plugin: parse (memoized) and
 * select the endpoint, look up, set headers. A warm parent on the default endpoint is answered
 * synchronously from the process's copy: no promise, no Redis.
 *
 * @param app the plugin's instance (its `createRateLimit()` is the cold-miss limit).
 * @throws (from `answer`) InvalidInputError for a bad parent, page or `?rpc=`; NotConfiguredError
 *   without `?rpc=` and RPC_URL; whatever the lookup throws.
 */
export function cachedAnswers(app: FastifyInstance, deps: CachedAnswerDeps) {
  const checkColdMiss = app.createRateLimit();
  const headers = cacheHeaders(deps.freshSeconds, deps.staleSeconds);
  const parentOf = boundedMemo(parseParentLabel, { maxEntries: 10_000, maxInputLength: 64 });

  /** Everything but a warm hit. */
  const answerThroughRedis = async (
    req: FastifyRequest,
    reply: FastifyReply,
    parent: string,
    rpc: string | undefined,
    page: PageRequest | undefined,
    send: SendCached,
  ) => {
    const requester = requesterOf(req, checkColdMiss);
    const endpoint = await deps.endpoints.select(rpc, requester.charge);
    const found = await deps.lookup.lookup(parent, endpoint, requester);
    return send(reply, endpoint, found, page, parent, deps.lookup.now());
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
      const rpc = req.query.rpc;
      if (rpc === undefined) {
        const endpoint = deps.endpoints.selectDefault();
        const now = deps.lookup.now();
        const found = deps.lookup.peek(parent, endpoint, clientKey(req), now);
        if (found) return send(reply, endpoint, found, page, parent, now);
      }
      return answerThroughRedis(req, reply, parent, rpc, page, send);
    },
    /** {@link setCacheHeaders} with this freshness. */
    setHeaders: (
      reply: FastifyReply,
      endpoint: RpcEndpoint,
      entry: CacheEntry,
      state: CacheState,
      paged: boolean,
      now: number,
    ): FastifyReply => setCacheHeaders(reply, headers, endpoint, entry, state, paged, now),
  };
}

const COLD_MISS_DETAIL =
  'this client started too many new refreshes or ?rpc= host lookups in the window; cached answers are not limited (see Retry-After)';

/**
 * The client a request counts as (cold-miss limit, hot-parent ranking, stream bound), from
 * `req.ip` as `TRUST_PROXY` makes it. Never holds a space.
 */
export const clientKey = (req: FastifyRequest): string => clientKeyOf(req.ip);

/** Bounded: a miss only costs a parse. */
const ipv6Keys = new LRUCache<string, string>({ max: 10_000 });

/**
 * An address's client key: IPv4 as is; IPv6 by its /64, since one subscriber gets a whole /64
 * (RFC 6177) and would otherwise be 2^64 clients; IPv4-mapped as IPv4; unparsable as is.
 */
export function clientKeyOf(ip: string): string {
  if (!ip.includes(':')) return ip;
  let key = ipv6Keys.get(ip);
  if (key === undefined) {
    key = ipv6Key(ip);
    ipv6Keys.set(ip, key);
  }
  return key;
}

function ipv6Key(ip: string): string {
  let parsed: ipaddr.IPv6;
  try {
    parsed = ipaddr.IPv6.parse(ip);
  } catch {
    return ip;
  }
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString();
  const prefix = new ipaddr.IPv6([...parsed.parts.slice(0, 4), 0, 0, 0, 0]);
  return `${prefix.toString()}/64`;
}

/** The {@link Requester} of a request to the subdomain cache. */
export function requesterOf(
  req: FastifyRequest,
  check: ReturnType<FastifyInstance['createRateLimit']>,
): Requester {
  return { client: clientKey(req), charge: coldMissCharge(req, check) };
}

/**
 * Charges one unit of the client's cold-miss limit, once per request however often called: for a
 * refresh the request starts, or a `?rpc=` lookup (DNS the client picks, which may never answer).
 *
 * @returns the charge; it throws RateLimitedError (429) past the limit.
 */
export function coldMissCharge(
  req: FastifyRequest,
  check: ReturnType<FastifyInstance['createRateLimit']>,
): () => Promise<void> {
  let charged = false;
  return async () => {
    if (charged) return;
    charged = true;
    const limit = await check(req);
    if (!limit.isAllowed && limit.isExceeded) {
      throw new RateLimitedError('client over its cold-miss limit', limit.ttlInSeconds, {
        detail: COLD_MISS_DETAIL,
      });
    }
  };
}

/** The headers of a 200 from the cache, for OpenAPI. */
export const CACHED_ANSWER_HEADERS = Object.freeze({
  'Cache-Control': HEADER.subdomainsCacheControl,
  Age: HEADER.age,
  ETag: HEADER.etag,
  'X-Cache': HEADER.xCache,
  'X-Total-Count': TOTAL_COUNT_HEADER,
});

/** Header sets of cached answers, made once per process. */
export type CacheHeaders = ReturnType<typeof cacheHeaders>;

/**
 * Caching headers of an answer from the cache (docs/design.md, "HTTP caching"); override answers
 * are `no-store`: they must not be shared under the gateway's URL.
 */
export function cacheHeaders(freshSeconds: number, staleSeconds: number) {
  const afterExpiry = Math.max(0, staleSeconds - freshSeconds);
  const shared = Object.freeze({
    ...CORS_HEADERS,
    'cache-control': `public, max-age=${freshSeconds}, stale-while-revalidate=${afterExpiry}, stale-if-error=${afterExpiry}`,
  });
  const override = Object.freeze({ ...CORS_HEADERS, 'cache-control': 'no-store' });
  return Object.freeze({
    shared,
    override,
    /** The freshness window in ms, which `Age` is measured against. */
    freshMs: freshSeconds * 1000,
    pagedShared: Object.freeze({ ...shared, ...PAGED_CORS_HEADERS }),
    pagedOverride: Object.freeze({ ...override, ...PAGED_CORS_HEADERS }),
  });
}

/** Sets caching headers, `Age` and `X-Cache` of an answer from `entry`. */
export function setCacheHeaders(
  reply: FastifyReply,
  headers: CacheHeaders,
  endpoint: RpcEndpoint,
  entry: CacheEntry,
  state: CacheState,
  paged: boolean,
  now = Date.now(),
): FastifyReply {
  const override = endpoint.kind === 'override';
  if (paged) reply.headers(override ? headers.pagedOverride : headers.pagedShared);
  else reply.headers(override ? headers.override : headers.shared);
  if (!override) {
    const age = now - entry.fetchedAt;
    // A hit past the window is fresh because the chain is followed (docs/design.md, "Freshness"):
    // it is current now, so a CDN may keep it for the whole window as it would a new scan.
    const shown = state === 'HIT' && age >= headers.freshMs ? 0 : age;
    reply.header('age', String(Math.max(0, Math.floor(shown / 1000))));
  }
  return reply.header('x-cache', state);
}
