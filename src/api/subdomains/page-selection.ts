/**
 * Pages and prefixes of a sorted label list (README, "Routes"): which labels `?limit=`,
 * `?after=` and `?prefix=` select on `/subdomains/:parent`. Pure: no I/O, no HTTP.
 *
 * Every search is a binary search over the entry's labels, which are sorted by JS's default sort
 * (UTF-16 code units: src/core/cache/subdomain-cache.ts `labelsOf`, worker/sns/subdomain-discovery.ts);
 * the `<` operator on strings compares the same way, so the answer's order is the entry's order.
 * A request copies only the labels it returns.
 */

/** What a request asks of the list; `after` and `prefix` as given, compared by UTF-16 code units. */
export type PageRequest = {
  /** Most labels in the page (1 to 1000); undefined: every label matched, and no `next`. */
  readonly limit: number | undefined;
  /** The page starts after this label in sort order; it need not be in the list. */
  readonly after: string | undefined;
  /** Only labels starting with it; `''` keeps every label. */
  readonly prefix: string;
};

/** The labels a {@link PageRequest} selects. */
export type Page = {
  readonly labels: readonly string[];
  /**
   * With a `limit`: the page's last label when more labels match after it, else null.
   * Without one: undefined (the answer has no `next` field).
   */
  readonly next: string | null | undefined;
  /** How many labels the prefix matches in the whole list (`after` and `limit` aside). */
  readonly total: number;
  /** Where the page's labels start in the list (for rows kept beside the labels, as `/details`). */
  readonly start: number;
};

/** The first index in `[from, to)` whose label is not below `target` (`to` when none). */
function lowerBound(labels: readonly string[], target: string, from: number, to: number): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((labels[mid] as string) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first index in `[from, to)` whose label is above `target` (`to` when none). */
function upperBound(labels: readonly string[], target: string, from: number, to: number): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((labels[mid] as string) <= target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The first index in `[from, to)` whose label does not start with `prefix`, given that none
 * there is below `prefix`: the labels that start with a string follow it at once in code-unit
 * order and sit together, so "starts with `prefix`" holds on a run from `from` and then never.
 */
function prefixEnd(labels: readonly string[], prefix: string, from: number, to: number): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((labels[mid] as string).startsWith(prefix)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Selects a page of `labels`: those starting with `prefix`, after `after`, at most `limit`.
 * Concatenating the pages got by passing each page's `next` as the following `after` gives every
 * label matched, once, in order. O(log n) comparisons plus the page's copy.
 *
 * @param labels sorted by JS's default sort (the cache entry's order); not modified.
 */
export function selectPage(labels: readonly string[], req: PageRequest): Page {
  let start = 0;
  let end = labels.length;
  if (req.prefix !== '') {
    start = lowerBound(labels, req.prefix, 0, end);
    end = prefixEnd(labels, req.prefix, start, end);
  }
  const total = end - start;
  if (req.after !== undefined) start = upperBound(labels, req.after, start, end);
  if (req.limit === undefined) {
    // No copy when the whole list is asked for (a prefix of '' with no `after`).
    const all = start === 0 && end === labels.length;
    return { labels: all ? labels : labels.slice(start, end), next: undefined, total, start };
  }
  const stop = Math.min(end, start + req.limit);
  const page = labels.slice(start, stop);
  const next = stop < end ? (page[page.length - 1] as string) : null;
  return { labels: page, next, total, start };
}
