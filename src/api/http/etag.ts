import { fnv1a } from '@fastify/etag';
import type { FastifyInstance } from 'fastify';

/**
 * `If-None-Match` matches `etag` (RFC 9110 §13.1.2): `*`, or a list holding it under weak
 * comparison (§8.8.3.2); quoted tags are read whole (commas inside do not split).
 */
export function ifNoneMatchHits(field: string, etag: string): boolean {
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag;
  // The common case: the one tag a cache kept.
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
 * Strong ETags and 304 on every route. Pre-set ETags (./rendered.ts) are only compared; other
 * bodies are hashed with FNV-1a (sha1 showed in the per-request cost). Unlike @fastify/etag 6, a
 * list and `*` match, and only a 2xx GET or HEAD becomes 304 (§13.2.1).
 */
export function installEtags(app: FastifyInstance): void {
  app.addHook('onSend', (req, reply, payload, done) => {
    let etag = reply.getHeader('etag');
    if (etag === undefined) {
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
      // fnv1a hashes Buffers too (@fastify/etag passes them); its types say string.
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
      // HEAD: Fastify's HEAD hook sets the 200's Content-Length, which a 304 may carry (§8.6).
      if (req.raw.method === 'HEAD') return done(null, payload);
      // GET: drop the body's length and type (§15.4.5): a cache copying them must not learn 0.
      reply.removeHeader('content-length').removeHeader('content-type');
      return done(null, null);
    }
    done(null, payload);
  });
}
