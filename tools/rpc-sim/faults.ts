/** Fault injection for the RPC simulator. */

/** What goes wrong, per HTTP request. */
export type FaultKind =
  /** HTTP 200 with a JSON-RPC error object (default code -32603 "Internal error"). */
  | { kind: 'rpc-error'; code?: number; message?: string }
  /** Plain HTTP error (e.g. 429 with Retry-After seconds); default body: status text. */
  | { kind: 'http'; status: number; retryAfterSeconds?: number; body?: string }
  /** 200 JSON content type, non-JSON body. */
  | { kind: 'garbage'; body?: string }
  /** Never answers; `close()` destroys the socket. */
  | { kind: 'hang' }
  /** Answers after `ms`. */
  | { kind: 'delay'; ms: number }
  /** TCP reset, no answer. */
  | { kind: 'reset' };

export interface FaultScope {
  /** The next `times` matching requests (default all). */
  times?: number;
  /** Only requests calling this method (a batch if any element does; `rpc-error` hits those). */
  method?: string;
}

/** What goes wrong, and for which requests. */
export type Fault = FaultKind & FaultScope;

/** A JSON-RPC answer cut off halfway. */
export const GARBAGE_BODY = '{"jsonrpc":"2.0","result":{"context":{"slot":';

/** Ordered faults: the first match applies and its `times` drops; at zero it is removed. */
export class FaultQueue {
  #entries: Array<{ fault: Fault; remaining: number }> = [];

  /**
   * Replaces the list.
   * @throws TypeError on a bad `times`, `status`, `ms` or `retryAfterSeconds`.
   */
  set(faults: readonly Fault[]): void {
    for (const fault of faults) checkFault(fault);
    this.#entries = faults.map((fault) => ({ fault, remaining: fault.times ?? Infinity }));
  }

  /** Faults still armed. */
  get size(): number {
    return this.#entries.length;
  }

  /** The first fault matching a request calling `methods` (one per batch element, '' if none). */
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
