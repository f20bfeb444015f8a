import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { boundedMemo } from '../../../core/cache/bounded-memo.js';
import { InternalError, OverloadedError } from '../../../core/errors.js';
import type { EndpointSelector, RpcEndpoint } from '../../../core/rpc/endpoint.js';
import { parseParentLabel } from '../../sns/names.js';
import {
  buildDetailsView,
  rowsText,
  type DetailsAnswer,
  type DetailsViews,
} from '../../subdomains/details-views.js';
import type { LookupResult, SubdomainLookup } from '../../subdomains/lookup.js';
import { selectPage, type PageRequest } from '../../subdomains/page-selection.js';
import { pageQueryProperties, pageRequestOf, renderPageText } from '../paged-answer.js';
import { sendRendered } from '../rendered.js';
import {
  CACHED_ANSWER_HEADERS,
  cacheHeaders,
  clientKey,
  requesterOf,
  setCacheHeaders,
} from '../subdomain-answers.js';
import {
  errorResponse,
  HEADER,
  INTERNAL,
  notModifiedResponse,
  okResponse,
} from '../../../core/http/schemas.js';

export type SubdomainDetailsRouteDeps = {
  endpoints: EndpointSelector;
  /** Absent when the API was built without Redis: the route then answers 500. */
  lookup: SubdomainLookup | undefined;
  /** The rendered views of the configured endpoint; absent: the route answers 500. */
  views: DetailsViews | undefined;
  freshSeconds: number;
  staleSeconds: number;
};

const detail = Type.Object({
  label: Type.String({ description: 'the label, as `/subdomains/:parent` lists it' }),
  key: Type.String({ description: "the subdomain's name account (base58)" }),
  owner: Type.String({ description: "the owner in the name account's header (base58)" }),
});

/**
 * `GET /subdomains/:parent/details[?rpc=URL]` (README, "Routes"): the labels of
 * `/subdomains/:parent` with each subdomain's name account and owner, from the same cache entry
 * and refresh (the one `getProgramAccounts` carries the owners; no RPC call of its own), with the
 * same caching headers.
 */
export const subdomainDetailsRoutes: FastifyPluginAsyncTypebox<SubdomainDetailsRouteDeps> = async (
  app,
  deps,
) => {
  const checkColdMiss = app.createRateLimit();
  const headers = cacheHeaders(deps.freshSeconds, deps.staleSeconds);

  /**
   * Sends the view: the whole answer without `page`, else the page's rows cut out of it (the
   * labels' page, as `/subdomains/:parent` gives it) with `X-Total-Count`.
   */
  const send = (
    reply: FastifyReply,
    endpoint: RpcEndpoint,
    { view, entry, state }: DetailsAnswer,
    page: PageRequest | undefined,
    now = Date.now(),
  ) => {
    setCacheHeaders(reply, headers, endpoint, entry, state, page !== undefined, now);
    if (page === undefined) return sendRendered(reply, view.whole);
    const selected = selectPage(view.labels, page);
    reply.header('x-total-count', String(selected.total));
    const rows = rowsText(view, selected.start, selected.labels.length);
    return sendRendered(reply, renderPageText(selected, rows, page, view.whole.etag));
  };

  // Raw `:parent` values seen lately and their label, as `/subdomains/:parent` keeps them.
  const parentOf = boundedMemo(parseParentLabel, { maxEntries: 10_000, maxInputLength: 64 });

  /**
   * Everything but a warm hit whose view is kept: the lookup (unless `hit` is already the
   * in-process copy's answer), then the view of the entry found, read and rendered if need be.
   * An override's entry carries its accounts: its view is rendered per request and not kept
   * (`no-store` answers, rare, their entry read from Redis anyway).
   */
  const answerThroughRedis = async (
    req: FastifyRequest,
    reply: FastifyReply,
    parent: string,
    rpc: string | undefined,
    page: PageRequest | undefined,
    hit?: { endpoint: RpcEndpoint; found: LookupResult },
  ) => {
    const requester = requesterOf(req, checkColdMiss);
    const endpoint = hit?.endpoint ?? (await deps.endpoints.select(rpc, requester.charge));
    if (!deps.lookup || !deps.views) throw new InternalError('no cache configured');
    const found = hit?.found ?? (await deps.lookup.lookup(parent, endpoint, requester));
    let answer: DetailsAnswer | null;
    if (endpoint.kind === 'override') {
      const { entry, state } = found;
      answer = entry.accounts
        ? { view: buildDetailsView(entry, entry.accounts), entry, state }
        : null;
    } else {
      answer = await deps.views.get(endpoint.id, parent, found);
    }
    if (!answer) {
      throw new OverloadedError('entry written without its accounts', deps.freshSeconds, {
        detail: 'owners are not cached for this parent yet; they are after its next refresh',
      });
    }
    return send(reply, endpoint, answer, page);
  };

  app.get(
    '/subdomains/:parent/details',
    {
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary: 'Subdomains of a top-level .sol name with their name account and owner',
        description:
          'The labels of `/subdomains/:parent`, in the same order, each with its subdomain name ' +
          "account and the owner in that account's header, from the same cache entry and refresh " +
          '(no RPC call of its own). Misses, stale entries and `?rpc=` behave as there.',
        params: Type.Object({
          parent: Type.String({ description: 'as for `/subdomains/:parent`', examples: ['67679'] }),
        }),
        querystring: Type.Object({
          rpc: Type.Optional(Type.String({ minLength: 1, description: 'as for `/subdomains`' })),
          ...pageQueryProperties,
        }),
        response: {
          200: okResponse(Type.Array(detail), {
            description: 'One row per label, in the order `/subdomains/:parent` lists them.',
            examples: [
              {
                s: 'ok',
                result: [
                  {
                    label: 'bullish',
                    key: '5nBP8MXM7ZzvBbCR6sodQ3EDwxzrEfDqdAp6ZZQ3KD9i',
                    owner: 'HKKp49qGWXd639QsuH7JiLijfVW5UtCVY4s1n2HANwEA',
                  },
                ],
              },
            ],
            headers: CACHED_ANSWER_HEADERS,
          }),
          304: notModifiedResponse,
          400: errorResponse('`Invalid input`: as for `/subdomains/:parent`.', 'Invalid input'),
          429: errorResponse(
            '`Too many requests`: as for `/subdomains/:parent`.',
            'Too many requests',
            {
              'Retry-After': HEADER.retryAfter,
            },
          ),
          500: errorResponse(INTERNAL, 'Internal error'),
          502: errorResponse('`RPC unavailable`: as for `/subdomains/:parent`.', 'RPC unavailable'),
          503: errorResponse(
            '`Service overloaded`: as for `/subdomains/:parent`; also while the entry was written ' +
              'by an earlier release, without the accounts (until its next refresh).',
            'Service overloaded',
            { 'Retry-After': HEADER.retryAfter },
          ),
        },
      },
    },
    (req, reply) => {
      const parent = parentOf(req.params.parent);
      const page = pageRequestOf(req.query);
      // A warm parent whose view is kept is answered synchronously: no promise, no Redis.
      if (req.query.rpc === undefined && deps.lookup && deps.views) {
        const endpoint = deps.endpoints.selectDefault();
        const now = Date.now();
        const found = deps.lookup.peek(parent, endpoint, clientKey(req), now);
        if (found) {
          const kept = deps.views.peek(endpoint.id, parent, found);
          if (kept) {
            send(reply, endpoint, kept, page, now);
            return;
          }
          return answerThroughRedis(req, reply, parent, undefined, page, { endpoint, found });
        }
      }
      return answerThroughRedis(req, reply, parent, req.query.rpc, page);
    },
  );
};
