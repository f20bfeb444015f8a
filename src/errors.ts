/**
 * Typed errors and the response envelope. The texts of 400, 500 and 502 are the contract's; the
 * gateway answers every other error in the same envelope (docs/design.md, "Endpoints and the
 * error contract").
 */

export type ErrorEnvelope = { s: 'error'; result: string };
export type OkEnvelope<T> = { s: 'ok'; result: T };

export const ERROR_TEXT = {
  invalidInput: 'Invalid input',
  rpcUnavailable: 'RPC unavailable',
  internal: 'Internal error',
} as const;

/** Base class of every error that maps to a specific HTTP answer. */
export abstract class GatewayError extends Error {
  abstract readonly statusCode: number;
  /** The text placed in the envelope's `result`; never an upstream message or a stack. */
  abstract readonly publicMessage: string;
  /** Extra response headers, e.g. `Retry-After` for 429/503. */
  readonly headers: Readonly<Record<string, string>> = {};
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
  override readonly name = 'InternalError';
  readonly statusCode = 500;
  readonly publicMessage = ERROR_TEXT.internal;
}

/** An answer that tells the client when to try again (`Retry-After`, RFC 9110 §10.2.3). */
abstract class RetryLaterError extends GatewayError {
  override readonly headers: Readonly<Record<string, string>>;
  /** @param retryAfterSeconds whole seconds until a retry may succeed. */
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
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
 * 429 with `Retry-After`: this client started too many new refreshes (cold misses) in the window.
 * Hits, stale hits and requests joining a refresh already under way are never limited
 * (docs/design.md, "The subdomain cache").
 */
export class RateLimitedError extends RetryLaterError {
  override readonly name = 'RateLimitedError';
  readonly statusCode = 429;
  readonly publicMessage = 'Too many requests';
}

/** Builds the envelope of an error answer. */
export const errorEnvelope = (text: string): ErrorEnvelope => ({ s: 'error', result: text });

/** Builds the envelope of a success answer. */
export const ok = <T>(result: T): OkEnvelope<T> => ({ s: 'ok', result });
