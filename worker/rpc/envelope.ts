import type { RpcOutcome } from '../../src/core/metrics.js';
import {
  type ArrayReader,
  JsonBoundsError,
  type JsonElements,
  JsonHeapError,
  parseBoundedJson,
  parseBoundedJsonSplit,
  RPC_JSON_BOUNDS,
} from './bounded-json.js';

/** The JSON-RPC envelope, apart from ./client.ts so decode threads load no p-retry or sockets. */

/** A failed JSON-RPC call, classified for metrics and retry; the message is for logs only. */
export class RpcCallError extends Error {
  override readonly name = 'RpcCallError';
  /**
   * The reply itself was wrong (malformed, oversized, over the decode budget): the upstream will
   * send it again, so nothing retries. A merely non-retryable status or code is not final: the
   * job's back-off may see it pass.
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
 * Codes meaning "try again": node behind or unhealthy (-32005), slot not available (-32004,
 * -32016), internal (-32603), and providers' rate-limit codes used instead of HTTP 429.
 */
const RETRYABLE_RPC_CODES = new Set([-32005, -32004, -32016, -32603, 429, -32429]);

/** Agave's "Minimum context slot has not been reached": a node behind. */
const MIN_CONTEXT_SLOT_NOT_REACHED = -32016;

/**
 * The `result` of a JSON-RPC 2.0 reply to `id`, parsed within {@link RPC_JSON_BOUNDS} (decode
 * threads only); `onText` as `parseBoundedJson` takes it.
 *
 * @throws RpcCallError `http_error`: retryable for non-JSON, non-JSON-RPC or no result for `id`
 *   (a proxy's hiccup), final past the bounds; `rpc_error` for an error object.
 */
export function decodeEnvelope<T>(
  method: string,
  body: Uint8Array,
  id: number,
  onText?: () => void,
): T {
  return resultOf<T>(
    method,
    id,
    parsed(method, () => parseBoundedJson(body, RPC_JSON_BOUNDS, onText)),
  );
}

/**
 * {@link decodeEnvelope} of a reply whose `result` holds one large array at `path` (`["value"]`
 * for a reply with context, the result itself when it is the array): that array comes back empty
 * and its elements apart, each parsed when asked for (`parseBoundedJsonSplit`), so the reply is
 * never one tree. `elements` is undefined when the body was parsed whole (no such array, or more
 * than one); then the array is in `result`, and `onText` was called as in {@link decodeEnvelope}.
 * With `reader`, an array it can read is not parsed at all: `read` holds what it read, and
 * `elements` is undefined.
 *
 * @throws RpcCallError as {@link decodeEnvelope}; `elements.at(i)` throws SyntaxError for an
 *   element that is not JSON, and JsonHeapError past the heap.
 */
export function decodeEnvelopeSplit<T, R = never>(
  method: string,
  body: Uint8Array,
  id: number,
  path: readonly string[],
  onText?: () => void,
  reader?: ArrayReader<R>,
): { result: T; elements: JsonElements | undefined; read?: R } {
  const split = parsed(method, () =>
    parseBoundedJsonSplit(body, ['result', ...path], RPC_JSON_BOUNDS, onText, reader),
  );
  return {
    result: resultOf<T>(method, id, split.value),
    elements: split.elements,
    ...(split.read === undefined ? {} : { read: split.read }),
  };
}

/** `parse()`'s value, its failures as RpcCallError (the heap's as they are). */
function parsed<V>(method: string, parse: () => V): V {
  try {
    return parse();
  } catch (err) {
    if (err instanceof JsonBoundsError) throw malformed(`${method}: reply ${err.message}`);
    if (err instanceof JsonHeapError) throw err; // the thread's heap budget, not the reply's form
    throw new RpcCallError(`${method}: malformed JSON body`, 'http_error', true);
  }
}

/** The `result` of a parsed JSON-RPC reply to `id`; @throws RpcCallError as decodeEnvelope. */
function resultOf<T>(method: string, id: number, payload: unknown): T {
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

/** A JSON-RPC reply of the wrong shape for the method: final (502, nothing cached). */
export function malformed(message: string): RpcCallError {
  return new RpcCallError(message, 'http_error', false, undefined, { final: true });
}

/** An error across a thread boundary: structured clone keeps only built-in Error classes. */
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

/** An error as a {@link WireError}. */
export function toWireError(err: unknown): WireError {
  if (err instanceof RpcCallError) {
    const { message, outcome, retryable, retryAfterMs, final } = err;
    return { rpc: { message, outcome, retryable, retryAfterMs, final } };
  }
  if (err instanceof Error) return { error: err };
  return { thrown: String(err) };
}

/** The error a {@link WireError} describes, RpcCallError again where it was one. */
export function fromWireError(wire: WireError): Error {
  if ('rpc' in wire) {
    const { message, outcome, retryable, retryAfterMs, final } = wire.rpc;
    return new RpcCallError(message, outcome, retryable, retryAfterMs, { final });
  }
  if ('error' in wire) return wire.error;
  return new Error(wire.thrown);
}
