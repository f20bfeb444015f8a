import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CacheEntry } from '../../../core/cache/subdomain-cache.js';
import { selectPage } from '../../subdomains/page-selection.js';
import { renderPage } from '../paged-answer.js';
import { renderOk, sendRendered, type RenderedAnswer } from '../rendered.js';
import {
  errorEnvelopeSchema,
  errorResponse,
  HEADER,
  notModifiedResponse,
  refResponse,
  SHUTTING_DOWN,
  useSchemas,
} from '../../../core/http/schemas.js';
import { cachedAnswers, type CachedAnswerDeps, type FoundAnswer } from '../cached-answers.js';
import {
  CACHED_ANSWER_HEADERS,
  cachedAnswerQuery,
  parentParams,
  subdomainList,
  refreshingRouteInternal,
} from '../subdomain-schemas.js';
import { refuseOtherPaths } from './wrong-shape.js';
import { ROUTE } from './paths.js';

/** What the list route needs. */
export type SubdomainRouteDeps = CachedAnswerDeps;

/** Body and ETag per cache entry: a warm hit returns the same entry object, so no re-render. */
const rendered = new WeakMap<CacheEntry, RenderedAnswer>();
function render(entry: CacheEntry): RenderedAnswer {
  let out = rendered.get(entry);
  if (!out) {
    out = renderOk(entry.labels);
    rendered.set(entry, out);
  }
  return out;
}

const WRONG_SHAPE_DETAIL =
  'path must be /subdomains/<parent>, one label; a parent of "." (%2E) is removed from the URL by the client';

/**
 * `GET /subdomains/:parent[?rpc=URL]` from the cache, with `X-Cache: HIT|STALE|MISS` and the
 * headers of ../cache-headers.ts `cacheHeaders`.
 */
export const subdomainRoutes: FastifyPluginAsyncTypebox<SubdomainRouteDeps> = async (app, deps) => {
  useSchemas(app, [errorEnvelopeSchema, subdomainList]);
  // The list renders labels only: a large cold miss is answered from its scan (docs/design.md,
  // "Early answers").
  const cached = cachedAnswers(app, deps, { labelsOnly: true });

  /** Sends the whole list, or the page asked for (same caching headers) with `X-Total-Count`. */
  const send = (answer: FoundAnswer): undefined => {
    const { reply, page } = answer;
    const { entry } = answer.found;
    cached.setHeaders(answer, answer.found);
    if (page === undefined) {
      sendRendered(reply, render(entry));
      return;
    }
    const selected = selectPage(entry.labels, page);
    reply.header('x-total-count', String(selected.total));
    sendRendered(reply, renderPage(selected, selected.labels, page, render(entry).etag));
  };

  app.get(
    ROUTE.subdomains,
    {
      // CORS comes with the caching headers.
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary:
          'Subdomain labels of a top-level .sol name (only those with a reverse record), sorted',
        operationId: 'getSubdomains',
        description:
          "The labels the SDK's `findSubdomains` gives, from the Redis cache: a subdomain counts " +
          'only when its reverse record exists. A miss queues one refresh (getProgramAccounts, ' +
          'by the worker) and waits for it at most SUBDOMAINS_WAIT_MS; a stale entry is served at ' +
          'once while one refresh runs (stale-while-revalidate). With `limit` (and `after`), a ' +
          'page of the list and its `next`; with `prefix`, only the labels starting with it; ' +
          'either way, `X-Total-Count`. Without them the answer is the whole list, as it was.',
        params: parentParams,
        querystring: cachedAnswerQuery,
        response: {
          200: refResponse(subdomainList, {
            description:
              'The labels, sorted, without the parent (`bullish`, not `bullish.67679`). With ' +
              '`limit`, one page of them and `next`: `?limit=2` gives ' +
              '`{"s":"ok","result":["bullish","hollaaa"],"next":"hollaaa"}`. ' +
              "The example is the loopback RPC simulator's demo chain (`npm run rpc:sim`).",
            examples: [{ s: 'ok', result: ['bullish', 'hollaaa', 'testing'] }],
            headers: CACHED_ANSWER_HEADERS,
          }),
          304: notModifiedResponse,
          400: errorResponse(
            '`Invalid input`: a parent that is not exactly one non-empty label, a refused ' +
              '`?rpc=` (not https, a private or literal address, not on the allowlist, ' +
              'overrides off), a `limit` that is not a whole number from 1 to 1000 in decimal ' +
              'digits (no sign, exponent, spaces or leading zero), an empty `after` or one ' +
              'without `limit`, or a parameter given twice.',
            'Invalid input',
          ),
          429: errorResponse(
            '`Too many requests`: this client started more than COLD_MISS_LIMIT new refreshes ' +
              'in COLD_MISS_WINDOW_SECONDS. Hits and stale hits are never refused (a stale hit ' +
              'past the limit is served without starting a refresh).',
            'Too many requests',
            { 'Retry-After': HEADER.retryAfter },
          ),
          500: refreshingRouteInternal(),
          502: errorResponse(
            '`RPC unavailable`: the RPC failed (JSON-RPC error, 429 or 5xx after retries, a ' +
              'malformed reply, a time-out), or no refresh finished within SUBDOMAINS_WAIT_MS ' +
              '(it goes on and fills the cache).',
            'RPC unavailable',
          ),
          503: errorResponse(
            '`Service overloaded`: more than QUEUE_MAX_WAITING refreshes wait, so a cold miss is ' +
              'shed (with Retry-After). `Budget exhausted`: the daily RPC credit budget ' +
              '(RPC_CREDITS_PER_DAY) is spent, so a cold miss of the configured RPC is not ' +
              'refreshed (Retry-After: the next UTC day; cached answers are still served). ' +
              '`Service unavailable`: Redis dropped while the request waited on its refresh ' +
              '(Retry-After: a few seconds; the refresh completes once Redis is back). ' +
              `Or ${SHUTTING_DOWN}`,
            'Service overloaded',
            { 'Retry-After': HEADER.retryAfter },
          ),
        },
      },
    },
    // Warm: answered synchronously from the process's copy; the promise only carries a failure.
    (req, reply) => cached.answer(req, reply, send) as Promise<void> | undefined,
  );

  refuseOtherPaths(app, '/subdomains', WRONG_SHAPE_DETAIL);
};
