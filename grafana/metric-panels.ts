/**
 * The dashboard panels of the gateway's metrics, as data: grafana/dashboard.ts puts each in its
 * `row`, in the order listed here, and grafana/panels.ts draws it (the fields are described
 * there). Every query names its metrics by `METRIC` (src/core/metrics.ts). `npm run dashboard`
 * writes the JSON.
 */
import { METRIC } from '../src/core/metrics.js';

/** One PromQL query of a dashboard panel, and its series' legend (`{{label}}` names a label). */
export type PanelQuery = { expr: string; legend: string };

/** A dashboard panel of the gateway's metrics, as data. */
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
        expr: `sum by (route, status_code) (rate(${METRIC.httpRequestDurationSeconds}_count[$__rate_interval]))`,
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
    queries: quantiles(METRIC.httpRequestDurationSeconds, ['route', 'status_code']),
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
        expr: `sum by (reason) (rate(${METRIC.httpRefusals}[$__rate_interval])) * 60`,
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
        expr: `sum by (result) (rate(${METRIC.cacheLookups}[$__rate_interval])) / ignoring (result) group_left () sum(rate(${METRIC.cacheLookups}[$__rate_interval]))`,
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
        expr: `sum(increase(${METRIC.cacheLookups}{result=~"hit|stale"}[$__range])) / sum(increase(${METRIC.cacheLookups}[$__range]))`,
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
        expr: `sum by (result) (rate(${METRIC.cacheLookups}[$__rate_interval]))`,
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
        expr: `sum by (method, endpoint) (rate(${METRIC.rpcRequests}[$__rate_interval])) * 60`,
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
        expr: `sum by (method, endpoint) (rate(${METRIC.rpcCredits}[$__rate_interval])) * 60`,
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
        expr: `sum by (endpoint) (increase(${METRIC.rpcCredits}[$__range]))`,
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
        expr: `sum by (method, endpoint, outcome) (rate(${METRIC.rpcRequests}{outcome!="ok"}[$__rate_interval]))`,
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
        expr: `sum by (endpoint) (rate(${METRIC.rpcRequests}{outcome!="ok"}[$__rate_interval])) / sum by (endpoint) (rate(${METRIC.rpcRequests}[$__rate_interval]))`,
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
    queries: quantiles(METRIC.rpcRequestDurationSeconds, ['method', 'endpoint']),
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
        expr: `sum by (method, endpoint) (rate(${METRIC.rpcRetries}[$__rate_interval])) * 60`,
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
        expr: `sum by (method, endpoint) (rate(${METRIC.rpcResponseBytes}[$__rate_interval]))`,
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
      { expr: `max(${METRIC.rpcBudgetSpentCredits})`, legend: 'spent today' },
      { expr: `max(${METRIC.rpcBudgetCredits})`, legend: 'budget' },
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
    queries: [{ expr: `max(${METRIC.rpcBudgetState})`, legend: 'state' }],
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
    queries: quantiles(METRIC.refreshDurationSeconds, []),
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
        expr: `sum by (outcome) (rate(${METRIC.refreshJobs}[$__rate_interval])) * 60`,
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
    queries: [{ expr: `max by (state) (${METRIC.queueJobs})`, legend: '{{state}}' }],
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
      { expr: `sum(${METRIC.wsConnected})`, legend: 'websockets open' },
      { expr: `sum(${METRIC.wsSubscriptions})`, legend: 'subscriptions' },
      { expr: `sum(${METRIC.watchedParents})`, legend: 'followed parents' },
      { expr: `max(${METRIC.followHealthy})`, legend: 'stream vouching' },
      {
        expr: `time() - max(${METRIC.followLastEventTimestampSeconds})`,
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
        expr: `sum by (outcome) (rate(${METRIC.wsNotifications}[$__rate_interval])) * 60`,
        legend: '{{outcome}}',
      },
      {
        expr: `sum by (stage) (rate(${METRIC.refreshEventsLost}[$__rate_interval])) * 60`,
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
        expr: `sum by (outcome) (rate(${METRIC.deletionChecks}[$__rate_interval])) * 60`,
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
      { expr: `max(${METRIC.registryState})`, legend: 'state' },
      { expr: `max(${METRIC.registryShardsDone})`, legend: 'pieces done' },
      {
        expr: `sum(rate(${METRIC.registryAuditedParents}[$__rate_interval])) * 60`,
        legend: 'parents audited',
      },
      {
        expr: `sum(rate(${METRIC.registryAuditMismatches}[$__rate_interval])) * 60`,
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
        expr: `sum(rate(${METRIC.wsReconnects}[$__rate_interval])) * 60`,
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
      { expr: `sum(rate(${METRIC.wsReceivedBytes}[$__rate_interval]))`, legend: 'received' },
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
        expr: `sum(rate(${METRIC.rpcCredits}{endpoint="default"}[$__rate_interval])) * 60 / clamp_min(sum(${METRIC.watchedParents}), 1)`,
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
        expr: `min by (job, instance) (${METRIC.redisUp})`,
        legend: '{{job}} {{instance}}',
      },
    ],
  },
];
