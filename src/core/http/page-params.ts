/**
 * Page-parameter refusal texts: here, not in src/api/http/paged-answer.ts, because the shared
 * error handler (the worker's too) appends them.
 */

/** Most labels in one page: `?limit=` takes 1 to this. */
export const MAX_PAGE_LIMIT = 1000;

/** `detail` of a refused page parameter, by name. */
export const PAGE_PARAM_ACCEPTED: Readonly<Record<string, string>> = {
  limit:
    `limit must be given once, as a whole number from 1 to ${MAX_PAGE_LIMIT} in decimal digits ` +
    '(no sign, exponent, spaces or leading zero)',
  after: 'after must be given once, as a non-empty label (the `next` of the previous page)',
  prefix: 'prefix must be given once, as text',
};
