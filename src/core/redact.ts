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
 * the route reads it, is `rpc` (in any case), so `?r%70c=` is caught as well as `?rpc=`; and so
 * is a name that is `rpc` once its other characters are dropped (`rpc[]`, `rpc.`, `;rpc`): the
 * route does not read those, but a client that mistyped the name sent its secret all the same.
 * The rest of the URL is kept for debugging.
 *
 * @param url a request target (`/path?query`), as received.
 * @param opts.keepEmpty keep a parameter whose value has no letter or digit (prose such as
 *   "without ?rpc=." holds no secret).
 * @returns the same target with each such parameter written `rpc=[redacted]`.
 */
export function redactUrl(url: string, opts: { keepEmpty?: boolean } = {}): string {
  // The router starts the query at the first `?` or `#` (find-my-way): so must this, or
  // `/subdomains/x#rpc=...` reaches the route with `rpc` set and is logged in clear.
  const q = url.search(/[?#]/);
  if (q === -1) return url;
  const params = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      if (
        decodedName(pair)
          .toLowerCase()
          .replace(/[^a-z]/g, '') !== SECRET_PARAM
      )
        return pair;
      const eq = pair.indexOf('=');
      const value = eq === -1 ? '' : pair.slice(eq + 1);
      return opts.keepEmpty && !/[\p{L}\p{N}]/u.test(value) ? pair : `${SECRET_PARAM}=[redacted]`;
    });
  return `${url.slice(0, q + 1)}${params.join('&')}`;
}

/**
 * A URL's credentials (`scheme://user:password@`) anywhere in a text, up to the last `@` before
 * the host: a password may hold an `@`. JSON escapes (`\"`) are part of it; a bare `"` (the end
 * of a JSON string), a space or a `/` end it.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s"\\/]|\\.)+@/gi;

/** A run of text holding a `?` or `#`: a URL or request target, as logs carry them. */
const URL_LIKE = /[^\s"]*[?#][^\s"]*/g;

/**
 * Removes secrets from one log line, whatever logged it (the logger's last step, so a library's
 * message or a field nobody thought of is covered too): the credentials of any URL
 * (`redis://user:password@host` -> `redis://[redacted]@host`) and the value of any `?rpc=`
 * parameter (see {@link redactUrl}).
 *
 * @param line a serialized log line (JSON), or any text.
 */
export function redactLine(line: string): string {
  return line
    .replace(URL_USERINFO, '$1[redacted]@')
    .replace(URL_LIKE, (url) => redactUrl(url, { keepEmpty: true }));
}

/** How deep {@link redactErrorFields} looks into an error's fields. */
const MAX_DEPTH = 8;

/**
 * A copy of an error's serialized fields without the arguments of any Redis command it carries:
 * ioredis puts the failed command on its errors (`command: {name, args}`), and those arguments
 * are an `AUTH`'s user and password, or a job's data with an override's URL. The command's name
 * stays. Errors nested in it (arrays of them included, which would serialize as their bare
 * fields) go through `serializeError` first.
 *
 * @param serializeError pino's error serializer (its `type`, `message`, `stack` and fields).
 */
export function redactErrorFields(
  value: unknown,
  serializeError: (err: Error) => unknown,
  depth = 0,
  seen: WeakSet<object> = new WeakSet(),
): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH || seen.has(value)) return '[redacted: nested]';
  seen.add(value);
  const next = (v: unknown) => redactErrorFields(v, serializeError, depth + 1, seen);
  if (value instanceof Error) return next(serializeError(value));
  if (Array.isArray(value)) return value.map(next);
  // A Buffer's or a Date's own fields are not what it logs as.
  if (ArrayBuffer.isView(value) || value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (key === 'command' && field !== null && typeof field === 'object' && 'args' in field) {
      const name = (field as { name?: unknown }).name;
      out[key] = { name, args: '[redacted]' };
    } else {
      out[key] = next(field);
    }
  }
  return out;
}
