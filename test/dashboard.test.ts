/**
 * The Grafana dashboard against its source and the metrics the gateway really exposes: the
 * checked-in JSON is what grafana/dashboard.ts generates, every query parses as PromQL
 * (Prometheus' own lezer grammar), names only metrics and labels a running gateway serves, and,
 * where Prometheus is installed, returns series on a real Prometheus scraping that gateway.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { buildDashboard, ROWS } from '../grafana/dashboard.js';
import { renderDashboard } from '../grafana/generate.js';
import { panelTable, renderObservabilityDoc } from '../grafana/panel-table.js';
import { timeseries } from '../grafana/panels.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { binary, hasBinary } from './support/programs.js';
import { labelSets, scrape, type Exposition } from './support/prometheus.js';
import { freePort } from './support/ports.js';
import { untilStale } from './support/freshness.js';

const root = new URL('..', import.meta.url);
const readText = (path: string) => readFileSync(new URL(path, root), 'utf8');

type Target = { refId?: string; expr?: string; datasource?: { type?: string; uid?: string } };
type Panel = {
  id?: number;
  type?: string;
  title?: string;
  datasource?: { type?: string; uid?: string };
  gridPos?: { h: number; w: number; x: number; y: number };
  targets?: Target[];
  panels?: Panel[];
};
type Dashboard = { uid?: string; title?: string; panels?: Panel[] };

const dashboard = JSON.parse(readText('grafana/dashboards/sns-gateway.json')) as Dashboard;
/** Every panel, those nested in collapsed rows too; rows themselves excluded. */
const panels: Panel[] = (dashboard.panels ?? [])
  .flatMap((p) => [p, ...(p.panels ?? [])])
  .filter((p) => p.type !== 'row');
const queries = panels.flatMap((p) =>
  (p.targets ?? []).map((t) => ({ panel: p.title ?? '?', refId: t.refId, expr: t.expr ?? '' })),
);

/** Grafana's built-in interval variables, as a Prometheus query needs them spelled out. */
function substituteVariables(expr: string, range = '1h'): string {
  return expr
    .replace(/\$__rate_interval|\$\{__rate_interval\}/g, '1m')
    .replace(/\$__interval|\$\{__interval\}/g, '15s')
    .replace(/\$__range|\$\{__range\}/g, range);
}

type Analysis = {
  /** Parse errors (lezer marks them with error nodes), as the text they cover. */
  errors: string[];
  /** Each vector selector: the metric name it selects and the label names it matches on. */
  selectors: Array<{ name: string; labels: string[] }>;
  /** Labels of `by`, `without`, `on` and `ignoring` clauses. */
  grouping: string[];
};

/** Reads one expression with the PromQL grammar of Prometheus' own UI. */
function analyse(expr: string): Analysis {
  const text = substituteVariables(expr);
  const result: Analysis = { errors: [], selectors: [], grouping: [] };
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) result.errors.push(`at ${node.from}: "${text.slice(node.from)}"`);
      if (node.name === 'VectorSelector') {
        const id = node.node.getChild('Identifier');
        const matchers = node.node.getChild('LabelMatchers');
        const labels: string[] = [];
        matchers?.cursor().iterate((n) => {
          if (n.name === 'LabelName') labels.push(text.slice(n.from, n.to));
        });
        result.selectors.push({ name: id ? text.slice(id.from, id.to) : '', labels });
        return false;
      }
      if (node.name === 'GroupingLabels') {
        node.node.cursor().iterate((n) => {
          if (n.name === 'LabelName') result.grouping.push(text.slice(n.from, n.to));
        });
        return false;
      }
      return undefined;
    },
  });
  return result;
}

/**
 * The family a selected name belongs to: the name itself, or for `_bucket`, `_sum` and `_count`
 * the histogram (or summary) they are series of.
 */
function familyOf(exp: Exposition, name: string): string | undefined {
  if (exp.families[name]) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  const base = m?.[1];
  const type = base === undefined ? undefined : exp.families[base]?.type;
  if (type === 'histogram' || (type === 'summary' && m?.[2] !== 'bucket')) return base;
  return undefined;
}

/** Label names a selected name can be matched on: its series' labels, `le`, and the target's. */
function labelsOf(exp: Exposition, name: string): Set<string> {
  const family = familyOf(exp, name) ?? name;
  const labels = new Set(['job', 'instance', '__name__']);
  for (const set of labelSets(exp, family)) for (const l of Object.keys(set)) labels.add(l);
  if (name.endsWith('_bucket')) labels.add('le');
  return labels;
}

function chain() {
  const c = seedDemo();
  for (const parent of ['dashcold', 'dashfault', 'dashstale']) c.addSubdomain(parent, 'child');
  return c;
}

/** Traffic that gives every family of the contract a series: misses, hits, stale, RPC faults. */
async function traffic(gw: Gateway): Promise<void> {
  await gw.get('/subdomains/dashcold'); // miss, refresh, RPC ok
  await gw.get('/subdomains/dashcold'); // hit
  await gw.get('/subdomains/dashstale');
  gw.sim.setFaults([{ kind: 'http', status: 503, times: 1 }]);
  await gw.get('/subdomains/dashfault'); // http_error, a retry, then ok
  gw.sim.setFaults([]);
  await gw.get('/record-key-v2/bonfida/SOL');
  await gw.get('/subdomains/a.b'); // 400
  // Past CACHE_FRESH_SECONDS=1: a stale hit, and its background refresh.
  await untilStale(gw, 'dashstale');
  await gw.get('/subdomains/dashstale');
  await waitFor(
    async () => (await gw.get('/subdomains/dashstale')).headers.get('x-cache') === 'HIT',
  );
}

describe('grafana/dashboards/sns-gateway.json', () => {
  it('is what grafana/dashboard.ts generates', async () => {
    const generated = await renderDashboard();
    const checkedIn = readText('grafana/dashboards/sns-gateway.json');
    const hint = 'the JSON differs from grafana/dashboard.ts: run `npm run dashboard`';
    // The parsed comparison first, so a failure names the field that differs.
    expect(JSON.parse(checkedIn), hint).toEqual(JSON.parse(generated));
    expect(checkedIn, hint).toBe(generated);
  });

  it('is listed panel by panel in docs/observability.md, as `npm run dashboard` writes it', async () => {
    const checkedIn = readText('docs/observability.md');
    const hint = 'the panel table differs from the dashboard: run `npm run dashboard`';
    expect(checkedIn, hint).toBe(await renderObservabilityDoc());
    // One line per panel (rows aside), titled as the dashboard titles it.
    const titles = (buildDashboard().panels ?? []).flatMap((p) =>
      p.type === 'row' || !('title' in p) ? [] : [p.title],
    );
    const table = panelTable().split('\n').slice(2);
    expect(table.map((line) => line.split(' | ')[1])).toEqual(titles);
  });

  it('refuses to generate a panel that reuses an id or runs past 24 columns', () => {
    const panel = { title: 'extra', description: '', unit: 'short', queries: [] };
    const row = (extra: ReturnType<typeof timeseries>) => ({
      id: 1000,
      title: 'x',
      panels: [extra],
    });
    expect(() =>
      buildDashboard([...ROWS, row(timeseries({ ...panel, id: 2, width: 12 }))]),
    ).toThrow(/id 2 is missing or taken/);
    const wide = timeseries({ ...panel, id: 1001, width: 12 });
    expect(() =>
      buildDashboard([
        { id: 1000, title: 'x', panels: [timeseries({ ...panel, id: 1002, width: 18 }), wide] },
      ]),
    ).toThrow(/runs past the 24 columns/);
    expect(() =>
      buildDashboard([...ROWS, row(timeseries({ ...panel, id: 1001, width: 24 }))]),
    ).not.toThrow();
  });

  it('is one dashboard of at least 8 panels on the provisioned Prometheus datasource', () => {
    const datasources = parseYaml(readText('grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: Array<{ uid: string; type: string; url: string }>;
    };
    const ds = datasources.datasources[0];
    expect(ds).toMatchObject({
      uid: 'prometheus',
      type: 'prometheus',
      url: 'http://prometheus:9090',
    });

    expect(dashboard.uid).toBe('sns-gateway');
    expect(panels.length).toBeGreaterThanOrEqual(8);
    const ids = (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of panels) {
      expect(panel.title, `panel ${panel.id}`).toBeTruthy();
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: ds?.uid });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      const refIds = (panel.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, panel.title).toBe(refIds.length);
      const pos = panel.gridPos;
      expect(pos && pos.x >= 0 && pos.w > 0 && pos.x + pos.w <= 24, panel.title).toBe(true);
    }
  });

  it('parses every expression as PromQL', () => {
    expect(queries.length).toBeGreaterThan(0);
    for (const q of queries) {
      expect(analyse(q.expr).errors, `${q.panel} ${q.refId}: ${q.expr}`).toEqual([]);
    }
  });

  it('shows the latency, cache, RPC, refresh, queue and memory views', () => {
    const exprs = queries.map((q) => q.expr);
    const uses = (re: RegExp) => exprs.some((e) => re.test(e));
    expect(uses(/histogram_quantile\(.*http_request_duration_seconds_bucket/)).toBe(true);
    expect(uses(/by \(route, status_code\).*http_request_duration_seconds_count/)).toBe(true);
    expect(uses(/sns_cache_lookups_total/)).toBe(true);
    expect(uses(/by \(method, endpoint\).*sns_rpc_requests_total.*\* 60/)).toBe(true);
    expect(uses(/by \(method, endpoint\).*sns_rpc_credits_total.*\* 60/)).toBe(true);
    expect(uses(/sns_rpc_requests_total\{outcome!="ok"\}/)).toBe(true);
    expect(uses(/histogram_quantile\(.*sns_rpc_request_duration_seconds_bucket/)).toBe(true);
    expect(uses(/sns_rpc_retries_total/)).toBe(true);
    expect(uses(/max\(sns_rpc_budget_spent_credits\)/)).toBe(true);
    expect(uses(/max\(sns_rpc_budget_credits\)/)).toBe(true);
    expect(uses(/max\(sns_rpc_budget_state\)/)).toBe(true);
    expect(uses(/histogram_quantile\(.*sns_refresh_duration_seconds_bucket/)).toBe(true);
    expect(uses(/by \(state\) \(sns_queue_jobs\)/)).toBe(true);
    expect(uses(/process_resident_memory_bytes/)).toBe(true);
    expect(uses(/nodejs_eventloop_lag_p99_seconds/)).toBe(true);
  });
});

describe('the dashboard against a running gateway', () => {
  let gw: Gateway;
  let exp: Exposition;
  beforeAll(async () => {
    gw = await startGateway({ chain: chain(), env: { CACHE_FRESH_SECONDS: '1' } });
    await traffic(gw);
    exp = await scrape(gw.metricsUrl);
  });
  afterAll(() => gw?.close());

  it('names only metrics that /metrics exposes', () => {
    const unknown = queries.flatMap((q) =>
      analyse(q.expr)
        .selectors.filter((s) => familyOf(exp, s.name) === undefined)
        .map((s) => `${q.panel}: ${s.name || '(no metric name)'}`),
    );
    expect(unknown).toEqual([]);
  });

  it('uses every metric of the contract', () => {
    const used = new Set(
      queries.flatMap((q) => analyse(q.expr).selectors.map((s) => familyOf(exp, s.name))),
    );
    const ours = Object.keys(exp.families).filter((n) => /^(sns|http)_/.test(n));
    expect(ours.filter((n) => !used.has(n))).toEqual([]);
  });

  it('matches and groups only on labels those metrics have', () => {
    const problems: string[] = [];
    for (const q of queries) {
      const { selectors, grouping } = analyse(q.expr);
      const all = new Set(['le']);
      for (const s of selectors) {
        const known = labelsOf(exp, s.name);
        for (const l of known) all.add(l);
        for (const l of s.labels) if (!known.has(l)) problems.push(`${q.panel}: ${s.name}{${l}}`);
      }
      for (const l of grouping) if (!all.has(l)) problems.push(`${q.panel}: by/on (${l})`);
    }
    expect(problems).toEqual([]);
  });

  it.runIf(hasBinary('prometheus'))(
    'returns series for every query on a real Prometheus scraping the gateway',
    async () => {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), 'snsgw-prometheus-'));
      const target = new URL(gw.metricsUrl).host;
      writeFileSync(
        join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, scrape_timeout: 900ms }',
          'scrape_configs:',
          `  - { job_name: sns-api, static_configs: [{ targets: ['${target}'] }] }`,
          '',
        ].join('\n'),
      );
      const prom = spawn(
        binary('prometheus'),
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--log.level=error',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      prom.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise((resolve) => prom.once('exit', resolve));
      const api = `http://127.0.0.1:${port}/api/v1/query`;
      const query = async (q: string) => {
        const res = await fetch(`${api}?${new URLSearchParams({ query: q }).toString()}`);
        return (await res.json()) as {
          status: string;
          error?: string;
          data?: { result: Array<{ value: [number, string] }> };
        };
      };
      try {
        // More traffic while Prometheus watches, then two scrapes after it, so every series has
        // the two samples rate() needs.
        await traffic(gw);
        const after = Date.now() / 1000;
        const scalar = async (q: string) =>
          Number((await query(q).catch(() => undefined))?.data?.result[0]?.value[1] ?? 0);
        await waitFor(
          async () =>
            (await scalar('count_over_time(up{job="sns-api"}[1m])')) >= 3 &&
            (await scalar('timestamp(up{job="sns-api"})')) > after + 1.5,
          20_000,
        );
        const empty: string[] = [];
        for (const q of queries) {
          const expr = substituteVariables(q.expr, '5m');
          const r = await query(expr);
          if (r.status !== 'success') empty.push(`${q.panel} ${q.refId}: ${r.error} (${expr})`);
          else if (!r.data?.result.length) empty.push(`${q.panel} ${q.refId}: no series (${expr})`);
        }
        expect(empty, stderr).toEqual([]);
      } finally {
        prom.kill('SIGTERM');
        await exited;
        rmSync(dir, { recursive: true, force: true });
      }
    },
    40_000,
  );
  if (!hasBinary('prometheus'))
    console.warn('dashboard.test: prometheus not installed; skipping the real-Prometheus check');
});
