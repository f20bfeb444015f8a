/**
 * Replaces the value of `?rpc=` in a request URL, for logs: an override URL may carry an API key,
 * never logged in clear (docs/design.md, "Replies from an RPC"). The rest of the URL is kept for
 * debugging.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const params = url
    .slice(q + 1)
    .split('&')
    .map((pair) => (/^rpc(=|$)/i.test(pair) || /^rpc%/i.test(pair) ? 'rpc=[redacted]' : pair));
  return `${url.slice(0, q)}?${params.join('&')}`;
}
