import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_TEXT, errorEnvelope, GatewayError } from '../errors.js';
import { CORS_HEADERS } from './cors.js';

/**
 * The envelope text of a framework-raised status: every error uses the envelope (docs/design.md,
 * "Endpoints and the error contract").
 */
function textForStatus(status: number): string {
  if (status === 400) return ERROR_TEXT.invalidInput;
  if (status >= 500) return ERROR_TEXT.internal;
  return STATUS_CODES[status] ?? 'Error';
}

/**
 * The one error handler: typed errors map to their status and public text; schema and framework
 * errors (bad URL encoding, oversize bodies) to their 4xx with the contract's texts; everything
 * else is a 500 `Internal error`. Upstream messages and stacks go to the log, never to the body.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(
    (err: FastifyError | GatewayError, req: FastifyRequest, reply: FastifyReply) => {
      // The hot routes set their CORS headers themselves, on success only (../cors.ts): a page on
      // another origin must be able to read an error too.
      reply.headers(CORS_HEADERS);
      if (err instanceof GatewayError) {
        if (err.statusCode >= 500) req.log.error({ err }, 'request failed');
        else req.log.info({ reason: err.message }, 'request refused');
        return reply
          .code(err.statusCode)
          .headers(err.headers)
          .send(errorEnvelope(err.publicMessage));
      }
      if ('validation' in err && err.validation) {
        return reply.code(400).send(errorEnvelope(ERROR_TEXT.invalidInput));
      }
      const status =
        typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500
          ? err.statusCode
          : 500;
      if (status >= 500) req.log.error({ err }, 'unexpected failure');
      return reply.code(status).send(errorEnvelope(textForStatus(status)));
    },
  );

  app.setNotFoundHandler((_req, reply) => reply.code(404).send(errorEnvelope('Not found')));
}

const CLIENT_ERRORS: Record<string, number> = {
  HPE_HEADER_OVERFLOW: 431,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

/**
 * Answers malformed HTTP that never reaches a route (Node's parser: oversize URL or headers, bad
 * request line) with the envelope instead of Node's bare reply. Used as Fastify's
 * `clientErrorHandler`.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const status = CLIENT_ERRORS[err.code ?? ''] ?? 400;
  const body = JSON.stringify(errorEnvelope(textForStatus(status)));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
