/**
 * The sns-gateway dashboard as code: its rows, and in each row its panels, top to bottom and left
 * to right as Grafana shows them. `npm run dashboard` writes grafana/dashboards/sns-gateway.json
 * from this file (grafana/generate.ts); the JSON is generated, never edited by hand, and
 * test/dashboard.test.ts fails when the two differ.
 *
 * The gateway's metrics' panels are listed beside the metrics (`METRIC_PANELS`,
 * src/core/metrics.ts); the process metrics' panels are here. grafana/panels.ts holds the look
 * every panel shares. Then run `npm run dashboard`.
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
import { METRIC_PANELS, type MetricPanel } from './metric-panels.js';
import { stat, timeseries, type PanelEntry } from './panels.js';

/** A row of the dashboard. Grafana counts a row as a panel: its id follows a panel's rules. */
export type Row = { id: number; title: string; panels: PanelEntry[] };

/**
 * The rows, top to bottom. In a row, panels fill lines of 24 columns left to right (`width`),
 * every panel 8 units tall. Ids are Grafana's, kept from the hand-edited dashboard.
 */
/** The gateway's panels of `row`, drawn in the order src/core/metrics.ts lists them. */
const panelsOf = (row: MetricPanel['row']): PanelEntry[] =>
  METRIC_PANELS.filter((p) => p.row === row).map((p) =>
    p.kind === 'stat' ? stat(p) : timeseries(p),
  );

export const ROWS: Row[] = [
  { id: 1, title: 'HTTP API', panels: panelsOf('HTTP API') },
  { id: 4, title: 'Subdomain cache', panels: panelsOf('Subdomain cache') },
  { id: 8, title: 'Solana RPC spend', panels: panelsOf('Solana RPC spend') },
  { id: 17, title: 'Refresh worker and queue', panels: panelsOf('Refresh worker and queue') },
  { id: 25, title: 'Following the chain', panels: panelsOf('Following the chain') },
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
      ...panelsOf('Processes'),
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
