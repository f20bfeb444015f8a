import { fnv1a } from '@fastify/etag';
import type { FastifyInstance } from 'fastify';

/**
 * True when an `If-None-Match` field value matches the current representation's entity tag
 * (RFC 9110 §13.1.2): `*`, or a list holding the tag under weak comparison (§8.8.3.2: `W/` is
 * ignored on both sides). Quoted tags are read whole, so a comma inside one does not split it.
 *
 * @param field the request's `If-None-Match` value, e.g. `"a", W/"b"` or `*`.
 * @param etag the answer's `ETag` value, e.g. `"b"`.
 */
export function ifNoneMatchHits(field: string, etag: string): boolean {
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag;
  // The common forms first: the one tag a cache or browser kept.
  if (field === opaque || field === `W/${opaque}`) return true;
  if (field.trim() === '*') return true;
  let at = 0;
  while (at < field.length) {
    const c = field[at];
    if (c === ' ' || c === '\t' || c === ',') {
      at++;
      continue;
    }
    if (field.startsWith('W/', at)) at += 2;
    if (field[at] !== '"') return false; // not a list of entity-tags: no match (§13.1.2)
    const close = field.indexOf('"', at + 1);
    if (close === -1) return false;
    if (field.slice(at, close + 1) === opaque) return true;
    at = close + 1;
  }
  return false;
}

/**
 * Strong ETags over the body, and 304 on `If-None-Match` (RFC 9110 §13.1.2), on every route: an
 * answer that already carries an ETag (the rendered answers of ./rendered.ts) is only compared;
 * any other string or Buffer body is hashed (FNV-1a, as @fastify/etag's; a validator needs no
 * cryptographic hash, and sha1 showed in the per-request cost). Unlike @fastify/etag 6, which
 * compared the field with the tag as one string, a list and `*` match, and only a GET or HEAD that
 * would answer 2xx becomes 304 (§13.2.1: conditions are ignored for any other answer).
 */
export function installEtags(app: FastifyInstance): void {
  // Callback-style, as the app's other per-request hooks: no promise per request.
  app.addHook('onSend', (req, reply, payload, done) => {
    let etag = reply.getHeader('etag');
    if (etag === undefined) {
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
      // fnv1a hashes Buffers as well (@fastify/etag's own hook passes them); its types say string.
      etag = `"${fnv1a(payload as string)}"`;
      reply.header('etag', etag);
    }
    const field = req.raw.headers['if-none-match'];
    if (
      field !== undefined &&
      reply.statusCode >= 200 &&
      reply.statusCode < 300 &&
      (req.raw.method === 'GET' || req.raw.method === 'HEAD') &&
      ifNoneMatchHits(field, String(etag))
    ) {
      reply.code(304);
      // HEAD: Fastify's own HEAD hook measures the payload for Content-Length and sends none,
      // which gives the 200's length, the one a 304 may carry (RFC 9110 §8.6).
      if (req.raw.method === 'HEAD') return done(null, payload);
      // GET: no body, and no Content-Length or Content-Type of one (§15.4.5, §8.6): a cache that
      // copies a 304's fields onto its stored answer must not learn a length of 0.
      reply.removeHeader('content-length').removeHeader('content-type');
      return done(null, null);
    }
    done(null, payload);
  });
}
