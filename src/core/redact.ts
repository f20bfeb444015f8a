/** This parameter's value may hold an API key (an override RPC URL). */
const SECRET_PARAM = 'rpc';

/** A query parameter's name as fast-querystring (Fastify's default) decodes it. */
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
 * `?rpc=` values replaced by `[redacted]` in a request target, for logs. Matches any name that is
 * `rpc` once decoded, lowercased and stripped of non-letters (`r%70c`, `rpc[]`): a mistyped name
 * still carries the secret.
 *
 * @param opts.keepEmpty keep a value with no letter or digit (prose such as "without ?rpc=.").
 */
export function redactUrl(url: string, opts: { keepEmpty?: boolean } = {}): string {
  // find-my-way starts the query at the first `?` or `#`; so must this, or `x#rpc=` leaks.
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
 * URL credentials, up to the last `@` (a password may hold one); JSON escapes are part of them,
 * a bare `"`, space or `/` ends them.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s"\\/]|\\.)+@/gi;

/** Text holding a `?` or `#`: a URL or request target. */
const URL_LIKE = /[^\s"]*[?#][^\s"]*/g;

/**
 * Removes URL credentials and `?rpc=` values from one log line, whatever wrote it (the logger's
 * last step).
 */
export function redactLine(line: string): string {
  return line
    .replace(URL_USERINFO, '$1[redacted]@')
    .replace(URL_LIKE, (url) => redactUrl(url, { keepEmpty: true }));
}

const MAX_DEPTH = 8;

/**
 * A copy of an error's serialized fields with the `args` of any ioredis `command` redacted (an
 * `AUTH`'s password, a job's data). Nested errors go through `serializeError` first.
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
