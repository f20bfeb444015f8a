import type { RpcOutcome } from '../../core/metrics.js';
import { JsonBoundsError, parseBoundedJson, RPC_JSON_BOUNDS } from './bounded-json.js';

/**
 * The JSON-RPC envelope of a 200 reply, and the error every failed call becomes. Kept apart from
 * ./client.ts (p-retry, sockets) so a worker thread can decode a reply without loading them.
 */

/**
 * One failed JSON-RPC call, classified for metrics (`outcome`) and for retrying. The message may
 * quote the upstream; it is for logs only, never for a response body.
 */
export class RpcCallError extends Error {
  override readonly name = 'RpcCallError';
  /**
   * The reply itself was wrong (malformed, oversized, past the decode budget): the same upstream
   * sends it again, so neither the client nor the job retries it. A status or JSON-RPC error that
   * is merely not retryable in place (a 403, -32602) is not final: the job's back-off may see it
   * pass.
   */
  readonly final: boolean;
  constructor(
    message: string,
    readonly outcome: Exclude<RpcOutcome, 'ok'>,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
    options?: ErrorOptions & { final?: boolean },
  ) {
    super(message, options);
    this.final = options?.final ?? false;
  }
}

/**
 * JSON-RPC error codes that say "try again" rather than "this cannot succeed": node behind or
 * unhealthy (-32005), block or slot not yet available (-32004, -32016), internal error (-32603),
 * and the rate-limit codes some providers use instead of HTTP 429.
 */
const RETRYABLE_RPC_CODES = new Set([-32005, -32004, -32016, -32603, 429, -32429]);

/** "Minimum context slot has not been reached" (agave's rpc custom errors): a node behind. */
export const MIN_CONTEXT_SLOT_NOT_REACHED = -32016;

/**
 * The `result` of a JSON-RPC 2.0 reply body (HTTP 200) to request `id`, parsed within
 * {@link RPC_JSON_BOUNDS} (./bounded-json.ts). Runs in a decode thread, never on the main thread.
 *
 * @throws RpcCallError `http_error`: retryable for a body that is not JSON, not a JSON-RPC object
 *   or without a result for `id` (a proxy's hiccup); not retryable for a body past the bounds (an
 *   upstream that sends that once sends it again). `rpc_error` for a JSON-RPC error object,
 *   retryable for the codes above.
 */
export function decodeEnvelope<T>(method: string, body: Uint8Array, id: number): T {
  let payload: unknown;
  try {
    payload = parseBoundedJson(body, RPC_JSON_BOUNDS);
  } catch (err) {
    if (err instanceof JsonBoundsError) throw malformed(`${method}: reply ${err.message}`);
    throw new RpcCallError(`${method}: malformed JSON body`, 'http_error', true);
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new RpcCallError(`${method}: reply is not a JSON-RPC object`, 'http_error', true);
  }
  const msg = payload as {
    id?: unknown;
    result?: unknown;
    error?: { code?: unknown; message?: unknown };
  };
  if (msg.error !== undefined && msg.error !== null) {
    const code = typeof msg.error.code === 'number' ? msg.error.code : NaN;
    const text = typeof msg.error.message === 'string' ? msg.error.message.slice(0, 200) : '';
    throw new RpcCallError(
      `${method}: JSON-RPC error ${code} ${text}`,
      code === MIN_CONTEXT_SLOT_NOT_REACHED ? 'behind' : 'rpc_error',
      RETRYABLE_RPC_CODES.has(code),
    );
  }
  if (!('result' in msg) || msg.id !== id) {
    throw new RpcCallError(`${method}: reply has no result for id ${id}`, 'http_error', true);
  }
  return msg.result as T;
}

/**
 * A reply that is JSON-RPC but not what the method answers (a null account, numeric data, a data
 * slice of the wrong length, a list of the wrong size): the upstream's fault, and one that a retry
 * meets again, so it is not retried (the request answers 502 and nothing is cached).
 */
export function malformed(message: string): RpcCallError {
  return new RpcCallError(message, 'http_error', false, undefined, { final: true });
}

/**
 * An error as it crosses a thread boundary (structured clone keeps an Error's class only for the
 * built-in ones, so an RpcCallError travels as its fields).
 */
export type WireError =
  | {
      rpc: {
        message: string;
        outcome: Exclude<RpcOutcome, 'ok'>;
        retryable: boolean;
        retryAfterMs?: number;
        final: boolean;
      };
    }
  | { error: Error }
  | { thrown: string };

export function toWireError(err: unknown): WireError {
  if (err instanceof RpcCallError) {
    const { message, outcome, retryable, retryAfterMs, final } = err;
    return { rpc: { message, outcome, retryable, retryAfterMs, final } };
  }
  if (err instanceof Error) return { error: err };
  return { thrown: String(err) };
}

/** The error {@link toWireError} describes, an RpcCallError again where it was one. */
export function fromWireError(wire: WireError): Error {
  if ('rpc' in wire) {
    const { message, outcome, retryable, retryAfterMs, final } = wire.rpc;
    return new RpcCallError(message, outcome, retryable, retryAfterMs, { final });
  }
  if ('error' in wire) return wire.error;
  return new Error(wire.thrown);
}
