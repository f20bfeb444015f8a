import type { FastifyReply } from 'fastify';
import { CORS_HEADERS } from '../../core/http/cors.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { LookupResult } from '../subdomains/lookup.js';
import type { PageRequest } from '../subdomains/page-selection.js';
import { PAGED_CORS_HEADERS } from './paged-answer.js';

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

/** Where a cached answer goes, and what its headers depend on besides the entry. */
export type CachedReply = {
  readonly reply: FastifyReply;
  /** The endpoint the entry is of: an override's answer is `no-store` and has no `Age`. */
  readonly endpoint: RpcEndpoint;
  /** The page asked for (the paged CORS headers, which expose `X-Total-Count`); or the whole. */
  readonly page: PageRequest | undefined;
  /** ms since the epoch when the entry was found, for `Age`. */
  readonly now: number;
};

/** Sets the caching headers, `Age` and `X-Cache` of an answer from `shown.entry`. */
export function setCacheHeaders(
  headers: CacheHeaders,
  { reply, endpoint, page, now }: CachedReply,
  shown: Pick<LookupResult, 'entry' | 'state'>,
): FastifyReply {
  const override = endpoint.kind === 'override';
  if (page !== undefined) reply.headers(override ? headers.pagedOverride : headers.pagedShared);
  else reply.headers(override ? headers.override : headers.shared);
  if (!override) {
    const age = now - shown.entry.fetchedAt;
    // A hit past the window is fresh because the chain is followed (docs/design.md, "Freshness"):
    // it is current now, so a CDN may keep it for the whole window as it would a new scan.
    const shownAge = shown.state === 'HIT' && age >= headers.freshMs ? 0 : age;
    reply.header('age', String(Math.max(0, Math.floor(shownAge / 1000))));
  }
  return reply.header('x-cache', shown.state);
}
