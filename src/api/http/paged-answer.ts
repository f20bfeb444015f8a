import { fnv1a } from '@fastify/etag';
import { Type } from '@fastify/type-provider-typebox';
import { InvalidInputError } from '../../core/errors.js';
import type { Page, PageRequest } from '../subdomains/page-selection.js';
import { CORS_HEADERS } from '../../core/http/cors.js';
import type { RenderedAnswer } from './rendered.js';
import { MAX_PAGE_LIMIT } from '../../core/http/page-params.js';

/**
 * The HTTP side of pages and prefixes (README, "Routes"; docs/design.md, "Pages and prefixes"): the query parameters,
 * their parsing, and the paged answer. The selection itself is src/api/subdomains/page-selection.ts.
 */

/**
 * `?limit=` as it must be spelled: a whole number from 1 to {@link MAX_PAGE_LIMIT} in decimal
 * digits, nothing else. Checked by the schema as a string, not as an integer: ajv's type coercion
 * would read `1e3`, `0x10`, ` 2` or `Infinity` as numbers. No leading zero either, so one page has
 * one URL (`limit=7` and `limit=007` would be two cache keys of one answer).
 */
export const PAGE_LIMIT_PATTERN = '^(?:[1-9][0-9]{0,2}|1000)$';

/** The querystring properties `limit`, `after` and `prefix`, for a route's schema. */
export const pageQueryProperties = {
  limit: Type.Optional(
    Type.String({
      pattern: PAGE_LIMIT_PATTERN,
      description:
        `A page of at most this many labels: a whole number from 1 to ${MAX_PAGE_LIMIT} in ` +
        'decimal digits, without sign, exponent, spaces or leading zero (`100`, not `1e2`, ' +
        '`0x64` or `0100`). The answer gets a `next` field: the last label of the page, or null ' +
        'when no more follow. Without it the answer is the whole list (of the prefix), with no ' +
        '`next` field.',
      examples: ['2'],
    }),
  ),
  after: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        "With `limit`: the page starts after this label in the answer's sort order (the previous " +
        "page's `next`; it need not be a label of the list). Taken as it is, not normalized. " +
        'Refused without `limit`.',
      examples: ['bullish'],
    }),
  ),
  prefix: Type.Optional(
    Type.String({
      description:
        'Only the labels that start with this text, compared as it is given with the labels as ' +
        'they are listed: not trimmed, not lower-cased (`AB` keeps `ABC`, not `abc`), so every ' +
        'label listed is reached by each of its own prefixes. Empty: every label. Combines with ' +
        '`limit` and `after`; `X-Total-Count` counts its labels.',
      examples: ['h'],
    }),
  ),
};

/** The querystring as the route's schema gives it (`limit` matched {@link PAGE_LIMIT_PATTERN}). */
export type PageQuery = { limit?: string; after?: string; prefix?: string };

/**
 * The page a request asks for, or undefined when it gives none of `limit`, `after`, `prefix`:
 * then the answer is the contract's, byte for byte (no `next`, no `X-Total-Count`). `after` and
 * `prefix` are taken as they are, not normalized as the parent is: labels are listed as the chain
 * holds them (any text: capitals, spaces), and a trimmed or lower-cased prefix would not reach
 * `ABC` or ` x` (docs/design.md, "Pages and prefixes").
 *
 * @param query as the schema validated it: `limit` digits only, 1 to {@link MAX_PAGE_LIMIT}.
 * @throws InvalidInputError for `after` without `limit` (a cursor with no page size; refusing it
 *   leaves the meaning free to give later).
 */
export function pageRequestOf(query: PageQuery): PageRequest | undefined {
  const { limit, after, prefix } = query;
  if (limit === undefined && after === undefined && prefix === undefined) return undefined;
  if (after !== undefined && limit === undefined) {
    throw new InvalidInputError('after without limit', {
      detail: 'after needs limit: ?limit=N&after=<the next of the previous page>',
    });
  }
  return {
    limit: limit === undefined ? undefined : Number(limit),
    after,
    prefix: prefix ?? '',
  };
}

/**
 * The CORS headers of a paged answer: those of every answer, and `X-Total-Count` readable by
 * pages on other origins. Only paged answers carry it, so the others keep their headers as they were.
 */
export const PAGED_CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...CORS_HEADERS,
  'access-control-expose-headers': `${CORS_HEADERS['access-control-expose-headers']}, X-Total-Count`,
});

/** The `X-Total-Count` header, as an OpenAPI header object. */
export const TOTAL_COUNT_HEADER = {
  type: 'string',
  description:
    'Only when `limit`, `after` or `prefix` is given: how many labels the prefix matches in the ' +
    'whole list (every label without `prefix`), whatever the page.',
} as const;

/**
 * Renders a paged answer, `{"s":"ok","result":[...]}` plus `"next"` when the request gave a
 * `limit`. Its strong ETag is made of the whole list's ETag and the request's parameters, not of
 * the page's bytes: the same list and parameters give the same bytes, a page of another URL gets
 * another tag, and any change to the list (one that moves only `X-Total-Count` included) a new one.
 *
 * @param result the page's items: its labels, or their rows (`/details`).
 * @param listEtag the ETag of the whole list's answer (./rendered.ts `renderOk`).
 */
export function renderPage(
  page: Pick<Page, 'next'>,
  result: readonly unknown[],
  req: PageRequest,
  listEtag: string,
): RenderedAnswer {
  const body =
    page.next === undefined
      ? JSON.stringify({ s: 'ok', result })
      : JSON.stringify({ s: 'ok', result, next: page.next });
  return { body, etag: pageEtag(req, listEtag) };
}

/**
 * {@link renderPage} for items already serialized: `items` is the JSON text of the page's items,
 * comma-separated, without the brackets (`''` for none), as a slice of the whole list's rendered
 * body gives it (src/api/subdomains/details-views.ts). The same bytes and ETag as {@link renderPage}
 * of those items.
 */
export function renderPageText(
  page: Pick<Page, 'next'>,
  items: string,
  req: PageRequest,
  listEtag: string,
): RenderedAnswer {
  const next = page.next === undefined ? '' : `,"next":${JSON.stringify(page.next)}`;
  return { body: `{"s":"ok","result":[${items}]${next}}`, etag: pageEtag(req, listEtag) };
}

/** A page's ETag: of the whole list's ETag and the request's parameters (see {@link renderPage}). */
function pageEtag(req: PageRequest, listEtag: string): string {
  // JSON: no two requests give one key, whatever their labels hold.
  const key = JSON.stringify([listEtag, req.limit ?? null, req.prefix, req.after ?? null]);
  return `"${fnv1a(key)}"`;
}
