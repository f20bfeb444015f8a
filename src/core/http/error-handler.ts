import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_TEXT, errorEnvelope, GatewayError, NotConfiguredError } from '../errors.js';
import { CORS_HEADERS } from './cors.js';
import { PAGE_PARAM_ACCEPTED } from './page-params.js';

/**
 * The envelope text of a framework-raised status: every error uses the envelope (docs/design.md,
 * "Endpoints and the error contract").
 */
function textForStatus(status: number): string {
  if (status === 400) return ERROR_TEXT.invalidInput;
  if (status >= 500) return ERROR_TEXT.internal;
  return STATUS_CODES[status] ?? 'Error';
}

/** The `detail` of answers with no more specific one (never for 5xx: nothing internal leaks). */
const DETAIL_OF_STATUS: Readonly<Record<number, string>> = {
  400: 'the request is malformed',
  404: 'no such route: see /docs for the routes and their parameters',
  408: 'the request did not arrive in time',
  413: 'the request body is too large (the routes take none)',
  415: 'the request body has a media type the routes do not take (they take no body)',
  431: 'the URL or the headers are over the 16 KiB limit',
};

/**
 * The one error handler: typed errors map to their status and public text; schema and framework
 * errors (bad URL encoding, oversize bodies) to their 4xx with the contract's texts; everything
 * else is a 500 `Internal error`. Upstream messages and stacks go to the log, never to the body.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(
    (err: FastifyError | GatewayError, req: FastifyRequest, reply: FastifyReply) => {
      // The hot routes set their CORS headers themselves, on success only (./cors.ts): a page on
      // another origin must be able to read an error too.
      reply.headers(CORS_HEADERS);
      if (err instanceof GatewayError) {
        if (err instanceof NotConfiguredError) req.log.debug(err.message);
        else if (err.statusCode >= 500) req.log.error({ err }, 'request failed');
        else req.log.info({ reason: err.message }, 'request refused');
        return reply
          .code(err.statusCode)
          .headers(err.headers)
          .send(errorEnvelope(err.publicMessage, err.detail));
      }
      if ('validation' in err && err.validation) {
        return reply.code(400).send(errorEnvelope(ERROR_TEXT.invalidInput, validationDetail(err)));
      }
      const status =
        typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500
          ? err.statusCode
          : 500;
      if (status >= 500) req.log.error({ err }, 'unexpected failure');
      return reply
        .code(status)
        .send(errorEnvelope(textForStatus(status), DETAIL_OF_STATUS[status]));
    },
  );

  app.setNotFoundHandler((_req, reply) =>
    reply.code(404).send(errorEnvelope('Not found', DETAIL_OF_STATUS[404])),
  );
}

/** The `detail` of a request refused before routing (Fastify's `frameworkErrors`). */
export function frameworkErrorDetail(err: { code?: string }): string {
  return err.code === 'FST_ERR_BAD_URL'
    ? 'the URL holds a malformed percent-escape (%XX must encode UTF-8)'
    : (DETAIL_OF_STATUS[400] as string);
}

/** Longest schema-validation text repeated in a `detail` (it names the field, never its value). */
const MAX_VALIDATION_DETAIL = 200;

/**
 * The `detail` of a schema-validation refusal: Fastify's text (`querystring/rpc must NOT have
 * fewer than 1 characters`), which names the parameter and the rule broken, not the value sent.
 */
function validationDetail(err: FastifyError): string {
  const text = err.message.replace(/[\p{Cc}\p{Cf}]/gu, '').slice(0, MAX_VALIDATION_DETAIL);
  // `?rpc=a&rpc=b` arrives as an array: say what is accepted, not only that it is not a string.
  if (err.validationContext !== 'querystring') return text;
  const param = /^querystring\/(\w+)/.exec(text)?.[1];
  const accepted = param === undefined ? undefined : QUERY_ACCEPTED[param];
  return accepted === undefined ? text : `${text}: ${accepted}`;
}

/** What each query parameter accepts, appended to the `detail` of its refusal. */
const QUERY_ACCEPTED: Readonly<Record<string, string>> = {
  rpc: 'rpc must be given once, as a non-empty absolute URL',
  ...PAGE_PARAM_ACCEPTED,
};

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
  const body = JSON.stringify(errorEnvelope(textForStatus(status), DETAIL_OF_STATUS[status]));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
