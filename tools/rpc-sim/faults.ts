/**
 * Fault injection for the RPC simulator: what a fault is and which request it applies to.
 */

/** What goes wrong, per HTTP request. */
export type FaultKind =
  /** HTTP 200 with a JSON-RPC error object (default code -32603 "Internal error"). */
  | { kind: 'rpc-error'; code?: number; message?: string }
  /** Plain HTTP error, e.g. 429 with Retry-After (seconds), 500, 503. Default body: status text. */
  | { kind: 'http'; status: number; retryAfterSeconds?: number; body?: string }
  /** HTTP 200, `Content-Type: application/json`, with a body that is not JSON. */
  | { kind: 'garbage'; body?: string }
  /** Never answers; `close()` destroys the socket. */
  | { kind: 'hang' }
  /** Answers normally after `ms` milliseconds. */
  | { kind: 'delay'; ms: number }
  /** Resets the TCP connection (RST) without answering. */
  | { kind: 'reset' };

/** Scope of a fault. */
export interface FaultScope {
  /** Applies to the next `times` matching HTTP requests (default: all of them). */
  times?: number;
  /**
   * Only requests calling this JSON-RPC method match; a batch matches if any element does.
   * For `rpc-error` in a batch, only the elements calling this method get the error.
   */
  method?: string;
}

/** A fault: what goes wrong, and for which requests. */
export type Fault = FaultKind & FaultScope;

/** Default garbage body: a JSON-RPC answer cut off halfway. */
export const GARBAGE_BODY = '{"jsonrpc":"2.0","result":{"context":{"slot":';

/**
 * Ordered fault list. The first fault matching a request is used and its `times` is
 * decremented; a fault whose `times` reaches zero is dropped.
 */
export class FaultQueue {
  #entries: Array<{ fault: Fault; remaining: number }> = [];

  /**
   * Replaces the list (`[]` clears it).
   * @throws TypeError on a fault with bad `times`, `status`, `ms` or `retryAfterSeconds`.
   */
  set(faults: readonly Fault[]): void {
    for (const fault of faults) checkFault(fault);
    this.#entries = faults.map((fault) => ({ fault, remaining: fault.times ?? Infinity }));
  }

  /** Number of faults still armed. */
  get size(): number {
    return this.#entries.length;
  }

  /**
   * Takes the first fault matching a request whose JSON-RPC methods are `methods` (one per
   * batch element; '' for elements without a string method).
   */
  take(methods: readonly string[]): Fault | undefined {
    const index = this.#entries.findIndex(
      ({ fault }) => fault.method === undefined || methods.includes(fault.method),
    );
    const entry = this.#entries[index];
    if (!entry) return undefined;
    entry.remaining--;
    if (entry.remaining <= 0) this.#entries.splice(index, 1);
    return entry.fault;
  }
}

function checkFault(fault: Fault): void {
  const bad = (what: string): never => {
    throw new TypeError(`invalid ${fault.kind} fault: ${what}`);
  };
  if (fault.times !== undefined && (!Number.isSafeInteger(fault.times) || fault.times < 1)) {
    bad(`times must be a positive integer, got ${fault.times}`);
  }
  switch (fault.kind) {
    case 'http':
      if (!Number.isInteger(fault.status) || fault.status < 200 || fault.status > 599) {
        bad(`status must be an integer in 200..599, got ${fault.status}`);
      }
      if (
        fault.retryAfterSeconds !== undefined &&
        (!Number.isSafeInteger(fault.retryAfterSeconds) || fault.retryAfterSeconds < 0)
      ) {
        bad(`retryAfterSeconds must be a non-negative integer, got ${fault.retryAfterSeconds}`);
      }
      break;
    case 'delay':
      if (!Number.isFinite(fault.ms) || fault.ms < 0) bad(`ms must be >= 0, got ${fault.ms}`);
      break;
    case 'rpc-error':
      if (fault.code !== undefined && !Number.isInteger(fault.code)) {
        bad(`code must be an integer, got ${fault.code}`);
      }
      break;
    default:
      break;
  }
}
