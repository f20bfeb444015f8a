import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EntryAccounts } from '../../cache/subdomain-cache.js';
import { InternalError, OverloadedError } from '../../errors.js';
import type { EndpointSelector } from '../../rpc/endpoint.js';
import { parseParentLabel } from '../../sns/names.js';
import type { SubdomainLookup } from '../../subdomains/lookup.js';
import { selectPage } from '../../subdomains/pages.js';
import { pageQueryProperties, pageRequestOf, renderPage } from '../pages.js';
import { renderOk, sendRendered } from '../rendered.js';
import {
  CACHED_ANSWER_HEADERS,
  cacheHeaders,
  coldMissCharge,
  setCacheHeaders,
} from '../subdomain-answers.js';
import { errorResponse, HEADER, INTERNAL, notModifiedResponse, okResponse } from '../schemas.js';

export type SubdomainDetailsRouteDeps = {
  endpoints: EndpointSelector;
  /** Absent when the API was built without Redis: the route then answers 500. */
  lookup: SubdomainLookup | undefined;
  freshSeconds: number;
  staleSeconds: number;
};

/** One row of `/details`: a label, its subdomain name account and the owner in its header. */
export type SubdomainDetail = { label: string; key: string; owner: string };

/**
 * The rows of `accounts`, in the order `/subdomains/:parent` lists the labels (JS string order;
 * two subdomains with one label, by key).
 */
export function detailsOf(accounts: EntryAccounts): SubdomainDetail[] {
  return Object.entries(accounts)
    .map(([key, [label, owner]]) => ({ label, key, owner }))
    .sort((a, b) =>
      a.label < b.label ? -1 : a.label > b.label ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
    );
}

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
    async (req, reply) => {
      const parent = parseParentLabel(req.params.parent);
      const page = pageRequestOf(req.query);
      const charge = coldMissCharge(req, checkColdMiss);
      const endpoint = await deps.endpoints.select(req.query.rpc, charge);
      if (!deps.lookup) throw new InternalError('no cache configured');
      const { entry, state } = await deps.lookup.lookup(parent, endpoint, charge);
      const accounts = await deps.lookup.accountsOf(parent, endpoint, entry);
      if (!accounts) {
        throw new OverloadedError('entry written without its accounts', deps.freshSeconds, {
          detail: 'owners are not cached for this parent yet; they are after its next refresh',
        });
      }
      setCacheHeaders(reply, headers, endpoint, entry, state, page !== undefined);
      const rows = detailsOf(accounts);
      const whole = renderOk(rows);
      if (page === undefined) return sendRendered(reply, whole);
      // The page of the labels, as `/subdomains/:parent` gives it, with its rows.
      const selected = selectPage(
        rows.map((r) => r.label),
        page,
      );
      reply.header('x-total-count', String(selected.total));
      const pageRows = rows.slice(selected.start, selected.start + selected.labels.length);
      return sendRendered(reply, renderPage(selected, pageRows, page, whole.etag));
    },
  );
};
