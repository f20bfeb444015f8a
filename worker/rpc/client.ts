import { setTimeout as sleep } from 'node:timers/promises';
import pRetry from 'p-retry';
import type { Metrics, RpcOutcome } from '../../src/core/metrics.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import { CreditMeter } from './credits.js';
import { RpcCallError } from './envelope.js';
import { postJson, TransportError, type Agents, type HttpReply } from './transport.js';

export { RpcCallError };

/** Provider credits per method, `*` for the rest (`RPC_CREDITS`; default in src/core/config.ts). */
export type CostTable = { readonly [method: string]: number };

/** Credits of one call: `costs[method]`, else `*`, else 1 (the one place this fallback lives). */
export function costOf(costs: CostTable, method: string): number {
  return costs[method] ?? costs['*'] ?? 1;
}

/** What the websocket is billed by: per connection opened, per 10^6 bytes received. */
export type WsUnit = 'wsConnection' | 'wsMegabyte';

/**
 * Credits of one websocket unit: `costs[unit]`, else 0. Not `*`, which prices JSON-RPC calls:
 * a table that leaves the websocket out bills it nothing.
 */
export function wsCostOf(costs: CostTable, unit: WsUnit): number {
  return costs[unit] ?? 0;
}

/**
 * Longest `Retry-After` slept through in place, holding a worker slot; longer ones end the call
 * (with `retryAfterMs`) and the job's back-off waits instead, freeing the slot.
 */
const MAX_RETRY_AFTER_IN_PLACE_MS = 5_000;

/** Options of {@link RpcClient}. */
export type RpcClientOptions = {
  metrics: Metrics;
  agents: Agents;
  /** Per round trip, ms (`RPC_TIMEOUT_MS`). */
  timeoutMs: number;
  /** Retries after the first attempt (`RPC_RETRIES`). */
  retries: number;
  maxResponseBytes: number;
  /** The endpoint may reach private addresses (configured, allowlisted). */
  isTrusted: (endpoint: RpcEndpoint) => boolean;
  /** `RPC_CREDITS`. */
  costs: CostTable;
  /** Counts credits, reserving against `RPC_CREDITS_PER_DAY`; absent: the metric only. */
  credits?: CreditMeter;
  /** First back-off, ms; doubles per retry, randomised. */
  minBackoffMs?: number;
};

/** The call a {@link ReplyDecoder} decodes for. */
export type ReplyContext = { method: string; id: number; signal?: AbortSignal };

/**
 * Turns a 200 body into the result, inside the attempt: a thrown RpcCallError is that round
 * trip's outcome (retried if retryable); anything else is `http_error` and final. Owns `body`.
 */
export type ReplyDecoder<T> = (body: Buffer, context: ReplyContext) => T | Promise<T>;

/** Options of one {@link RpcClient.call}. */
export type RpcCallOptions<T> = {
  signal?: AbortSignal;
  /** A decode thread's (../sns/decode-thread.ts): no reply is parsed on the main thread. */
  decode: ReplyDecoder<T>;
};

/**
 * The one client of every JSON-RPC call: time-outs, retries with jittered back-off (p-retry),
 * `Retry-After`, and cost metrics counted once per HTTP round trip.
 */
export class RpcClient {
  private nextId = 1;
  private readonly costs: CostTable;
  private readonly credits: CreditMeter;

  constructor(private readonly opts: RpcClientOptions) {
    this.costs = opts.costs;
    this.credits = opts.credits ?? new CreditMeter({ metrics: opts.metrics });
  }

  /**
   * Calls `method` (JSON-RPC 2.0 over POST) and returns what `decode` makes of the body.
   *
   * @throws RpcCallError when retries are spent, the failure is not retryable, or `Retry-After`
   *   exceeds {@link MAX_RETRY_AFTER_IN_PLACE_MS} (`retryAfterMs` set).
   * @throws CreditBudgetRefusal when the configured endpoint's day budget cannot take it.
   */
  async call<T>(
    endpoint: RpcEndpoint,
    method: string,
    params: unknown[],
    { signal, decode }: RpcCallOptions<T>,
  ): Promise<T> {
    const labels = { method, endpoint: endpoint.kind };
    const inPlace = (error: unknown): error is RpcCallError =>
      error instanceof RpcCallError &&
      error.retryable &&
      (error.retryAfterMs ?? 0) <= MAX_RETRY_AFTER_IN_PLACE_MS;
    return pRetry(() => this.once<T>(endpoint, method, params, decode, signal), {
      retries: this.opts.retries,
      factor: 2,
      minTimeout: this.opts.minBackoffMs ?? 200,
      maxTimeout: 5_000,
      randomize: true,
      signal,
      shouldRetry: ({ error }) => inPlace(error),
      onFailedAttempt: async ({ error, retriesLeft }) => {
        if (!inPlace(error) || retriesLeft === 0) return;
        this.opts.metrics.rpcRetries.inc(labels);
        if (error.retryAfterMs) await sleep(error.retryAfterMs, undefined, { signal });
      },
    });
  }

  private async once<T>(
    endpoint: RpcEndpoint,
    method: string,
    params: unknown[],
    decode: ReplyDecoder<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const { metrics } = this.opts;
    const labels = { method, endpoint: endpoint.kind };
    const url = new URL(endpoint.url);
    const cost = costOf(this.costs, method);
    // Before the round trip: a call the budget cannot take is never made.
    const reserved =
      endpoint.kind === 'default' ? await this.credits.reserve(method, cost) : undefined;
    let spent = false;
    const id = this.nextId++;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method, params });
    const stopTimer = metrics.rpcDuration.startTimer(labels);
    let outcome: RpcOutcome = 'ok';
    try {
      let reply: HttpReply;
      try {
        reply = await postJson(url, body, {
          agent: this.opts.agents.pick(url, this.opts.isTrusted(endpoint)),
          timeoutMs: this.opts.timeoutMs,
          maxBytes: this.opts.maxResponseBytes,
          signal,
        });
      } catch (err) {
        const timeout = err instanceof TransportError && err.kind === 'timeout';
        const tooLarge = err instanceof TransportError && err.kind === 'too_large';
        // Sent and then cut short: the provider served it (too large) or most likely did (no
        // answer in time), and bills it; given back, a parent whose scan always runs past a
        // bound would spend credits the budget never saw.
        if (timeout || tooLarge) {
          spent = true;
          this.credits.spend(method, endpoint.kind, cost, reserved);
        }
        throw new RpcCallError(
          `${method}: ${(err as Error).message}`,
          timeout ? 'timeout' : 'http_error',
          !tooLarge && !signal?.aborted,
          undefined,
          { cause: err, final: tooLarge },
        );
      }
      metrics.rpcResponseBytes.inc(labels, reply.body.length);
      if (reply.status !== 429) {
        spent = true;
        this.credits.spend(method, endpoint.kind, cost, reserved);
      }
      checkStatus(method, reply);
      return await decode(reply.body, { method, id, signal });
    } catch (err) {
      outcome = err instanceof RpcCallError ? err.outcome : 'http_error';
      throw err;
    } finally {
      if (!spent) this.credits.release(reserved);
      stopTimer();
      metrics.rpcRequests.inc({ ...labels, outcome });
    }
  }
}

/** Non-200: retryable for 408, 429 and 5xx but 501. */
function checkStatus(method: string, reply: HttpReply): void {
  if (reply.status === 200) return;
  const retryable =
    reply.status === 408 || reply.status === 429 || (reply.status >= 500 && reply.status !== 501);
  throw new RpcCallError(
    `${method}: HTTP ${reply.status}`,
    'http_error',
    retryable,
    parseRetryAfter(reply.headers['retry-after']),
  );
}

/** `Retry-After` (RFC 9110 §10.2.3: seconds or HTTP-date) in ms. */
export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
