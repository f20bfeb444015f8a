import { fnv1a } from '@fastify/etag';
import { Type } from '@fastify/type-provider-typebox';
import { InvalidInputError } from '../../core/errors.js';
import type { Page, PageRequest } from '../subdomains/page-selection.js';
import { CORS_HEADERS } from '../../core/http/cors.js';
import type { RenderedAnswer } from './rendered.js';
import { MAX_PAGE_LIMIT } from '../../core/http/page-params.js';

/** Pages and prefixes over HTTP (docs/design.md, "Pages and prefixes"). */

/**
 * `?limit=` checked as a string: ajv's coercion would read `1e3`, `0x10`, ` 2`, `Infinity`. No
 * leading zero, so one page has one URL (one cache key).
 */
export const PAGE_LIMIT_PATTERN = '^(?:[1-9][0-9]{0,2}|1000)$';

/** `limit`, `after`, `prefix` for a route's schema. */
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

/** The querystring as the schema validated it. */
export type PageQuery = { limit?: string; after?: string; prefix?: string };

/**
 * The page a request asks for, or undefined for none (the contract's answer, byte for byte).
 * `after` and `prefix` are not normalized: labels are listed as the chain holds them.
 *
 * @throws InvalidInputError for `after` without `limit` (refused to keep its meaning free).
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

/** CORS headers exposing `X-Total-Count`, on paged answers only (others keep theirs). */
export const PAGED_CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...CORS_HEADERS,
  'access-control-expose-headers': `${CORS_HEADERS['access-control-expose-headers']}, X-Total-Count`,
});

/** `X-Total-Count` as an OpenAPI header object. */
export const TOTAL_COUNT_HEADER = {
  type: 'string',
  description:
    'Only when `limit`, `after` or `prefix` is given: how many labels the prefix matches in the ' +
    'whole list (every label without `prefix`), whatever the page.',
} as const;

/**
 * Renders a paged answer (`next` with `limit`). Its ETag derives from the list's ETag and the
 * request's parameters, not the page's bytes, so any change to the list (even of
 * `X-Total-Count` alone) gives a new one.
 *
 * @param result the page's labels, or rows (`/details`).
 * @param listEtag the whole list's ETag.
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
 * {@link renderPage} for pre-serialized items (comma-separated JSON, no brackets): the same bytes
 * and ETag.
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

/** See {@link renderPage}. */
function pageEtag(req: PageRequest, listEtag: string): string {
  // JSON: no two requests give one key, whatever their labels hold.
  const key = JSON.stringify([listEtag, req.limit ?? null, req.prefix, req.after ?? null]);
  return `"${fnv1a(key)}"`;
}
