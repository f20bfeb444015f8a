import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  ERROR_TEXT,
  errorEnvelope,
  GatewayError,
  NotConfiguredError,
  RetryLaterError,
  type RefusalReason,
} from '../errors.js';
import { CORS_HEADERS } from './cors.js';
import { PAGE_PARAM_ACCEPTED } from './page-params.js';

/** Envelope text of a framework-raised status. */
function textForStatus(status: number): string {
  if (status === 400) return ERROR_TEXT.invalidInput;
  if (status >= 500) return ERROR_TEXT.internal;
  return STATUS_CODES[status] ?? 'Error';
}

/** `detail` when none is more specific (never for 5xx: nothing internal leaks). */
const DETAIL_OF_STATUS: Readonly<Record<number, string>> = {
  400: 'the request is malformed',
  404: 'no such route: see /docs for the routes and their parameters',
  408: 'the request did not arrive in time',
  413: 'the request body is too large (the routes take none)',
  415: 'the request body has a media type the routes do not take (they take no body)',
  431: 'the URL or the headers are over the 16 KiB limit',
};

/** Least time between two summary lines of refusals, in milliseconds. */
const REFUSAL_SUMMARY_MS = 60_000;

/** Options of {@link installErrorHandling}. */
export type ErrorHandlingOptions = {
  /** Counts a 429 or 503 refusal (`sns_http_refusals_total`); none when absent. */
  countRefusal?: (reason: RefusalReason) => void;
  /** The clock of the summary line, in milliseconds. */
  now?: () => number;
};

/**
 * The one error handler: typed errors to their status and text, schema and framework errors to
 * their 4xx, the rest to 500. Upstream messages and stacks go to the log only. Refusals (429,
 * 503 with `Retry-After`) are answers, not faults: counted by reason, never a line each (a flood
 * wrote megabytes of log a second), and summed up in one warning a minute at most.
 */
export function installErrorHandling(app: FastifyInstance, opts: ErrorHandlingOptions = {}): void {
  const now = opts.now ?? Date.now;
  let summaryAt = Number.NEGATIVE_INFINITY;
  let unsummed: Partial<Record<RefusalReason, number>> = {};
  const refused = (log: FastifyRequest['log'], reason: RefusalReason) => {
    opts.countRefusal?.(reason);
    unsummed[reason] = (unsummed[reason] ?? 0) + 1;
    const t = now();
    if (t - summaryAt < REFUSAL_SUMMARY_MS) return;
    log.warn({ refused: unsummed }, 'requests refused since the last summary');
    summaryAt = t;
    unsummed = {};
  };
  app.setErrorHandler(
    (err: FastifyError | GatewayError, req: FastifyRequest, reply: FastifyReply) => {
      // Hot routes set CORS on success only; a page on another origin must read errors too.
      reply.headers(CORS_HEADERS);
      if (err instanceof GatewayError) {
        if (err instanceof RetryLaterError) refused(req.log, err.reason);
        else if (err instanceof NotConfiguredError) req.log.debug(err.message);
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

/** `detail` of a request refused before routing (Fastify `frameworkErrors`). */
export function frameworkErrorDetail(err: { code?: string }): string {
  return err.code === 'FST_ERR_BAD_URL'
    ? 'the URL holds a malformed percent-escape (%XX must encode UTF-8)'
    : (DETAIL_OF_STATUS[400] as string);
}

/** Cap on Fastify's validation text in a `detail` (it names the field, not the value). */
const MAX_VALIDATION_DETAIL = 200;

/** `detail` of a schema refusal: Fastify's text (parameter and rule), plus what is accepted. */
function validationDetail(err: FastifyError): string {
  const text = err.message.replace(/[\p{Cc}\p{Cf}]/gu, '').slice(0, MAX_VALIDATION_DETAIL);
  // `?rpc=a&rpc=b` arrives as an array: say what is accepted, not only "not a string".
  if (err.validationContext !== 'querystring') return text;
  const param = /^querystring\/(\w+)/.exec(text)?.[1];
  const accepted = param === undefined ? undefined : QUERY_ACCEPTED[param];
  return accepted === undefined ? text : `${text}: ${accepted}`;
}

const QUERY_ACCEPTED: Readonly<Record<string, string>> = {
  rpc: 'rpc must be given once, as a non-empty absolute URL',
  ...PAGE_PARAM_ACCEPTED,
};

const CLIENT_ERRORS: Record<string, number> = {
  HPE_HEADER_OVERFLOW: 431,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

/** `clientErrorHandler`: the envelope, not Node's bare reply, for HTTP the parser refuses. */
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
