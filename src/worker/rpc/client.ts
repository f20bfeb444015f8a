import { setTimeout as sleep } from 'node:timers/promises';
import pRetry from 'p-retry';
import type { Metrics, RpcOutcome } from '../../core/metrics.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import { CreditMeter } from './credits.js';
import { RpcCallError } from './envelope.js';
import { postJson, TransportError, type Agents, type HttpReply } from './transport.js';

export { RpcCallError };

/**
 * Provider cost units per method, `*` for the others: `RPC_CREDITS`, parsed by src/core/config.ts,
 * which holds the one default (as Helius bills).
 */
export type CostTable = { readonly [method: string]: number };

/**
 * The provider cost units of one call of `method`: its entry in `costs`, else the `*` entry, else
 * 1 (a table without `*` still counts every call). The one place this fallback is written.
 */
export function costOf(costs: CostTable, method: string): number {
  return costs[method] ?? costs['*'] ?? 1;
}

/**
 * Longest `Retry-After` a call sleeps through in place, holding its worker slot. A longer one
 * ends the call with the error (its `retryAfterMs` set): the slot goes back to the queue and the
 * job's back-off waits instead (src/core/queue/refresh-queue.ts), so an upstream answering
 * `Retry-After: 30` cannot hold the worker's slots.
 */
export const MAX_RETRY_AFTER_IN_PLACE_MS = 5_000;

export type RpcClientOptions = {
  metrics: Metrics;
  agents: Agents;
  /** Per round trip, in milliseconds (`RPC_TIMEOUT_MS`). */
  timeoutMs: number;
  /** Retries after the first attempt for transient failures (`RPC_RETRIES`). */
  retries: number;
  maxResponseBytes: number;
  /** Whether an endpoint may reach private addresses (the configured one, allowlisted origins). */
  isTrusted: (endpoint: RpcEndpoint) => boolean;
  /** `RPC_CREDITS`: what each round trip adds to `sns_rpc_credits_total`. */
  costs: CostTable;
  /**
   * Where each round trip's credits are counted (and reserved against `RPC_CREDITS_PER_DAY`); a
   * meter counting the metric only when absent.
   */
  credits?: CreditMeter;
  /** First back-off delay in milliseconds; doubles per retry, randomised (p-retry). */
  minBackoffMs?: number;
};

/** What a {@link ReplyDecoder} knows of the call whose reply it decodes. */
export type ReplyContext = { method: string; id: number; signal?: AbortSignal };

/**
 * Turns the body of an HTTP 200 reply into the call's result, inside the attempt: an RpcCallError
 * it throws is that round trip's outcome and is retried when retryable (any other error counts as
 * `http_error` and ends the call). It owns `body` (it may transfer its memory to a thread).
 */
export type ReplyDecoder<T> = (body: Buffer, context: ReplyContext) => T | Promise<T>;

export type RpcCallOptions<T> = {
  signal?: AbortSignal;
  /**
   * Turns the reply body into the result. Always a decode thread's (../sns/decode-thread.ts):
   * no reply is parsed on the calling thread.
   */
  decode: ReplyDecoder<T>;
};

/**
 * The one client every Solana JSON-RPC call goes through: time-outs, retries with exponential
 * back-off and jitter (p-retry), `Retry-After` on 429, and the cost metrics (docs/observability.md) counted
 * once per HTTP round trip, where the call is made.
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
   * Calls `method` with `params` (JSON-RPC 2.0 over HTTP POST) and returns what `decode` makes
   * of the reply body.
   *
   * @throws RpcCallError once retries are spent, for a failure that cannot succeed on retry, or
   *   for a `Retry-After` past {@link MAX_RETRY_AFTER_IN_PLACE_MS} (then `retryAfterMs` says how
   *   long the upstream asked for).
   * @throws CreditBudgetRefusal (./credits.ts) when a round trip to the configured endpoint would
   *   spend past `RPC_CREDITS_PER_DAY`: not made, not retried.
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
    // Before the round trip, so a call the day's budget cannot take is never made.
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

/** Refuses a reply whose HTTP status is not 200: retryable for 408, 429 and 5xx other than 501. */
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

/** `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in milliseconds. */
export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
