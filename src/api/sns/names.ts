import { echoInput, InvalidInputError } from '../../core/errors.js';

/**
 * A name as the routes accept it, after normalization: trimmed, lower-cased, split on `.`.
 * `labels` is `[label]` for a top-level domain or `[sub, parent]` for a one-level subdomain.
 */
export type DomainName = { readonly name: string; readonly labels: readonly string[] };

/**
 * Trims and lower-cases a raw path parameter: the contract's rule that both endpoints trim
 * whitespace and convert the domain to lowercase (README, "Routes").
 *
 * `toLowerCase` follows the Unicode tables of the running Node's ICU, which change between Node
 * releases (a character cased in a newer Unicode version is left as it is by an older one). The
 * gateway runs one Node release everywhere, Node 20.20.2, whose tables are **Unicode 17.0**
 * (`process.versions.unicode`; pinned in package.json `engines`, the Dockerfile, and checked by
 * test/node-version.test.ts), because a derivation is cached as immutable: two replicas with
 * different tables would answer two keys for one name.
 */
export function normalizeName(raw: string): string {
  return raw.trim().toLowerCase();
}

/**
 * @param accepted what the parameter accepts, for the refusal's `detail`.
 * @throws InvalidInputError for an empty label, more than `maxLabels` labels, or a `/`: a client
 *   can send one only percent-encoded (`%2F`), which many proxies and caches decode into a path
 *   separator, so such a name would not reach the route the same way through them.
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
 * Parses the `:domain` of `/record-key-v2`: one label, or `sub.parent` (README, "Routes").
 *
 * @throws InvalidInputError for an empty name, an empty label, more than two labels or a `/`.
 */
export function parseDerivationDomain(raw: string): DomainName {
  return splitLabels(raw, 2, DOMAIN_ACCEPTED);
}

/**
 * Parses the `:parent` of `/subdomains`: exactly one non-empty label (README, "Routes").
 *
 * @throws InvalidInputError otherwise (a `/` included).
 */
export function parseParentLabel(raw: string): string {
  const { labels } = splitLabels(raw, 1, PARENT_ACCEPTED);
  return labels[0] as string;
}
