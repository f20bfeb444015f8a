import { fnv1a } from '@fastify/etag';
import type { FastifyReply } from 'fastify';
import { ok } from '../../core/http/schemas.js';

/** A success answer rendered once, sent many times, with its strong ETag. */
export type RenderedAnswer = { readonly body: string; readonly etag: string };

/** Renders a success envelope once: the bytes the schema gives and the ETag ./etag.ts computes. */
export function renderOk(result: unknown): RenderedAnswer {
  const body = JSON.stringify(ok(result));
  return { body, etag: etagOf(body) };
}

/** A body's strong ETag (quoted FNV-1a), as ./etag.ts makes it. */
export const etagOf = (body: string): string => `"${fnv1a(body)}"`;

/** Sends a rendered answer: no serialization, no hashing (./etag.ts only compares the ETag). */
export function sendRendered(reply: FastifyReply, answer: RenderedAnswer): FastifyReply {
  return reply
    .type('application/json; charset=utf-8')
    .header('etag', answer.etag)
    .send(answer.body);
}
