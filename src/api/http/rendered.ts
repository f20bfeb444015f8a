import { fnv1a } from '@fastify/etag';
import type { FastifyReply } from 'fastify';
import { ok } from '../../core/http/schemas.js';

/** A success answer made once and sent many times: its body and its strong ETag. */
export type RenderedAnswer = { readonly body: string; readonly etag: string };

/**
 * Renders `{ s: "ok", result }` (the success envelope) once, for answers that are sent again and again (a hot
 * derivation, a warm subdomain list): the same bytes the route's response schema gives and the
 * same validator the ETag hook computes (./etag.ts: FNV-1a, quoted: a strong ETag, RFC 9110
 * §8.8.3).
 */
export function renderOk(result: unknown): RenderedAnswer {
  const body = JSON.stringify(ok(result));
  return { body, etag: etagOf(body) };
}

/** The strong ETag of a body, as {@link renderOk} and the ETag hook make it (quoted FNV-1a). */
export const etagOf = (body: string): string => `"${fnv1a(body)}"`;

/**
 * Sends a rendered answer as it is: no serialization, no hashing. The ETag hook (./etag.ts) sees
 * the ETag already set and only compares it with `If-None-Match` (304 on a match).
 */
export function sendRendered(reply: FastifyReply, answer: RenderedAnswer): FastifyReply {
  return reply
    .type('application/json; charset=utf-8')
    .header('etag', answer.etag)
    .send(answer.body);
}
