/**
 * The texts of a refused page parameter (`?limit=`, `?after=`, `?prefix=`), here rather than with
 * the paged answer (src/api/http/paged-answer.ts) because the one error handler, which the
 * worker's ops server shares, appends them to the `detail` of a refusal.
 */

/** Most labels in one page: `?limit=` takes 1 to this. */
export const MAX_PAGE_LIMIT = 1000;

/** The `detail` of a refused page parameter, by name: what it accepts. */
export const PAGE_PARAM_ACCEPTED: Readonly<Record<string, string>> = {
  limit:
    `limit must be given once, as a whole number from 1 to ${MAX_PAGE_LIMIT} in decimal digits ` +
    '(no sign, exponent, spaces or leading zero)',
  after: 'after must be given once, as a non-empty label (the `next` of the previous page)',
  prefix: 'prefix must be given once, as text',
};
