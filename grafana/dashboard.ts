/**
 * The sns-gateway dashboard as code: its rows, and in each row its panels, top to bottom and left
 * to right as Grafana shows them. `npm run dashboard` writes grafana/dashboards/sns-gateway.json
 * from this file (grafana/generate.ts); the JSON is generated, never edited by hand, and
 * test/dashboard.test.ts fails when the two differ.
 *
 * A metric's panel is one entry in its row below: `timeseries({...})` or `stat({...})` from
 * grafana/panels.ts, which hold the look every panel shares. Then run `npm run dashboard`.
 *
 * Built with `@grafana/grafana-foundation-sdk`, pinned to its Grafana 11.6 build:
 * docker-compose.yml runs grafana/grafana:11.3.1 and npm carries no 11.3 build; for what this
 * file uses, the 11.x builds describe the same dashboard and panel model.
 */
import {
  AnnotationQueryBuilder,
  DashboardBuilder,
  DashboardCursorSync,
  RowBuilder,
  type Dashboard,
} from '@grafana/grafana-foundation-sdk/dashboard';
import { quantiles, stat, timeseries, type PanelEntry } from './panels.js';

/** A row of the dashboard. Grafana counts a row as a panel: its id follows a panel's rules. */
export type Row = { id: number; title: string; panels: PanelEntry[] };

/**
 * The rows, top to bottom. In a row, panels fill lines of 24 columns left to right (`width`),
 * every panel 8 units tall. Ids are Grafana's, kept from the hand-edited dashboard.
 */
export const ROWS: Row[] = [
  {
    id: 1,
    title: 'HTTP API',
    panels: [
      timeseries({
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
      }),
      timeseries({
        id: 3,
        title: 'Request latency by route and status (p50 / p95 / p99)',
        description:
          'Quantiles of http_request_duration_seconds from its histogram buckets, by route pattern and status.',
        unit: 's',
        width: 12,
        queries: quantiles('http_request_duration_seconds', ['route', 'status_code']),
      }),
    ],
  },
  {
    id: 4,
    title: 'Subdomain cache',
    panels: [
      timeseries({
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
      }),
      stat({
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
      }),
      timeseries({
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
      }),
    ],
  },
  {
    id: 8,
    title: 'Solana RPC spend',
    panels: [
      timeseries({
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
      }),
      timeseries({
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
      }),
      stat({
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
      }),
      timeseries({
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
      }),
      timeseries({
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
      }),
      timeseries({
        id: 14,
        title: 'RPC latency by method and endpoint (p50 / p95 / p99)',
        description: 'Quantiles of one JSON-RPC round trip (sns_rpc_request_duration_seconds).',
        unit: 's',
        width: 12,
        queries: quantiles('sns_rpc_request_duration_seconds', ['method', 'endpoint']),
      }),
      timeseries({
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
      }),
      timeseries({
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
      }),
      timeseries({
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
      }),
      stat({
        id: 33,
        title: 'Budget state',
        description:
          '0 normal, 1 stretched (freshness stretched, nothing refreshed ahead), 2 exhausted (cold misses 503, no refresh).',
        unit: 'none',
        width: 6,
        decimals: 0,
        queries: [{ expr: 'max(sns_rpc_budget_state)', legend: 'state' }],
      }),
    ],
  },
  {
    id: 17,
    title: 'Refresh worker and queue',
    panels: [
      timeseries({
        id: 18,
        title: 'Refresh duration (p50 / p95 / p99)',
        description:
          'Duration of one subdomain refresh in the worker: the RPC calls and the derivations.',
        unit: 's',
        width: 8,
        queries: quantiles('sns_refresh_duration_seconds', []),
      }),
      timeseries({
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
      }),
      timeseries({
        id: 20,
        title: 'Queue depth by state',
        description:
          'Refresh jobs in the BullMQ queue by state. Every API and worker process reports the same queue, so the panel takes the max across them.',
        unit: 'short',
        width: 8,
        min: 0,
        queries: [{ expr: 'max by (state) (sns_queue_jobs)', legend: '{{state}}' }],
      }),
    ],
  },
  {
    id: 25,
    title: 'Following the chain',
    panels: [
      timeseries({
        id: 26,
        title: 'Websocket and watched parents',
        description:
          'Open websockets to the RPC, programSubscribe subscriptions and parents watched, over every worker. Without a websocket (RPC_WS=off, a provider without one) all three stay 0 and hot parents are refreshed by the clock.',
        unit: 'short',
        width: 8,
        queries: [
          { expr: 'sum(sns_ws_connected)', legend: 'websockets open' },
          { expr: 'sum(sns_ws_subscriptions)', legend: 'subscriptions' },
          { expr: 'sum(sns_watched_parents)', legend: 'watched parents' },
        ],
      }),
      timeseries({
        id: 27,
        title: 'Notifications per minute by outcome',
        description:
          'programSubscribe notifications: patched into the entry (a new subdomain proven by its reverse record), re-read at their slot, or ignored.',
        unit: 'short',
        width: 8,
        queries: [
          {
            expr: 'sum by (outcome) (rate(sns_ws_notifications_total[$__rate_interval])) * 60',
            legend: '{{outcome}}',
          },
        ],
      }),
      timeseries({
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
      }),
      timeseries({
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
      }),
      timeseries({
        id: 30,
        title: 'Websocket bytes received per second',
        description:
          'What the provider bills for the websocket (Helius: 2 credits per 0.1 MB), counted in sns_rpc_credits_total as wsMegabyte.',
        unit: 'Bps',
        width: 8,
        queries: [
          { expr: 'sum(rate(sns_ws_received_bytes_total[$__rate_interval]))', legend: 'received' },
        ],
      }),
      timeseries({
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
      }),
    ],
  },
  {
    id: 21,
    title: 'Processes',
    panels: [
      timeseries({
        id: 22,
        title: 'Resident memory by process',
        description: 'Resident set size of each API and worker process, and its V8 heap in use.',
        unit: 'bytes',
        width: 6,
        queries: [
          {
            expr: 'sum by (job, instance) (process_resident_memory_bytes)',
            legend: 'RSS {{job}} {{instance}}',
          },
          {
            expr: 'sum by (job, instance) (nodejs_heap_size_used_bytes)',
            legend: 'heap {{job}} {{instance}}',
          },
        ],
      }),
      timeseries({
        id: 23,
        title: 'Event-loop lag p99 by process',
        description:
          "99th percentile of the event-loop delay (prom-client's nodejs_eventloop_lag_p99_seconds). High values delay every request and scrape of that process.",
        unit: 's',
        width: 6,
        queries: [
          {
            expr: 'max by (job, instance) (nodejs_eventloop_lag_p99_seconds)',
            legend: '{{job}} {{instance}}',
          },
        ],
      }),
      timeseries({
        id: 24,
        title: 'CPU by process',
        description: 'CPU seconds per second (1 = one core) of each process.',
        unit: 'percentunit',
        width: 6,
        queries: [
          {
            expr: 'sum by (job, instance) (rate(process_cpu_seconds_total[$__rate_interval]))',
            legend: '{{job}} {{instance}}',
          },
        ],
      }),
      timeseries({
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
      }),
    ],
  },
];

/**
 * The schema version stamped on the JSON: the one the dashboard was written and checked for. The
 * SDK's 11.6 build would stamp 41, Grafana 11.6's schema, not that of the 11.3.1 image.
 */
const SCHEMA_VERSION = 39;

/**
 * The dashboard of `rows` (the rows above unless a test passes others) as Grafana's JSON model:
 * uid `sns-gateway` (the provisioned home dashboard), every panel on the `prometheus` datasource.
 * Throws when two panels share an id or a panel runs past the grid's 24 columns, so
 * `npm run dashboard` stops before writing such a dashboard.
 */
export function buildDashboard(rows: Row[] = ROWS): Dashboard {
  const builder = new DashboardBuilder('SNS gateway')
    .uid('sns-gateway')
    .description(
      'Requests, subdomain cache, Solana RPC spend, refresh queue and processes of sns-gateway.',
    )
    .tags(['sns-gateway', 'solana', 'bullmq'])
    .editable()
    .tooltip(DashboardCursorSync.Crosshair)
    .timezone('browser')
    .refresh('30s')
    .version(1)
    .time({ from: 'now-1h', to: 'now' })
    .variables([])
    .links([])
    .annotation(
      new AnnotationQueryBuilder()
        .builtIn(1)
        .datasource({ type: 'grafana', uid: '-- Grafana --' })
        .enable(true)
        .hide(true)
        .iconColor('rgba(0, 211, 255, 1)')
        .name('Annotations & Alerts')
        .type('dashboard'),
    );
  for (const row of rows) {
    builder.withRow(new RowBuilder(row.title).id(row.id));
    for (const panel of row.panels) builder.withPanel(panel());
  }
  const dashboard = { ...builder.build(), schemaVersion: SCHEMA_VERSION };

  const seen = new Set<number>();
  for (const { id, title, gridPos } of dashboard.panels ?? []) {
    if (id === undefined || seen.has(id)) {
      throw new Error(`panel "${title}": id ${id} is missing or taken by another panel`);
    }
    seen.add(id);
    if (gridPos && gridPos.x + gridPos.w > 24) {
      throw new Error(
        `panel "${title}" runs past the 24 columns of its line: narrow it or move it`,
      );
    }
  }
  return dashboard;
}
