/**
 * Typed errors and the error envelope (the success envelope is the HTTP layer's:
 * src/core/http/schemas.ts). The texts of 400, 500 and 502 are the contract's; the
 * gateway answers every other error in the same envelope (docs/design.md, "Endpoints and the
 * error contract").
 */

/**
 * `result` is the contract's short text; `detail`, when present, says what was wrong and what is
 * accepted, for people reading the answer (clients branch on the status and `result` only).
 */
export type ErrorEnvelope = { s: 'error'; result: string; detail?: string };

export const ERROR_TEXT = {
  invalidInput: 'Invalid input',
  rpcUnavailable: 'RPC unavailable',
  internal: 'Internal error',
} as const;

/** What a {@link GatewayError} may carry besides its log message. */
export type GatewayErrorOptions = ErrorOptions & {
  /**
   * The envelope's `detail`: what was wrong and what is accepted. Any piece of the client's input
   * in it must go through {@link echoInput}; never an upstream message, a URL or a stack.
   */
  detail?: string;
};

/** Base class of every error that maps to a specific HTTP answer. */
export abstract class GatewayError extends Error {
  abstract readonly statusCode: number;
  /** The text placed in the envelope's `result`; never an upstream message or a stack. */
  abstract readonly publicMessage: string;
  /** Extra response headers, e.g. `Retry-After` for 429/503. */
  readonly headers: Readonly<Record<string, string>> = {};
  /** The envelope's `detail` (see {@link GatewayErrorOptions}), or undefined for none. */
  readonly detail: string | undefined;

  /** @param message for the log only; `options.detail` goes to the client. */
  constructor(message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.detail = options.detail;
  }
}

/** 400 `Invalid input`: the request's shape is wrong (the contract). */
export class InvalidInputError extends GatewayError {
  override readonly name = 'InvalidInputError';
  readonly statusCode = 400;
  readonly publicMessage = ERROR_TEXT.invalidInput;
}

/**
 * 502 `RPC unavailable`: the selected RPC endpoint failed once retries were spent (docs/design.md,
 * "Replies from an RPC").
 */
export class RpcUnavailableError extends GatewayError {
  override readonly name = 'RpcUnavailableError';
  readonly statusCode = 502;
  readonly publicMessage = ERROR_TEXT.rpcUnavailable;
}

/** 500 `Internal error`: a fault of our own, or no RPC endpoint configured (the contract). */
export class InternalError extends GatewayError {
  override readonly name: string = 'InternalError';
  readonly statusCode = 500;
  readonly publicMessage = ERROR_TEXT.internal;
}

/**
 * 500 `Internal error` for a missing piece of configuration (`RPC_URL` unset): the contract's
 * answer, but not a fault. It is warned about once at start, so each request logs it at debug
 * only, without a stack (the error handler reads the class).
 */
export class NotConfiguredError extends InternalError {
  override readonly name = 'NotConfiguredError';
}

/** An answer that tells the client when to try again (`Retry-After`, RFC 9110 §10.2.3). */
abstract class RetryLaterError extends GatewayError {
  override readonly headers: Readonly<Record<string, string>>;
  /** @param retryAfterSeconds whole seconds until a retry may succeed. */
  constructor(message: string, retryAfterSeconds: number, options?: GatewayErrorOptions) {
    super(message, options);
    this.headers = { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) };
  }
}

/**
 * 503 with `Retry-After`: the refresh queue is full, so a cold miss is shed (docs/design.md, "The
 * subdomain cache").
 */
export class OverloadedError extends RetryLaterError {
  override readonly name = 'OverloadedError';
  readonly statusCode = 503;
  readonly publicMessage = 'Service overloaded';
}

/** 503 with `Retry-After`: the process is shutting down; another replica can answer. */
export class ShuttingDownError extends RetryLaterError {
  override readonly name = 'ShuttingDownError';
  readonly statusCode = 503;
  readonly publicMessage = 'Shutting down';
}

/**
 * 503 with `Retry-After`: the configured endpoint's daily credit budget (`RPC_CREDITS_PER_DAY`) is
 * spent, so a cold miss is not refreshed; cached entries are still answered, stale or not
 * (docs/design.md, "Budget"). `Retry-After` is the time left until the next UTC day.
 */
export class BudgetExhaustedError extends RetryLaterError {
  override readonly name = 'BudgetExhaustedError';
  readonly statusCode = 503;
  readonly publicMessage = 'Budget exhausted';
}

/**
 * 429 with `Retry-After`: this client started too many new refreshes (cold misses) in the window.
 * Hits, stale hits and requests joining a refresh already under way are never refused; a stale
 * hit past the limit is served without starting its refresh (docs/design.md, "The subdomain
 * cache").
 */
export class RateLimitedError extends RetryLaterError {
  override readonly name = 'RateLimitedError';
  readonly statusCode = 429;
  readonly publicMessage = 'Too many requests';
}

/**
 * Builds the envelope of an error answer.
 *
 * @param text the contract's short text (`result`).
 * @param detail what was wrong and what is accepted; left out of the envelope when undefined.
 */
export const errorEnvelope = (text: string, detail?: string): ErrorEnvelope =>
  detail === undefined ? { s: 'error', result: text } : { s: 'error', result: text, detail };

/** At most this many characters of a client's input are repeated in an error's `detail`. */
export const MAX_ECHO_CHARS = 40;

// Control and format characters (bidi overrides, zero-width), and line/paragraph separators: they
// could forge or hide text where a detail is shown or logged.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * A piece of client input fit to repeat in an error's `detail`: control and format characters
 * removed, cut to {@link MAX_ECHO_CHARS} code points (an ellipsis marks the cut), and quoted as a
 * JSON string, so quotes and backslashes are escaped.
 *
 * @param raw the input as received (any length).
 * @returns e.g. `"bonfida.sol"`, or `"aaaa…"` for a long input.
 */
export function echoInput(raw: string): string {
  // Bounded work however long the input: only the head can be shown.
  const chars = Array.from(raw.slice(0, MAX_ECHO_CHARS * 4).replace(UNPRINTABLE, ''));
  const cut = chars.length > MAX_ECHO_CHARS || raw.length > MAX_ECHO_CHARS * 4;
  return JSON.stringify(chars.slice(0, MAX_ECHO_CHARS).join('') + (cut ? '…' : ''));
}
