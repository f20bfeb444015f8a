/** Typed errors and the envelope (docs/design.md, "Endpoints and the error contract"). */

/** `result` is the contract's text (clients branch on it); `detail` is for people. */
export type ErrorEnvelope = { s: 'error'; result: string; detail?: string };

export const ERROR_TEXT = {
  invalidInput: 'Invalid input',
  rpcUnavailable: 'RPC unavailable',
  internal: 'Internal error',
} as const;

/** Options of a {@link GatewayError}. */
export type GatewayErrorOptions = ErrorOptions & {
  /** The envelope's `detail`: client input via {@link echoInput}, never upstream text. */
  detail?: string;
};

/** Base of every error that maps to a specific HTTP answer. */
export abstract class GatewayError extends Error {
  abstract readonly statusCode: number;
  /** The envelope's `result`; never an upstream message or a stack. */
  abstract readonly publicMessage: string;
  /** Extra response headers (`Retry-After`). */
  readonly headers: Readonly<Record<string, string>> = {};
  /** The envelope's `detail`, if any. */
  readonly detail: string | undefined;

  /** @param message for the log only. */
  constructor(message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.detail = options.detail;
  }
}

/** 400 `Invalid input`: the request's shape is wrong. */
export class InvalidInputError extends GatewayError {
  override readonly name = 'InvalidInputError';
  readonly statusCode = 400;
  readonly publicMessage = ERROR_TEXT.invalidInput;
}

/** 502 `RPC unavailable`: the endpoint failed once retries were spent. */
export class RpcUnavailableError extends GatewayError {
  override readonly name = 'RpcUnavailableError';
  readonly statusCode = 502;
  readonly publicMessage = ERROR_TEXT.rpcUnavailable;
}

/** 500 `Internal error`: our own fault, or no RPC endpoint configured. */
export class InternalError extends GatewayError {
  override readonly name: string = 'InternalError';
  readonly statusCode = 500;
  readonly publicMessage = ERROR_TEXT.internal;
}

/**
 * 500 for `RPC_URL` unset: warned once at start, so the handler logs each request at debug
 * without a stack.
 */
export class NotConfiguredError extends InternalError {
  override readonly name = 'NotConfiguredError';
}

/**
 * Why a request was refused with 429 or 503 (`sns_http_refusals_total{reason}`): expected answers
 * under load or attack, counted and never logged one line each.
 */
export type RefusalReason =
  | 'cold_miss_limit'
  | 'client_share'
  | 'stream_limit'
  | 'budget'
  | 'overloaded'
  | 'unavailable'
  | 'shutting_down';

/** An answer with `Retry-After` (RFC 9110 §10.2.3): a refusal, not a fault. */
export abstract class RetryLaterError extends GatewayError {
  override readonly headers: Readonly<Record<string, string>>;
  /** The refusal's label in `sns_http_refusals_total`. */
  abstract readonly reason: RefusalReason;
  /** @param retryAfterSeconds seconds until a retry may succeed (rounded up, at least 1). */
  constructor(message: string, retryAfterSeconds: number, options?: GatewayErrorOptions) {
    super(message, options);
    this.headers = { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) };
  }
}

/** 503: the refresh queue is full, so a cold miss is shed. */
export class OverloadedError extends RetryLaterError {
  override readonly name = 'OverloadedError';
  readonly statusCode = 503;
  readonly publicMessage = 'Service overloaded';
  readonly reason = 'overloaded';
}

/** 503: the process is shutting down; another replica can answer. */
export class ShuttingDownError extends RetryLaterError {
  override readonly name = 'ShuttingDownError';
  readonly statusCode = 503;
  readonly publicMessage = 'Shutting down';
  readonly reason = 'shutting_down';
}

/**
 * How long a client told {@link UnavailableError} waits before retrying, in seconds: Redis
 * reconnects within a second or two of coming back, and the refresh the request waited on is a
 * job in Redis that a worker then completes.
 */
export const REDIS_RETRY_AFTER_S = 5;

/**
 * 503: Redis dropped while the request waited on its refresh. Not the request's fault, nor one of
 * the gateway's own: a retry after `Retry-After` finds the refresh done once Redis is back.
 */
export class UnavailableError extends RetryLaterError {
  override readonly name = 'UnavailableError';
  readonly statusCode = 503;
  readonly publicMessage = 'Service unavailable';
  readonly reason = 'unavailable';
}

/** 503: the daily credit budget is spent; `Retry-After` runs to the next UTC day. */
export class BudgetExhaustedError extends RetryLaterError {
  override readonly name = 'BudgetExhaustedError';
  readonly statusCode = 503;
  readonly publicMessage = 'Budget exhausted';
  readonly reason = 'budget';
}

/**
 * 429: this client started too many refreshes (cold misses) in the window (`cold_miss_limit`),
 * spent its share of the day's credits (`client_share`), or holds too many streams.
 */
export class RateLimitedError extends RetryLaterError {
  override readonly name = 'RateLimitedError';
  readonly statusCode = 429;
  readonly publicMessage = 'Too many requests';
  readonly reason: RefusalReason;
  constructor(
    message: string,
    retryAfterSeconds: number,
    options: GatewayErrorOptions & { reason?: RefusalReason } = {},
  ) {
    super(message, retryAfterSeconds, options);
    this.reason = options.reason ?? 'cold_miss_limit';
  }
}

/** Builds an error envelope; `detail` is left out when undefined. */
export const errorEnvelope = (text: string, detail?: string): ErrorEnvelope =>
  detail === undefined ? { s: 'error', result: text } : { s: 'error', result: text, detail };

/** Most characters of client input repeated in a `detail`. */
export const MAX_ECHO_CHARS = 40;

// Bidi overrides, zero-width and line separators could forge or hide text in a detail or log.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * Client input fit for a `detail`: unprintables removed, cut to {@link MAX_ECHO_CHARS} code points
 * (ellipsis marks the cut), JSON-quoted. E.g. `"bonfida.sol"`.
 */
export function echoInput(raw: string): string {
  // Bounded work however long the input: only the head can be shown.
  const chars = Array.from(raw.slice(0, MAX_ECHO_CHARS * 4).replace(UNPRINTABLE, ''));
  const cut = chars.length > MAX_ECHO_CHARS || raw.length > MAX_ECHO_CHARS * 4;
  return JSON.stringify(chars.slice(0, MAX_ECHO_CHARS).join('') + (cut ? '…' : ''));
}
