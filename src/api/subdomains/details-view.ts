import type { CacheEntry, EntryAccounts } from '../../core/cache/subdomain-cache.js';
import { etagOf, type RenderedAnswer } from '../http/rendered.js';

/**
 * One `/details` view: the rows of one revision of an entry rendered once, and what cuts a page
 * out of them (docs/design.md, "`/details` views"); ./details-views.ts keeps and reads them.
 */

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

/**
 * `/details` of one revision of an entry, rendered once (docs/design.md, "`/details` views"): the
 * whole answer and its ETag, and what cuts a page out of it without serializing rows again.
 */
export type DetailsView = {
  /**
   * The entry the accounts were read with, as far as answers need it (its revision and
   * `fetchedAt`; `labels` are {@link labels}); the caching headers come from it.
   */
  readonly entry: CacheEntry;
  /** The rows' labels in row order (the entry's order), for `selectPage`'s binary search. */
  readonly labels: readonly string[];
  /** `{"s":"ok","result":[rows]}` and its strong ETag. */
  readonly whole: RenderedAnswer;
  /**
   * Where row `i` starts in `whole.body`, in UTF-16 code units; entry `labels.length` is one past
   * the last row's comma as if one followed it, so rows `[a, b)` are `body.slice(o[a], o[b] - 1)`.
   */
  readonly offsets: Uint32Array;
  /** What the view is counted as in the byte budget (approximate: string bytes, offsets, labels). */
  readonly bytes: number;
};

const HEAD = '{"s":"ok","result":[';

/**
 * Renders the `/details` view of `accounts`, read with `entry` (one MGET: the two belong to one
 * revision). The body is `JSON.stringify({ s: 'ok', result: detailsOf(accounts) })`, byte for
 * byte, built row by row so each row's place in it is known.
 */
export function buildDetailsView(entry: CacheEntry, accounts: EntryAccounts): DetailsView {
  const rows = detailsOf(accounts);
  return renderView(
    entry,
    rows.map((row) => row.label),
    rows.map((row) => JSON.stringify(row)),
  );
}

/**
 * The view of rows already in answer order: `labels[i]` and `parts[i]` (its JSON text) of row
 * `i`, read with `entry`.
 */
export function renderView(
  entry: CacheEntry,
  labels: string[],
  parts: readonly string[],
): DetailsView {
  const offsets = new Uint32Array(parts.length + 1);
  let at = HEAD.length;
  for (const [i, part] of parts.entries()) {
    offsets[i] = at;
    at += part.length + 1;
  }
  offsets[parts.length] = at;
  const body = `${HEAD}${parts.join(',')}]}`;
  // V8 keeps a string of Latin-1 characters at one byte each, any other at two (JSON escapes
  // every character below the space).
  const charBytes = /[^ -\u00ff]/.test(body) ? 2 : 1;
  const bytes =
    body.length * charBytes +
    offsets.byteLength +
    labels.reduce((n, label) => n + label.length * charBytes + 24, 256);
  return {
    entry: { rev: entry.rev, fetchedAt: entry.fetchedAt, slot: entry.slot, labels },
    labels,
    whole: { body, etag: etagOf(body) },
    offsets,
    bytes,
  };
}

/**
 * The JSON text of `count` rows from row `start` of `view`, comma-separated, without brackets
 * (`''` for none): a slice of the rendered body, no serialization.
 */
export function rowsText(view: DetailsView, start: number, count: number): string {
  if (count === 0) return '';
  const from = view.offsets[start] as number;
  const to = view.offsets[start + count] as number;
  return view.whole.body.slice(from, to - 1);
}

/** Whether row (label `a`, key `ak`) comes before row (`b`, `bk`) in answer order. */
export const precedes = (a: string, ak: string, b: string, bk: string): boolean =>
  a < b || (a === b && ak < bk);
