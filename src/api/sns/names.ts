import { echoInput, InvalidInputError } from '../../core/errors.js';

/** A normalized name; `labels` is `[label]` or `[sub, parent]`. */
export type DomainName = { readonly name: string; readonly labels: readonly string[] };

/**
 * Trims and lower-cases a path parameter (README, "Routes"). `toLowerCase` follows the Unicode
 * tables of the running Node's ICU, which change across Node releases; derivations are cached as
 * immutable, so the API refuses to start on a Node whose lower-casing or trimming differs from
 * the Unicode 17.0 tables (`checkNameTables` in ./name-tables.ts, test/node-version.test.ts).
 */
export function normalizeName(raw: string): string {
  return raw.trim().toLowerCase();
}

/**
 * @param accepted what the parameter accepts, for the `detail`.
 * @throws InvalidInputError for an empty label, over `maxLabels` labels, or a `/`: sent as `%2F`,
 *   which many proxies decode into a path separator.
 */
function splitLabels(raw: string, maxLabels: number, accepted: string): DomainName {
  const name = normalizeName(raw);
  const labels = name.split('.');
  if (labels.length > maxLabels || labels.some((l) => l.length === 0)) {
    throw new InvalidInputError(`expected 1 to ${maxLabels} non-empty labels`, {
      detail: `${accepted} (got ${echoInput(raw)})`,
    });
  }
  if (name.includes('/')) {
    throw new InvalidInputError('a label holds a slash', {
      detail: `${accepted}; "/" (%2F) is not allowed in a label (got ${echoInput(raw)})`,
    });
  }
  return { name, labels };
}

const DOMAIN_ACCEPTED = 'domain must be one label or sub.parent, without the registry suffix';
const PARENT_ACCEPTED = 'parent must be one label without the registry suffix';

/**
 * `:domain` of `/record-key-v2`: one label or `sub.parent`.
 *
 * @throws InvalidInputError for an empty label, more than two labels or a `/`.
 */
export function parseDerivationDomain(raw: string): DomainName {
  return splitLabels(raw, 2, DOMAIN_ACCEPTED);
}

/**
 * `:parent` of `/subdomains`: exactly one label.
 *
 * @throws InvalidInputError otherwise.
 */
export function parseParentLabel(raw: string): string {
  const { labels } = splitLabels(raw, 1, PARENT_ACCEPTED);
  return labels[0] as string;
}
