import { setTimeout as sleep } from 'node:timers/promises';
import pRetry from 'p-retry';
import type { Metrics, RpcOutcome } from '../metrics/metrics.js';
import type { RpcEndpoint } from './endpoint.js';
import { postJson, TransportError, type Agents, type HttpReply } from './transport.js';

/**
 * One failed JSON-RPC call, classified for metrics (`outcome`) and for retrying. The message may
 * quote the upstream; it is for logs only, never for a response body.
 */
export class RpcCallError extends Error {
  override readonly name = 'RpcCallError';
  constructor(
    message: string,
    readonly outcome: Exclude<RpcOutcome, 'ok'>,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Provider cost units per method (DESIGN.md: `getProgramAccounts` 10, others 1, as Helius bills). */
export type CostTable = { readonly [method: string]: number };
export const DEFAULT_COSTS: CostTable = Object.freeze({ getProgramAccounts: 10, '*': 1 });

/**
 * JSON-RPC error codes that say "try again" rather than "this cannot succeed": node behind or
 * unhealthy (-32005), block or slot not yet available (-32004, -32016), internal error (-32603),
 * and the rate-limit codes some providers use instead of HTTP 429.
 */
const RETRYABLE_RPC_CODES = new Set([-32005, -32004, -32016, -32603, 429, -32429]);

/** Longest `Retry-After` honoured, so an upstream cannot park a job for hours. */
const MAX_RETRY_AFTER_MS = 30_000;

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
  costs?: CostTable;
  /** First back-off delay in milliseconds; doubles per retry, randomised (p-retry). */
  minBackoffMs?: number;
};

/**
 * The one client every Solana JSON-RPC call goes through: time-outs, retries with exponential
 * back-off and jitter (p-retry), `Retry-After` on 429, and the cost metrics of DESIGN.md counted
 * once per HTTP round trip, where the call is made.
 */
export class RpcClient {
  private nextId = 1;
  private readonly costs: CostTable;

  constructor(private readonly opts: RpcClientOptions) {
    this.costs = opts.costs ?? DEFAULT_COSTS;
  }

  /**
   * Calls `method` with `params` (JSON-RPC 2.0 over HTTP POST) and returns its `result`.
   *
   * @throws RpcCallError once retries are spent or for a failure that cannot succeed on retry.
   */
  async call<T>(
    endpoint: RpcEndpoint,
    method: string,
    params: unknown[],
    signal?: AbortSignal,
  ): Promise<T> {
    const labels = { method, endpoint: endpoint.kind };
    return pRetry(() => this.once<T>(endpoint, method, params, signal), {
      retries: this.opts.retries,
      factor: 2,
      minTimeout: this.opts.minBackoffMs ?? 200,
      maxTimeout: 5_000,
      randomize: true,
      signal,
      shouldRetry: ({ error }) => error instanceof RpcCallError && error.retryable,
      onFailedAttempt: async ({ error, retriesLeft }) => {
        if (!(error instanceof RpcCallError) || !error.retryable || retriesLeft === 0) return;
        this.opts.metrics.rpcRetries.inc(labels);
        if (error.retryAfterMs)
          await sleep(Math.min(error.retryAfterMs, MAX_RETRY_AFTER_MS), undefined, { signal });
      },
    });
  }

  private async once<T>(
    endpoint: RpcEndpoint,
    method: string,
    params: unknown[],
    signal?: AbortSignal,
  ): Promise<T> {
    const { metrics } = this.opts;
    const labels = { method, endpoint: endpoint.kind };
    const url = new URL(endpoint.url);
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
          { cause: err },
        );
      }
      metrics.rpcResponseBytes.inc(labels, reply.body.length);
      if (reply.status !== 429)
        metrics.rpcCredits.inc(labels, this.costs[method] ?? this.costs['*'] ?? 1);
      return parseReply<T>(method, reply, id);
    } catch (err) {
      outcome = err instanceof RpcCallError ? err.outcome : 'http_error';
      throw err;
    } finally {
      stopTimer();
      metrics.rpcRequests.inc({ ...labels, outcome });
    }
  }
}

function parseReply<T>(method: string, reply: HttpReply, id: number): T {
  if (reply.status !== 200) {
    const retryable =
      reply.status === 408 || reply.status === 429 || (reply.status >= 500 && reply.status !== 501);
    throw new RpcCallError(
      `${method}: HTTP ${reply.status}`,
      'http_error',
      retryable,
      parseRetryAfter(reply.headers['retry-after']),
    );
  }
  let payload: unknown;
  try {
    payload = JSON.parse(reply.body.toString('utf8'));
  } catch {
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
      'rpc_error',
      RETRYABLE_RPC_CODES.has(code),
    );
  }
  if (!('result' in msg) || msg.id !== id) {
    throw new RpcCallError(`${method}: reply has no result for id ${id}`, 'http_error', true);
  }
  return msg.result as T;
}

/** `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in milliseconds. */
export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
