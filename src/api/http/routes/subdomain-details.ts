import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { hash } from 'node:crypto';
import { OverloadedError } from '../../../core/errors.js';
import { buildDetailsView, rowsText } from '../../subdomains/details-view.js';
import {
  RANGED_PAGES_FROM,
  type DetailsAnswer,
  type DetailsViews,
} from '../../subdomains/details-views.js';
import { MAX_PAGE_LIMIT } from '../../../core/http/page-params.js';
import { selectPage, type Page, type PageRequest } from '../../subdomains/page-selection.js';
import { renderPageText } from '../paged-answer.js';
import { sendRendered, type RenderedAnswer } from '../rendered.js';
import type { CachedReply } from '../cache-headers.js';
import { cachedAnswers, type CachedAnswerDeps, type FoundAnswer } from '../cached-answers.js';
import {
  CACHED_ANSWER_HEADERS,
  cachedAnswerQuery,
  parentParams,
  subdomainDetail,
  subdomainDetails,
} from '../subdomain-schemas.js';
import {
  errorEnvelopeSchema,
  errorResponse,
  HEADER,
  INTERNAL,
  notModifiedResponse,
  refResponse,
  useSchemas,
} from '../../../core/http/schemas.js';
import { ROUTE } from './paths.js';

/**
 * A page of `/details`: its rows' text as a paged answer, with an ETag of its bytes and its
 * `X-Total-Count` (docs/design.md, "`/details` views"), so a page cut from a view and one read
 * by its labels carry one tag, which moves only when the page or its count does.
 */
function detailsPage(selected: Page, rows: string, page: PageRequest): RenderedAnswer {
  const { body } = renderPageText(selected, rows, page, '');
  // SHA-1, not the lists' 32-bit FNV-1a: a row's owner is chosen by whoever transfers the name,
  // and an owner giving a page its old tag back would be found in seconds against FNV-1a.
  return { body, etag: `"${hash('sha1', `${selected.total}\n${body}`, 'base64url')}"` };
}

/** What the `/details` route needs. */
export type SubdomainDetailsRouteDeps = CachedAnswerDeps & {
  /** The configured endpoint's rendered views. */
  views: DetailsViews;
};

/**
 * `GET /subdomains/:parent/details[?rpc=URL]`: the list's labels with name account and owner, from
 * the same entry and refresh (no RPC call of its own) and the same caching headers.
 */
export const subdomainDetailsRoutes: FastifyPluginAsyncTypebox<SubdomainDetailsRouteDeps> = async (
  app,
  deps,
) => {
  useSchemas(app, [errorEnvelopeSchema, subdomainDetail, subdomainDetails]);
  const cached = cachedAnswers(app, deps);

  /** Sends the whole view, or the page's rows cut from it with `X-Total-Count`. */
  const sendView = (to: CachedReply, shown: DetailsAnswer) => {
    const { reply, page } = to;
    const { view } = shown;
    cached.setHeaders(to, shown);
    if (page === undefined) return sendRendered(reply, view.whole);
    const selected = selectPage(view.labels, page);
    reply.header('x-total-count', String(selected.total));
    const rows = rowsText(view, selected.start, selected.labels.length);
    return sendRendered(reply, detailsPage(selected, rows, page));
  };

  /**
   * A page of a large entry with no view kept, read by its labels (`DetailsViews.pageRows`), or
   * undefined when it is not such a page. Falls back to the view when Redis moved on.
   */
  const sendRanged = (answer: FoundAnswer): Promise<unknown> | undefined => {
    const { endpoint, found, parent, page, reply } = answer;
    if (page === undefined || found.entry.labels.length < RANGED_PAGES_FROM) return undefined;
    const selected = selectPage(found.entry.labels, page);
    if (selected.labels.length > MAX_PAGE_LIMIT) return undefined;
    const { rowAt } = found;
    if (rowAt) {
      // The registry index's answer holds its rows in answer order: the page's are rendered.
      const rows: string[] = [];
      for (let i = 0; i < selected.labels.length; i++) {
        rows.push(JSON.stringify(rowAt(selected.start + i)));
      }
      cached.setHeaders(answer, found);
      reply.header('x-total-count', String(selected.total));
      return Promise.resolve(sendRendered(reply, detailsPage(selected, rows.join(','), page)));
    }
    // Another answer that carries its accounts is rendered as a view.
    if (found.accounts) return undefined;
    // Later pages of this revision are cut from its view, once rendered.
    deps.views.warm(endpoint.id, parent, found);
    return deps.views.pageRows(endpoint.id, parent, found, selected.labels).then((rows) => {
      if (rows === undefined) return sendBuilt(answer);
      cached.setHeaders({ ...answer, now: deps.lookup.now() }, found);
      reply.header('x-total-count', String(selected.total));
      return sendRendered(reply, detailsPage(selected, rows, page));
    });
  };

  /** Sends the view of the entry's revision, read and rendered unless kept. */
  const sendBuilt = (answer: FoundAnswer): Promise<FastifyReply> =>
    deps.views.get(answer.endpoint.id, answer.parent, answer.found).then((built) => {
      if (!built) throw notYetWithAccounts();
      return sendView({ ...answer, now: deps.lookup.now() }, built);
    });

  const notYetWithAccounts = () =>
    new OverloadedError('entry accounts unreadable', deps.freshSeconds, {
      detail: 'owners are not cached for this parent yet; they are after its next refresh',
    });

  /**
   * Sends the entry's view. Kept views (configured endpoint, warm) go synchronously; an override's
   * is rendered per request and not kept (`no-store`, rare, read from Redis anyway).
   */
  const send = (answer: FoundAnswer): Promise<unknown> | undefined => {
    const { endpoint, found, parent } = answer;
    const views = deps.views;
    if (endpoint.kind === 'override') {
      const { entry, state } = found;
      if (!entry.accounts) throw notYetWithAccounts();
      sendView(answer, { view: buildDetailsView(entry, entry.accounts), entry, state });
      return;
    }
    const kept = views.peek(endpoint.id, parent, found);
    if (kept) {
      sendView(answer, kept);
      return;
    }
    return sendRanged(answer) ?? sendBuilt(answer);
  };

  app.get(
    ROUTE.subdomainDetails,
    {
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary: 'Subdomains of a top-level .sol name with their name account and owner',
        operationId: 'getSubdomainDetails',
        description:
          'The labels of `/subdomains/:parent`, in the same order, each with its subdomain name ' +
          "account and the owner in that account's header, from the same cache entry and refresh " +
          '(no RPC call of its own). Misses, stale entries and `?rpc=` behave as there.',
        params: parentParams,
        querystring: cachedAnswerQuery,
        response: {
          200: refResponse(subdomainDetails, {
            description: 'One row per label, in the order `/subdomains/:parent` lists them.',
            examples: [
              {
                s: 'ok',
                result: [
                  {
                    label: 'bullish',
                    key: '5SgEfzsXLVPdu8s5sQxZanJfx5gFnPwwtWLagyM4rMY7',
                    owner: 'H8JaWKERCF67XGey9c8C8rdiBXaHY69snJjjn36uoo6',
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
            '`Service overloaded`, `Budget exhausted` or `Service unavailable`: as for ' +
              '`/subdomains/:parent`; ' +
              '`Service overloaded` also while the accounts of the entry cannot be read ' +
              '(until its next refresh).',
            'Service overloaded',
            { 'Retry-After': HEADER.retryAfter },
          ),
        },
      },
    },
    // Warm and kept: answered synchronously; the promise, if any, only carries a failure.
    (req, reply) => cached.answer(req, reply, send) as Promise<void> | undefined,
  );
};
