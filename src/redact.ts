/** The parameter whose value may hold an API key (an override RPC URL). */
const SECRET_PARAM = 'rpc';

/**
 * A query parameter's name as the router's query parser reads it (fast-querystring, Fastify's
 * default): `+` is a space, percent-escapes are decoded, a malformed escape leaves it as sent.
 */
function decodedName(pair: string): string {
  const eq = pair.indexOf('=');
  const raw = (eq === -1 ? pair : pair.slice(0, eq)).replace(/\+/g, ' ');
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Replaces the value of `?rpc=` in a request URL, for logs: an override URL may carry an API key
 * (README, "`?rpc=` overrides": never logged in clear). A parameter is redacted when its name, as
 * the route reads it, is `rpc` (in any case), so `?r%70c=` is caught as well as `?rpc=`. The rest
 * of the URL is kept for debugging.
 *
 * @param url a request target (`/path?query`), as received.
 * @returns the same target with each such parameter written `rpc=[redacted]`.
 */
export function redactUrl(url: string): string {
  // The router starts the query at the first `?` or `#` (find-my-way): so must this, or
  // `/subdomains/x#rpc=...` reaches the route with `rpc` set and is logged in clear.
  const q = url.search(/[?#]/);
  if (q === -1) return url;
  const params = url
    .slice(q + 1)
    .split('&')
    .map((pair) =>
      decodedName(pair).toLowerCase() === SECRET_PARAM ? `${SECRET_PARAM}=[redacted]` : pair,
    );
  return `${url.slice(0, q + 1)}${params.join('&')}`;
}
