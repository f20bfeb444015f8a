import { setTimeout as sleep } from 'node:timers/promises';
import type { Registry } from 'prom-client';
import { Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
import type { RefusalReason } from './errors.js';

/** Which endpoint a call went to; never the URL itself (docs/observability.md, "The metrics"). */
export type EndpointLabel = 'default' | 'override';
/**
 * How one RPC round trip ended; `behind` is -32016 (the node has not reached the `minContextSlot`
 * asked for): retried with back-off, a lagging node rather than a failure.
 */
export type RpcOutcome = 'ok' | 'behind' | 'rpc_error' | 'http_error' | 'timeout';
export type QueueState = 'waiting' | 'active' | 'delayed' | 'failed';
/** How a subdomain cache lookup went (`SubdomainLookup`'s `HIT`, `STALE`, `MISS`). */
export type CacheLookupResult = 'hit' | 'stale' | 'miss';

// The `outcome` values of the counters below, written here once and used at every call site:
// prom-client types a label value as any string, so a literal at a call site would go unchecked.
// The values are the contract of docs/observability.md's table (test/metrics.test.ts holds them).

/** `sns_refresh_jobs_total{outcome}`: `retried` = BullMQ tries again, `failed` = attempts spent. */
export const REFRESH_OUTCOME = Object.freeze({
  completed: 'completed',
  failed: 'failed',
  retried: 'retried',
} as const);
/**
 * `sns_refresh_events_lost_total{stage}`: `publish` = a worker's publish of an entry's change
 * failed after its retries; `receive` = an API process found it received fewer events than were
 * counted, and dropped its in-process copy.
 */
export const REFRESH_EVENT_LOSS = Object.freeze({
  publish: 'publish',
  receive: 'receive',
} as const);
/** `sns_ws_notifications_total{outcome}`: what one notification did. */
export const WS_NOTIFICATION_OUTCOME = Object.freeze({
  patched: 'patched',
  reread: 'reread',
  ignored: 'ignored',
  refused: 'refused',
  coalesced: 'coalesced',
} as const);
export type WsNotificationOutcome =
  (typeof WS_NOTIFICATION_OUTCOME)[keyof typeof WS_NOTIFICATION_OUTCOME];
/** `sns_deletion_checks_total{outcome}`: what one check of a watched parent did. */
export const DELETION_CHECK_OUTCOME = Object.freeze({
  unchanged: 'unchanged',
  dropped: 'dropped',
  owner: 'owner',
  scanned: 'scanned',
} as const);

/** `sns_http_refusals_total{reason}`: every reason a 429 or 503 refusal carries. */
export const REFUSAL_REASONS: readonly RefusalReason[] = Object.freeze([
  'cold_miss_limit',
  'client_share',
  'stream_limit',
  'budget',
  'overloaded',
  'unavailable',
  'shutting_down',
]);

/** What `sns_rpc_budget_spent_credits` and `sns_rpc_budget_state` read at scrape time. */
export type BudgetSource = () => Promise<{ spent: number; state: number }>;

/**
 * Every metric of docs/observability.md's table, registered on one registry. One instance per
 * process: with `ROLE=all` the API and the worker share it, so nothing is registered twice.
 */
export type Metrics = ReturnType<typeof createMetrics>;

/** Reads the refresh queue's job counts by state (BullMQ's `getJobCounts`). */
export type QueueCountsSource = () => Promise<Partial<Record<QueueState, number>>>;
const QUEUE_STATES: readonly QueueState[] = ['waiting', 'active', 'delayed', 'failed'];
export const QUEUE_SCRAPE_TIMEOUT_MS = 500;
/** Whether Redis answers this process now (the readiness probe, at most one write a second). */
export type RedisUpSource = () => Promise<boolean>;

const RPC_LABELS = ['method', 'endpoint'] as const;

/**
 * Creates the metrics on `registry` and, unless told not to, prom-client's default process
 * metrics. The names, types and labels are the contract with the dashboard (docs/observability.md).
 *
 * @param registry a fresh registry; registering twice on one registry throws.
 */
export function createMetrics(registry: Registry, opts: { defaultMetrics?: boolean } = {}) {
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let queueCounts: QueueCountsSource | undefined;
  let budgetSource: BudgetSource | undefined;
  // One read of the budget per scrape, shared by its two gauges' collects.
  let budgetRead: Promise<{ spent: number; state: number } | undefined> | undefined;
  const readBudget = () =>
    (budgetRead ??= Promise.race([
      budgetSource?.().catch(() => undefined),
      sleep(QUEUE_SCRAPE_TIMEOUT_MS, undefined, { ref: false }),
    ]).finally(() => (budgetRead = undefined)));
  let redisProbe: RedisUpSource | undefined;
  let pendingHits = 0;
  const cacheLookups = new Counter({
    name: 'sns_cache_lookups_total',
    help: 'Subdomain cache lookups by result.',
    labelNames: ['result'] as const,
    registers,
    collect() {
      if (pendingHits === 0) return;
      this.inc({ result: 'hit' }, pendingHits);
      pendingHits = 0;
    },
  });
  const metrics = {
    /**
     * Counts one subdomain cache lookup in `sns_cache_lookups_total{result}`: the only way to
     * count one. Hits are the hot path: they are added up in a number and handed to the counter
     * when the registry is read (its `collect`), instead of prom-client hashing the label set on
     * every request.
     */
    countCacheLookup(result: CacheLookupResult) {
      if (result === 'hit') pendingHits++;
      else cacheLookups.inc({ result });
    },
    /**
     * Sets where `sns_queue_jobs` reads its counts at scrape time. A read slower than
     * {@link QUEUE_SCRAPE_TIMEOUT_MS} keeps the last values, so a slow Redis never blocks a scrape.
     */
    setQueueCountsSource(source: QueueCountsSource | undefined) {
      queueCounts = source;
    },
    /**
     * Sets where `sns_rpc_budget_spent_credits` and `sns_rpc_budget_state` read at scrape time
     * (src/core/rpc/budget.ts). A read slower than {@link QUEUE_SCRAPE_TIMEOUT_MS} keeps the last
     * values.
     */
    setBudgetSource(source: BudgetSource | undefined) {
      budgetSource = source;
    },
    /**
     * Sets what `sns_redis_up` reads at scrape time (the readiness probe's `redis` part). A probe
     * slower than {@link QUEUE_SCRAPE_TIMEOUT_MS} reads as 0: a stalled Redis is not answering.
     */
    setRedisUpSource(source: RedisUpSource | undefined) {
      redisProbe = source;
    },
    registry,
    rpcRequests: new Counter({
      name: 'sns_rpc_requests_total',
      help: 'Solana JSON-RPC HTTP round trips, by method, endpoint and outcome.',
      labelNames: [...RPC_LABELS, 'outcome'] as const,
      registers,
    }),
    rpcDuration: new Histogram({
      name: 'sns_rpc_request_duration_seconds',
      help: 'Duration of one Solana JSON-RPC HTTP round trip.',
      labelNames: RPC_LABELS,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    rpcResponseBytes: new Counter({
      name: 'sns_rpc_response_bytes_total',
      help: 'Bytes received in Solana JSON-RPC response bodies.',
      labelNames: RPC_LABELS,
      registers,
    }),
    rpcCredits: new Counter({
      name: 'sns_rpc_credits_total',
      help: 'Provider cost units spent, from the configured cost table (RPC_CREDITS).',
      labelNames: RPC_LABELS,
      registers,
    }),
    rpcBudget: new Gauge({
      name: 'sns_rpc_budget_credits',
      help: 'The daily credit budget of the configured endpoint (RPC_CREDITS_PER_DAY); 0 when unset.',
      registers,
    }),
    rpcBudgetSpent: new Gauge({
      name: 'sns_rpc_budget_spent_credits',
      help: 'Credits the configured endpoint spent this UTC day, over all replicas (read from Redis).',
      registers,
      async collect() {
        const read = budgetSource ? await readBudget() : undefined;
        if (read) this.set(read.spent);
      },
    }),
    rpcBudgetState: new Gauge({
      name: 'sns_rpc_budget_state',
      help: 'The credit budget state: 0 normal, 1 stretched (freshness stretched, no refresh ahead), 2 exhausted (no new refresh).',
      registers,
      async collect() {
        const read = budgetSource ? await readBudget() : undefined;
        if (read) this.set(read.state);
      },
    }),
    rpcRetries: new Counter({
      name: 'sns_rpc_retries_total',
      help: 'Solana JSON-RPC calls retried after a transient failure.',
      labelNames: RPC_LABELS,
      registers,
    }),
    refreshJobs: new Counter({
      name: 'sns_refresh_jobs_total',
      help: 'Subdomain refresh job attempts by outcome.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    refreshDuration: new Histogram({
      name: 'sns_refresh_duration_seconds',
      help: 'Duration of one subdomain refresh (RPC calls and derivations).',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    queueJobs: new Gauge({
      name: 'sns_queue_jobs',
      help: 'Refresh jobs in the queue by state, read from BullMQ at scrape time.',
      labelNames: ['state'] as const,
      registers,
      async collect() {
        if (!queueCounts) return;
        const counts = await Promise.race([
          queueCounts().catch(() => undefined),
          sleep(QUEUE_SCRAPE_TIMEOUT_MS, undefined, { ref: false }),
        ]);
        if (!counts) return;
        for (const state of QUEUE_STATES) this.set({ state }, counts[state] ?? 0);
      },
    }),
    redisUp: new Gauge({
      name: 'sns_redis_up',
      help: 'Whether Redis answers this process (1) or not (0), probed at scrape time.',
      registers,
      async collect() {
        if (!redisProbe) return;
        const up = await Promise.race([
          redisProbe().catch(() => false),
          sleep(QUEUE_SCRAPE_TIMEOUT_MS, false, { ref: false }),
        ]);
        this.set(up ? 1 : 0);
      },
    }),
    wsConnected: new Gauge({
      name: 'sns_ws_connected',
      help: 'Whether the worker holds an open websocket to the RPC (1) or not (0).',
      registers,
    }),
    wsReconnects: new Counter({
      name: 'sns_ws_reconnects_total',
      help: 'Websocket connections opened again after a drop, a silent socket or a refusal.',
      registers,
    }),
    wsSubscriptions: new Gauge({
      name: 'sns_ws_subscriptions',
      help: 'programSubscribe subscriptions open, one per watched parent.',
      registers,
    }),
    wsReceivedBytes: new Counter({
      name: 'sns_ws_received_bytes_total',
      help: 'Bytes of websocket messages received from the RPC (what providers bill).',
      registers,
    }),
    wsNotifications: new Counter({
      name: 'sns_ws_notifications_total',
      help: 'programSubscribe notifications by outcome: patched, reread, ignored, refused or coalesced.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    refreshEventsLost: new Counter({
      name: 'sns_refresh_events_lost_total',
      help: 'Refresh events lost: a publish that failed after its retries (publish), or a loss an API process noticed and made good by dropping its in-process copy (receive).',
      labelNames: ['stage'] as const,
      registers,
    }),
    deletionChecks: new Counter({
      name: 'sns_deletion_checks_total',
      help: 'Watched parents checked for closed accounts and owners, by outcome: unchanged, dropped, owner (an owner put right) or scanned.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    followHealthy: new Gauge({
      name: 'sns_follow_healthy',
      help: 'Whether this worker owns the follow stream and it vouches for cached entries (1) or not (0).',
      registers,
    }),
    followLastEvent: new Gauge({
      name: 'sns_follow_last_event_timestamp_seconds',
      help: 'Unix time of the last notification the follow stream delivered to this worker.',
      registers,
    }),
    registryState: new Gauge({
      name: 'sns_registry_state',
      help: 'The registry index as this process sees it: 0 off or none, 1 building, 2 complete and served, 3 complete but not served (stream not followed whole), 4 behind (a rebuild is due).',
      registers,
    }),
    registryShardsDone: new Gauge({
      name: 'sns_registry_shards_done',
      help: 'Bootstrap pieces of the registry index build under way that are done.',
      registers,
    }),
    registryAuditMismatches: new Counter({
      name: 'sns_registry_audit_mismatches_total',
      help: 'Subdomains the registry audit found differing from getProgramAccounts (each repaired).',
      registers,
    }),
    registryAudits: new Counter({
      name: 'sns_registry_audited_parents_total',
      help: 'Parents the registry audit read with getProgramAccounts and compared with the index.',
      registers,
    }),
    watchedParents: new Gauge({
      name: 'sns_watched_parents',
      help: 'Parents this worker holds the watch lease of.',
      registers,
    }),
    httpRefusals: new Counter({
      name: 'sns_http_refusals_total',
      help: 'Requests refused with 429 or 503 by reason: cold_miss_limit, client_share, stream_limit, budget, overloaded, unavailable, shutting_down.',
      labelNames: ['reason'] as const,
      registers,
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers,
    }),
  };
  // Every outcome from the start, at 0: a series appears before its first event, so the
  // dashboard's rates and Prometheus' alerts see the 0 rather than nothing.
  const { patched, reread, ignored } = WS_NOTIFICATION_OUTCOME;
  for (const outcome of [patched, reread, ignored]) metrics.wsNotifications.inc({ outcome }, 0);
  for (const outcome of Object.values(DELETION_CHECK_OUTCOME)) {
    metrics.deletionChecks.inc({ outcome }, 0);
  }
  for (const reason of REFUSAL_REASONS) metrics.httpRefusals.inc({ reason }, 0);
  for (const stage of Object.values(REFRESH_EVENT_LOSS))
    metrics.refreshEventsLost.inc({ stage }, 0);
  return metrics;
}

/** One PromQL query of a dashboard panel, and its series' legend (`{{label}}` names a label). */
export type PanelQuery = { expr: string; legend: string };

/**
 * A dashboard panel of the metrics above, as data, so a metric and its panel are one file:
 * grafana/dashboard.ts puts it in its `row`, in the order listed here, and grafana/panels.ts draws
 * it (the fields are described there). `npm run dashboard` writes the JSON.
 */
export type MetricPanel = {
  row:
    | 'HTTP API'
    | 'Subdomain cache'
    | 'Solana RPC spend'
    | 'Refresh worker and queue'
    | 'Following the chain'
    | 'Processes';
  /** Grafana's panel id, never reused: one above the highest of the dashboard. */
  id: number;
  title: string;
  description: string;
  unit: string;
  width: number;
  queries: PanelQuery[];
} & ({ kind: 'timeseries'; min?: number; stacked?: boolean } | { kind: 'stat'; decimals: number });

/** A histogram's p50, p95 and p99, by `by`, as panel queries. */
export function quantiles(histogram: string, by: string[]): PanelQuery[] {
  const labels = ['le', ...by].join(', ');
  const legend = by.map((l) => ` {{${l}}}`).join('');
  return [0.5, 0.95, 0.99].map((q) => ({
    expr: `histogram_quantile(${q}, sum by (${labels}) (rate(${histogram}_bucket[$__rate_interval])))`,
    legend: `p${Math.round(q * 100)}${legend}`,
  }));
}

/** The panels of the gateway's metrics, row by row (prom-client's process metrics' are in grafana/). */
export const METRIC_PANELS: readonly MetricPanel[] = [
  {
    kind: 'timeseries',
    row: 'HTTP API',
    id: 2,
    title: 'Request rate by route and status',
    description:
      'Requests per second the API answered, by route pattern (never the raw URL) and HTTP status.',
    unit: 'reqps',
    width: 12,
    queries: [
      {
        expr: 'sum by (route, status_code) (rate(http_request_duration_seconds_count[$__rate_interval]))',
        legend: '{{route}} {{status_code}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'HTTP API',
    id: 3,
    title: 'Request latency by route and status (p50 / p95 / p99)',
    description:
      'Quantiles of http_request_duration_seconds from its histogram buckets, by route pattern and status.',
    unit: 's',
    width: 12,
    queries: quantiles('http_request_duration_seconds', ['route', 'status_code']),
  },
  {
    kind: 'timeseries',
    row: 'HTTP API',
    id: 35,
    title: 'Refusals per minute by reason',
    description:
      'Requests answered 429 or 503 with Retry-After, by reason: cold_miss_limit and client_share (the client started too many refreshes, or spent its share of the day), stream_limit, budget (the day is spent), overloaded (queue full), unavailable (Redis dropped during the wait), shutting_down. Counted, never logged one line each.',
    unit: 'short',
    width: 24,
    queries: [
      {
        expr: 'sum by (reason) (rate(sns_http_refusals_total[$__rate_interval])) * 60',
        legend: '{{reason}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Subdomain cache',
    id: 5,
    title: 'Cache lookups: hit / stale / miss ratio',
    description:
      'Share of /subdomains lookups answered fresh from cache (hit), served stale while a refresh runs (stale), or waiting for a refresh (miss).',
    unit: 'percentunit',
    width: 12,
    min: 0,
    stacked: true,
    queries: [
      {
        expr: 'sum by (result) (rate(sns_cache_lookups_total[$__rate_interval])) / ignoring (result) group_left () sum(rate(sns_cache_lookups_total[$__rate_interval]))',
        legend: '{{result}}',
      },
    ],
  },
  {
    kind: 'stat',
    row: 'Subdomain cache',
    id: 6,
    title: 'Served from cache (hit + stale)',
    description:
      'Share of lookups over the selected range that needed no RPC call before answering.',
    unit: 'percentunit',
    width: 6,
    decimals: 1,
    queries: [
      {
        expr: 'sum(increase(sns_cache_lookups_total{result=~"hit|stale"}[$__range])) / sum(increase(sns_cache_lookups_total[$__range]))',
        legend: 'served from cache',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Subdomain cache',
    id: 7,
    title: 'Cache lookups per second',
    description: 'Lookups per second by result.',
    unit: 'ops',
    width: 6,
    queries: [
      {
        expr: 'sum by (result) (rate(sns_cache_lookups_total[$__rate_interval]))',
        legend: '{{result}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 9,
    title: 'RPC calls per minute by method and endpoint',
    description:
      'JSON-RPC round trips per minute (retries included), by method and endpoint (default = RPC_URL, override = ?rpc=).',
    unit: 'short',
    width: 12,
    queries: [
      {
        expr: 'sum by (method, endpoint) (rate(sns_rpc_requests_total[$__rate_interval])) * 60',
        legend: '{{method}} {{endpoint}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 10,
    title: 'RPC credits per minute by method and endpoint',
    description:
      'Provider cost units per minute from the cost table (getProgramAccounts 10, other methods 1).',
    unit: 'short',
    width: 12,
    queries: [
      {
        expr: 'sum by (method, endpoint) (rate(sns_rpc_credits_total[$__rate_interval])) * 60',
        legend: '{{method}} {{endpoint}}',
      },
    ],
  },
  {
    kind: 'stat',
    row: 'Solana RPC spend',
    id: 11,
    title: 'RPC credits in range',
    description: 'Credits spent over the selected time range, by endpoint.',
    unit: 'short',
    width: 6,
    decimals: 0,
    queries: [
      {
        expr: 'sum by (endpoint) (increase(sns_rpc_credits_total[$__range]))',
        legend: '{{endpoint}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 12,
    title: 'RPC error rate by outcome',
    description:
      'Failed JSON-RPC round trips per second (outcome != ok: rpc_error, http_error, timeout), by method and endpoint.',
    unit: 'ops',
    width: 9,
    queries: [
      {
        expr: 'sum by (method, endpoint, outcome) (rate(sns_rpc_requests_total{outcome!="ok"}[$__rate_interval]))',
        legend: '{{method}} {{endpoint}} {{outcome}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 13,
    title: 'RPC error ratio',
    description: 'Failed round trips as a share of all round trips, by endpoint.',
    unit: 'percentunit',
    width: 9,
    min: 0,
    queries: [
      {
        expr: 'sum by (endpoint) (rate(sns_rpc_requests_total{outcome!="ok"}[$__rate_interval])) / sum by (endpoint) (rate(sns_rpc_requests_total[$__rate_interval]))',
        legend: '{{endpoint}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 14,
    title: 'RPC latency by method and endpoint (p50 / p95 / p99)',
    description: 'Quantiles of one JSON-RPC round trip (sns_rpc_request_duration_seconds).',
    unit: 's',
    width: 12,
    queries: quantiles('sns_rpc_request_duration_seconds', ['method', 'endpoint']),
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 15,
    title: 'RPC retries per minute',
    description:
      'Calls retried after a transient failure (429, 5xx, time-out, reset, retryable JSON-RPC error).',
    unit: 'short',
    width: 6,
    queries: [
      {
        expr: 'sum by (method, endpoint) (rate(sns_rpc_retries_total[$__rate_interval])) * 60',
        legend: '{{method}} {{endpoint}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 16,
    title: 'RPC response bytes per second',
    description: 'Bytes received in JSON-RPC response bodies.',
    unit: 'Bps',
    width: 6,
    queries: [
      {
        expr: 'sum by (method, endpoint) (rate(sns_rpc_response_bytes_total[$__rate_interval]))',
        legend: '{{method}} {{endpoint}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Solana RPC spend',
    id: 32,
    title: 'Daily credit budget: spent today and budget',
    description:
      "Credits the configured endpoint spent this UTC day over all replicas (one counter in Redis; every process reports it, hence max), against RPC_CREDITS_PER_DAY (0: no budget). Past the pace (the day's share plus 20%, at most 80%) freshness is stretched; at the budget cold misses get 503.",
    unit: 'short',
    width: 18,
    min: 0,
    queries: [
      { expr: 'max(sns_rpc_budget_spent_credits)', legend: 'spent today' },
      { expr: 'max(sns_rpc_budget_credits)', legend: 'budget' },
    ],
  },
  {
    kind: 'stat',
    row: 'Solana RPC spend',
    id: 33,
    title: 'Budget state',
    description:
      '0 normal, 1 stretched (freshness stretched, nothing refreshed ahead), 2 exhausted (cold misses 503, no refresh).',
    unit: 'none',
    width: 6,
    decimals: 0,
    queries: [{ expr: 'max(sns_rpc_budget_state)', legend: 'state' }],
  },
  {
    kind: 'timeseries',
    row: 'Refresh worker and queue',
    id: 18,
    title: 'Refresh duration (p50 / p95 / p99)',
    description:
      'Duration of one subdomain refresh in the worker: the RPC calls and the derivations.',
    unit: 's',
    width: 8,
    queries: quantiles('sns_refresh_duration_seconds', []),
  },
  {
    kind: 'timeseries',
    row: 'Refresh worker and queue',
    id: 19,
    title: 'Refresh jobs per minute by outcome',
    description:
      'Refresh job attempts: completed, retried (an attempt failed and BullMQ will try again), failed (attempts spent).',
    unit: 'short',
    width: 8,
    queries: [
      {
        expr: 'sum by (outcome) (rate(sns_refresh_jobs_total[$__rate_interval])) * 60',
        legend: '{{outcome}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Refresh worker and queue',
    id: 20,
    title: 'Queue depth by state',
    description:
      'Refresh jobs in the BullMQ queue by state. Every API and worker process reports the same queue, so the panel takes the max across them.',
    unit: 'short',
    width: 8,
    min: 0,
    queries: [{ expr: 'max by (state) (sns_queue_jobs)', legend: '{{state}}' }],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 26,
    title: 'Follow stream and followed parents',
    description:
      'The follow stream (one websocket, owned by one worker): open websockets, its subscriptions (a whole-program programSubscribe and a logsSubscribe), parents followed, whether it vouches for cached entries (1) and seconds since it last delivered anything. Without a websocket (RPC_WS=off, a provider without one) all stay 0 and entries are refreshed by the clock.',
    unit: 'short',
    width: 8,
    queries: [
      { expr: 'sum(sns_ws_connected)', legend: 'websockets open' },
      { expr: 'sum(sns_ws_subscriptions)', legend: 'subscriptions' },
      { expr: 'sum(sns_watched_parents)', legend: 'followed parents' },
      { expr: 'max(sns_follow_healthy)', legend: 'stream vouching' },
      {
        expr: 'time() - max(sns_follow_last_event_timestamp_seconds)',
        legend: 'seconds since the last stream event',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 27,
    title: 'Notifications per minute by outcome',
    description:
      'programSubscribe notifications: patched into the entry (a new subdomain proven by its reverse record), re-read at their slot, or ignored; and refresh events lost (a failed publish, or a loss an API process noticed).',
    unit: 'short',
    width: 8,
    queries: [
      {
        expr: 'sum by (outcome) (rate(sns_ws_notifications_total[$__rate_interval])) * 60',
        legend: '{{outcome}}',
      },
      {
        expr: 'sum by (stage) (rate(sns_refresh_events_lost_total[$__rate_interval])) * 60',
        legend: 'refresh events lost: {{stage}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 28,
    title: 'Deletion checks per minute by outcome',
    description:
      'Watched parents checked for closed accounts with getMultipleAccounts (no data): unchanged, labels dropped, or scanned (a check would have cost more than a scan).',
    unit: 'short',
    width: 8,
    queries: [
      {
        expr: 'sum by (outcome) (rate(sns_deletion_checks_total[$__rate_interval])) * 60',
        legend: '{{outcome}}',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 36,
    title: 'Registry index',
    description:
      'SUBDOMAIN_INDEX=registry: the index state (0 none, 1 building, 2 serving every parent, 3 built but the stream not followed whole, 4 behind: a rebuild is due), bootstrap pieces done (of 256), and per minute the parents audited and the subdomains the audit found differing from getProgramAccounts (each repaired).',
    unit: 'short',
    width: 8,
    queries: [
      { expr: 'max(sns_registry_state)', legend: 'state' },
      { expr: 'max(sns_registry_shards_done)', legend: 'pieces done' },
      {
        expr: 'sum(rate(sns_registry_audited_parents_total[$__rate_interval])) * 60',
        legend: 'parents audited',
      },
      {
        expr: 'sum(rate(sns_registry_audit_mismatches_total[$__rate_interval])) * 60',
        legend: 'audit mismatches',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 29,
    title: 'Websocket reconnects per minute',
    description:
      'Websockets opened again after a drop, a silent socket or a refused upgrade. After each, every watched parent is read again (a getProgramAccounts each).',
    unit: 'short',
    width: 8,
    queries: [
      {
        expr: 'sum(rate(sns_ws_reconnects_total[$__rate_interval])) * 60',
        legend: 'reconnects',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 30,
    title: 'Websocket bytes received per second',
    description:
      'What the provider bills for the websocket (Helius: 2 credits per 0.1 MB), counted in sns_rpc_credits_total as wsMegabyte.',
    unit: 'Bps',
    width: 8,
    queries: [
      { expr: 'sum(rate(sns_ws_received_bytes_total[$__rate_interval]))', legend: 'received' },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Following the chain',
    id: 31,
    title: 'RPC credits per watched parent per minute',
    description:
      'All credits spent on the configured endpoint over the parents followed on chain: what following a parent costs on a quiet chain, and how it grows with changes.',
    unit: 'short',
    width: 8,
    queries: [
      {
        expr: 'sum(rate(sns_rpc_credits_total{endpoint="default"}[$__rate_interval])) * 60 / clamp_min(sum(sns_watched_parents), 1)',
        legend: 'credits per parent',
      },
    ],
  },
  {
    kind: 'timeseries',
    row: 'Processes',
    id: 34,
    title: 'Redis answering by process',
    description:
      "sns_redis_up: 1 while Redis answers the process's readiness probe (a small write), 0 while it does not (the process is then not ready, and the SnsRedisUnreachable alert fires after a minute).",
    unit: 'short',
    width: 6,
    queries: [
      {
        expr: 'min by (job, instance) (sns_redis_up)',
        legend: '{{job}} {{instance}}',
      },
    ],
  },
];
