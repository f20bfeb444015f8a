/**
 * The metrics contract (docs/observability.md, "The metrics"), read the way Prometheus reads it:
 * real traffic through the real API and BullMQ worker against the RPC simulator, then the
 * `/metrics` text parsed (test/support/prometheus.ts, and `promtool check metrics` when installed).
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { createLogger } from '../src/core/logger.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import {
  createMetrics,
  DELETION_CHECK_OUTCOME,
  QUEUE_SCRAPE_TIMEOUT_MS,
  QUEUE_STATES,
  REFRESH_OUTCOME,
  WS_NOTIFICATION_OUTCOME,
} from '../src/core/metrics.js';
import { startApi } from '../src/api/runtime.js';
import { startWorker } from '../worker/runtime.js';
import {
  baseUrlOf,
  deletePrefix,
  getJson,
  seedDemo,
  startGateway,
  testConfig,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import {
  histogramCount,
  labelSets,
  parseExposition,
  promtoolProblems,
  scrape,
  value,
} from './support/prometheus.js';
import { spawnMain, type MainProcess } from './support/main-process.js';
import { hasBinary } from './support/programs.js';
import { startRpcSimulator, type Fault, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { freePort } from './support/ports.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { ROUTE } from '../src/api/http/routes/paths.js';
import { OPS_ROUTE } from '../src/core/http/ops-routes.js';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';

/** One row of the metrics table of docs/observability.md. */
type MetricRow = {
  name: string;
  type: string;
  labels: string[];
  /** The values the table lists for a label, in parentheses after its name; none when absent. */
  values: Record<string, string[]>;
};

/**
 * The metrics table of docs/observability.md ("The metrics"): the contract, and the one list of
 * metrics the tests know. Adding a metric means src/core/metrics.ts, its dashboard panel and a
 * row of that table; these tests then check it against what the processes expose.
 */
function readMetricsTable(): MetricRow[] {
  const doc = readFileSync(new URL('../docs/observability.md', import.meta.url), 'utf8');
  const rows = [...doc.matchAll(/^\| `([a-z_]+)`\s*\| (counter|gauge|histogram)\s*\| ([^|]*)\|/gm)];
  return rows.map(([, name = '', type = '', cell = '']) => {
    const labels: string[] = [];
    const values: Record<string, string[]> = {};
    // `label` or `label` (`value`, `value`): the parentheses are consumed with their label, so
    // the backquoted values in them are never read as label names.
    for (const [, label = '', listed] of cell.matchAll(/`(\w+)`\s*(?:\(([^)]*)\))?/g)) {
      labels.push(label);
      if (listed !== undefined)
        values[label] = [...listed.matchAll(/`(\w+)`/g)].map((m) => m[1] ?? '');
    }
    return { name, type, labels, values };
  });
}

const METRICS_TABLE = readMetricsTable();

/** prom-client's default metrics the dashboard and runbooks use (a sample, not all of them). */
const DEFAULT_METRICS: ReadonlyArray<readonly [string, string]> = [
  ['process_cpu_seconds_total', 'counter'],
  ['process_resident_memory_bytes', 'gauge'],
  ['process_start_time_seconds', 'gauge'],
  ['process_open_fds', 'gauge'],
  ['nodejs_eventloop_lag_p99_seconds', 'gauge'],
  ['nodejs_heap_size_used_bytes', 'gauge'],
  ['nodejs_gc_duration_seconds', 'histogram'],
  ['nodejs_version_info', 'gauge'],
];

/**
 * Every value a bounded label may take (docs/observability.md: no URL, parent or IP ever becomes
 * a label), for the labels whose values the metrics table does not list in parentheses; `route`
 * is checked against the app's own routes.
 */
const BOUNDED_VALUES: Record<string, RegExp> = {
  method:
    /^(getProgramAccounts|getMultipleAccounts|getAccountInfo|getSlot|wsConnection|wsMegabyte|GET|HEAD|OPTIONS)$/,
  endpoint: /^(default|override)$/,
  // sns_rpc_requests_total's, which the table describes in prose.
  outcome: /^(ok|behind|rpc_error|http_error|timeout)$/,
  status_code: /^[1-5]\d\d$/,
};

/**
 * A `route` label is a pattern the app registered (`/subdomains/:parent`; `*` for CORS
 * preflights, @fastify/cors's OPTIONS route), or `unmatched`.
 */
const isRoutePattern = (gw: Gateway, route: string) =>
  route === 'unmatched' ||
  (route === '*'
    ? gw.api.app.hasRoute({ method: 'OPTIONS', url: '/*' })
    : gw.api.app.hasRoute({ method: 'GET', url: route }));

/** Parents only this file asks for, so every first request is a cold miss. */
const PARENTS = [
  'coldparent',
  'leakparentzq',
  'faultrpc',
  'faulthttp',
  'faulttimeout',
  'faultgarbage',
  'faultfatal',
  'staleparent',
  'tableparent',
];

const SECRET = 'SEKRET123';

function chain() {
  const c = seedDemo();
  for (const parent of PARENTS) c.addSubdomain(parent, 'child');
  return c;
}

/** What a JSON-RPC method costs by the default `RPC_CREDITS` (the one cost table). */
const credits = loadConfig({}).RPC_CREDITS;
const cost = (method: string) => credits[method] ?? credits['*'] ?? 1;

/**
 * Makes a cached entry stale by moving its `fetchedAt` back past the fresh window. The key is
 * computed, not found with SCAN: one SCAN page can miss it on a Redis shared with other runs.
 */
async function ageEntry(gw: Gateway, parent: string): Promise<void> {
  const key = redisKeys(gw.config.QUEUE_PREFIX).entryMeta(
    endpointId(gw.config.RPC_URL ?? ''),
    parent,
  );
  const raw = await gw.redis.get(key);
  if (!raw) throw new Error(`no cache entry for ${parent}`);
  const entry = JSON.parse(raw) as { fetchedAt: number };
  entry.fetchedAt -= (gw.config.CACHE_FRESH_SECONDS + 5) * 1000;
  await gw.redis.set(key, JSON.stringify(entry), 'KEEPTTL');
}

describe('the exposition reader (test/support/prometheus.ts)', () => {
  const histogram = (inf: string, count: string) =>
    [
      '# HELP h_seconds A histogram.',
      '# TYPE h_seconds histogram',
      'h_seconds_bucket{le="0.1",route="/a"} 1',
      `h_seconds_bucket{le="+Inf",route="/a"} ${inf}`,
      'h_seconds_sum{route="/a"} 0.05',
      `h_seconds_count{route="/a"} ${count}`,
      'h_seconds_bucket{le="0.1",route="/b"} 0',
      'h_seconds_bucket{le="+Inf",route="/b"} 1',
      'h_seconds_sum{route="/b"} 2',
      'h_seconds_count{route="/b"} 1',
      '# TYPE g gauge',
      'g{v="a\\"b\\\\c"} Nan',
      '',
    ].join('\n');

  it('reads labelled histograms, NaN and escaped label values', () => {
    const exp = parseExposition(histogram('2', '2'));
    expect(histogramCount(exp, 'h_seconds')).toBe(3);
    expect(histogramCount(exp, 'h_seconds', { route: '/b' })).toBe(1);
    expect(labelSets(exp, 'h_seconds')).toEqual([{ route: '/a' }, { route: '/b' }]);
    expect(labelSets(exp, 'g')).toEqual([{ v: 'a"b\\c' }]);
    expect(value(exp, 'g')).toBeNaN();
  });

  it('rejects what Prometheus rejects', () => {
    expect(() => parseExposition(histogram('2', '3'))).toThrow(/\+Inf bucket != _count/);
    expect(() => parseExposition('x{a="1" 1\n')).toThrow();
    expect(() => parseExposition('x 1 2 3\n')).toThrow();
    expect(() => parseExposition('x one\n')).toThrow(/bad value/);
    expect(() => parseExposition('# TYPE x countr\n')).toThrow(/bad type/);
    expect(parseExposition('# TYPE x gauge\nx 1\n# TYPE x gauge\n').duplicates).toEqual(['x']);
  });
});

describe('API /metrics after real traffic', () => {
  let sim: RpcSimulator;
  let gw: Gateway;
  const metricsUrl = () => gw.metricsUrl;
  const read = () => scrape(metricsUrl());
  let overrideUrl: string;

  beforeAll(async () => {
    sim = await startRpcSimulator({ chain: chain() });
    overrideUrl = `${sim.url}/v1/rpc?api-key=${SECRET}`;
    gw = await startGateway({
      sim,
      // The access log on, so the redaction of ?rpc= in it is proven too.
      env: {
        RPC_OVERRIDE_ALLOWLIST: new URL(sim.url).origin,
        RPC_TIMEOUT_MS: '1000',
        ACCESS_LOG: 'true',
        // ageEntry() moves fetchedAt back in Redis behind the API's back: no in-process copy.
        LOCAL_CACHE_BYTES: '0',
      },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.close();
  });

  it('a cold miss counts one miss and exactly the RPC calls its refresh made', async () => {
    const before = await read();
    sim.resetCalls();
    const res = await gw.get('/subdomains/coldparent');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-cache')).toBe('MISS');
    await waitFor(async () => {
      const now = await read();
      return (
        value(now, 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }) -
          value(before, 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }) ===
        1
      );
    });
    const after = await read();
    const delta = (name: string, labels = {}) =>
      value(after, name, labels) - value(before, name, labels);
    const countDelta = (name: string, labels = {}) =>
      histogramCount(after, name, labels) - histogramCount(before, name, labels);
    const gpa = { method: 'getProgramAccounts', endpoint: 'default' };

    expect(sim.calls.map((c) => c.method)).toEqual(['getProgramAccounts']);
    expect(delta('sns_cache_lookups_total', { result: 'miss' })).toBe(1);
    expect(delta('sns_cache_lookups_total', { result: 'hit' })).toBe(0);
    expect(delta('sns_rpc_requests_total', { ...gpa, outcome: 'ok' })).toBe(1);
    // Exactly the calls the simulator saw, nothing more (no call from the API itself).
    expect(delta('sns_rpc_requests_total')).toBe(sim.calls.length);
    expect(delta('sns_rpc_credits_total', gpa)).toBe(10);
    expect(delta('sns_rpc_credits_total')).toBe(
      sim.calls.reduce((sum, c) => sum + cost(c.method), 0),
    );
    expect(delta('sns_rpc_response_bytes_total', gpa)).toBeGreaterThan(0);
    expect(delta('sns_rpc_response_bytes_total')).toBe(
      sim.calls.reduce((sum, c) => sum + c.responseBytes, 0),
    );
    expect(countDelta('sns_rpc_request_duration_seconds', gpa)).toBe(1);
    expect(delta('sns_rpc_retries_total')).toBe(0);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed })).toBe(1);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.failed })).toBe(0);
    await waitFor(
      async () => histogramCount(await read(), 'sns_refresh_duration_seconds') > 0,
      2_000,
    );
    expect(
      histogramCount(await read(), 'sns_refresh_duration_seconds') -
        histogramCount(before, 'sns_refresh_duration_seconds'),
    ).toBe(1);
    expect(
      countDelta('http_request_duration_seconds', {
        method: 'GET',
        route: '/subdomains/:parent',
        status_code: '200',
      }),
    ).toBe(1);
  });

  it('a warm hit counts a hit and no RPC call', async () => {
    await gw.get('/subdomains/coldparent');
    const before = await read();
    sim.resetCalls();
    const res = await gw.get('/subdomains/coldparent');
    expect(res.headers.get('x-cache')).toBe('HIT');
    const after = await read();
    expect(
      value(after, 'sns_cache_lookups_total', { result: 'hit' }) -
        value(before, 'sns_cache_lookups_total', { result: 'hit' }),
    ).toBe(1);
    expect(value(after, 'sns_cache_lookups_total', { result: 'miss' })).toBe(
      value(before, 'sns_cache_lookups_total', { result: 'miss' }),
    );
    expect(value(after, 'sns_rpc_requests_total')).toBe(value(before, 'sns_rpc_requests_total'));
    expect(value(after, 'sns_rpc_credits_total')).toBe(value(before, 'sns_rpc_credits_total'));
    expect(sim.calls).toHaveLength(0);
  });

  it('a stale entry counts a stale lookup and queues one refresh', async () => {
    await gw.get('/subdomains/staleparent');
    await ageEntry(gw, 'staleparent');
    const before = await read();
    const res = await gw.get('/subdomains/staleparent');
    expect(res.headers.get('x-cache')).toBe('STALE');
    await waitFor(
      async () =>
        value(await read(), 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }) >
        value(before, 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }),
    );
    const after = await read();
    expect(
      value(after, 'sns_cache_lookups_total', { result: 'stale' }) -
        value(before, 'sns_cache_lookups_total', { result: 'stale' }),
    ).toBe(1);
    expect(
      value(after, 'sns_rpc_credits_total', { endpoint: 'default' }) -
        value(before, 'sns_rpc_credits_total', { endpoint: 'default' }),
    ).toBe(10);
  });

  it('an override counts endpoint="override" and leaks no URL, key, parent or address', async () => {
    const before = await read();
    const logsBefore = gw.logs.length;
    const res = await gw.get(`/subdomains/leakparentzq?rpc=${encodeURIComponent(overrideUrl)}`);
    expect(res.status).toBe(200);
    expect(res.body.result).toEqual(['child']);
    const after = await read();
    const over = { method: 'getProgramAccounts', endpoint: 'override' };
    expect(
      value(after, 'sns_rpc_requests_total', { ...over, outcome: 'ok' }) -
        value(before, 'sns_rpc_requests_total', { ...over, outcome: 'ok' }),
    ).toBe(1);
    expect(
      value(after, 'sns_rpc_credits_total', over) - value(before, 'sns_rpc_credits_total', over),
    ).toBe(10);
    expect(
      value(after, 'sns_rpc_requests_total', { endpoint: 'default' }) -
        value(before, 'sns_rpc_requests_total', { endpoint: 'default' }),
    ).toBe(0);

    const simHost = new URL(sim.url).host;
    for (const needle of [SECRET, 'api-key', overrideUrl, simHost, 'leakparentzq', '127.0.0.1']) {
      expect(after.text, `metrics text contains ${needle}`).not.toContain(needle);
    }
    const lines = gw.logs.slice(logsBefore);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of gw.logs) {
      for (const needle of [SECRET, 'api-key', overrideUrl, encodeURIComponent(overrideUrl)]) {
        expect(line, 'a log line holds the override URL or its key').not.toContain(needle);
      }
    }
    for (const line of lines) {
      // No client address (pino's request serializer keeps id, method, url), no RPC host.
      expect(line).not.toMatch(/remoteAddress|remotePort|"ip"|"ips"|x-forwarded-for/i);
      expect(line).not.toContain('127.0.0.1');
      // The parent shows only in the request's own lines (the access log, and the slow-request
      // warning a loaded machine adds), their path with the override redacted.
      if (line.includes('leakparentzq')) {
        const entry = JSON.parse(line) as { msg?: string; req?: { url?: string } };
        expect(['incoming request', 'slow request']).toContain(entry.msg);
        expect(entry.req?.url).toBe('/subdomains/leakparentzq?rpc=[redacted]');
      }
    }
  });

  it('redacts the override however its name is percent-encoded (?r%70c=)', async () => {
    const logsBefore = gw.logs.length;
    for (const name of ['r%70c', '%72%70%63', 'RPC']) {
      const res = await gw.get(
        `/subdomains/leakparentzq?${name}=${encodeURIComponent(overrideUrl)}`,
      );
      expect(res.status, name).toBe(200);
      // The router reads the encoded names as `rpc`: answered through the override, never stored.
      // `RPC` is another parameter to it, redacted all the same.
      expect(res.headers.get('cache-control') === 'no-store', name).toBe(name !== 'RPC');
    }
    const lines = gw.logs.slice(logsBefore);
    expect(lines.filter((l) => l.includes('incoming request'))).toHaveLength(3);
    for (const line of lines) {
      expect(line, 'a log line holds the override URL or its key').not.toContain(SECRET);
    }
  });

  const faultCases: Array<{
    parent: string;
    fault: Fault;
    outcome: string;
    retries: number;
  }> = [
    {
      parent: 'faultrpc',
      fault: { kind: 'rpc-error', code: -32005, message: 'Node is behind', times: 1 },
      outcome: 'rpc_error',
      retries: 1,
    },
    {
      parent: 'faulthttp',
      fault: { kind: 'http', status: 503, times: 1 },
      outcome: 'http_error',
      retries: 1,
    },
    { parent: 'faulttimeout', fault: { kind: 'hang', times: 1 }, outcome: 'timeout', retries: 1 },
    {
      parent: 'faultgarbage',
      fault: { kind: 'garbage', times: 1 },
      outcome: 'http_error',
      retries: 1,
    },
  ];

  it.each(faultCases)(
    'a $fault.kind fault counts outcome="$outcome" and a retry, then ok',
    async ({ parent, fault, outcome, retries }) => {
      const before = await read();
      const labels = { method: 'getProgramAccounts', endpoint: 'default' };
      sim.setFaults([fault]);
      const res = await gw.get(`/subdomains/${parent}`);
      sim.setFaults([]);
      expect(res.status).toBe(200);
      const after = await read();
      const delta = (name: string, extra = {}) =>
        value(after, name, { ...labels, ...extra }) - value(before, name, { ...labels, ...extra });
      expect(delta('sns_rpc_requests_total', { outcome })).toBe(1);
      expect(delta('sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
      expect(delta('sns_rpc_retries_total')).toBe(retries);
      expect(
        histogramCount(after, 'sns_rpc_request_duration_seconds', labels) -
          histogramCount(before, 'sns_rpc_request_duration_seconds', labels),
      ).toBe(2);
    },
  );

  it('a refresh that cannot succeed is not retried by the client; its job is retried', async () => {
    const before = await read();
    // -32602 (invalid params) cannot succeed on retry: one call, then BullMQ's job attempts.
    sim.setFaults([{ kind: 'rpc-error', code: -32602, times: 1 }]);
    const res = await gw.get('/subdomains/faultfatal');
    sim.setFaults([]);
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ s: 'error', result: 'RPC unavailable' });
    // The job's next attempt (JOB_BACKOFF_MS later) succeeds and fills the cache.
    await waitFor(async () => (await gw.get('/subdomains/faultfatal')).status === 200);
    // The job counts as completed once BullMQ has moved it, which can follow the cache write.
    let after = await read();
    const delta = (name: string, labels: Record<string, string>) =>
      value(after, name, labels) - value(before, name, labels);
    await waitFor(async () => {
      after = await read();
      return delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }) >= 1;
    });
    expect(delta('sns_rpc_requests_total', { outcome: 'rpc_error' })).toBe(1);
    expect(delta('sns_rpc_retries_total', {})).toBe(0);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.retried })).toBe(1);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed })).toBe(1);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.failed })).toBe(0);
  });

  it('a 403 from the configured endpoint is not a malformed reply: its job is retried', async () => {
    const before = await read();
    sim.setFaults([{ kind: 'http', status: 403, times: 1 }]);
    const res = await gw.get('/subdomains/forbiddenonce');
    sim.setFaults([]);
    expect(res.status).toBe(502);
    // A proxy's 403 can pass (a deploy, a key rotated back): the job's back-off tries again.
    await waitFor(async () => (await gw.get('/subdomains/forbiddenonce')).status === 200);
    // Completed once BullMQ has moved the job, which can follow the cache write the 200 read.
    let after = await read();
    const delta = (name: string, labels: Record<string, string>) =>
      value(after, name, labels) - value(before, name, labels);
    await waitFor(async () => {
      after = await read();
      return delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed }) >= 1;
    });
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.retried })).toBe(1);
    expect(delta('sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.completed })).toBe(1);
  });

  it('http_request_duration_seconds labels the route pattern, never the raw URL', async () => {
    const paths = [
      '/subdomains/67679',
      '/subdomains/%20DeMo%20',
      '/subdomains/a.b.c',
      '/record-key-v2/bonfida/SOL',
      '/record-key-v2/rawdomainxyz/nope',
      '/types/record',
      '/no/such/route/rawpathxyz',
      '/healthz',
    ];
    for (const path of paths) await fetch(gw.baseUrl + path).then((r) => r.arrayBuffer());
    const exp = await read();
    const routes = new Set(
      labelSets(exp, 'http_request_duration_seconds').map((l) => l.route ?? ''),
    );
    for (const route of [ROUTE.subdomains, ROUTE.recordKey, ROUTE.recordTypes, OPS_ROUTE.healthz])
      expect(routes).toContain(route);
    for (const route of routes) expect(isRoutePattern(gw, route), route).toBe(true);
    // Names and labels of every sample, without its value: '67679' can be digits of a byte count.
    const series = exp.text.replace(/ \S+$/gm, '');
    for (const raw of ['67679', 'demo', 'a.b.c', 'bonfida', 'rawdomainxyz', 'rawpathxyz']) {
      expect(series).not.toContain(raw);
    }
    const statuses = labelSets(exp, 'http_request_duration_seconds')
      .filter((l) => l.route === '/subdomains/:parent')
      .map((l) => l.status_code);
    expect(statuses).toContain('200');
    expect(statuses).toContain('400');
  });

  it('http_request_duration_seconds counts every answer once, by method, pattern and status', async () => {
    const requests: Array<[string, string, Record<string, string>]> = [
      ['GET', '/types/record', { method: 'GET', route: '/types/record', status_code: '200' }],
      // Fastify's automatic HEAD route of a GET route is a route of its own.
      ['HEAD', '/types/record', { method: 'HEAD', route: '/types/record', status_code: '200' }],
      ['GET', '/no/such/route', { method: 'GET', route: 'unmatched', status_code: '404' }],
      // A broken percent-escape, refused before routing (Fastify's frameworkErrors).
      ['GET', '/subdomains/%E0%A4%A', { method: 'GET', route: 'unmatched', status_code: '400' }],
      // A CORS preflight, answered by @fastify/cors's own route.
      ['OPTIONS', '/subdomains/67679', { method: 'OPTIONS', status_code: '204' }],
      [
        'GET',
        '/record-key-v2/bonfida/nope',
        { method: 'GET', route: ROUTE.recordKey, status_code: '400' },
      ],
    ];
    for (const [method, path, labels] of requests) {
      const before = await read();
      const headers =
        method === 'OPTIONS'
          ? { origin: 'https://app.example', 'access-control-request-method': 'GET' }
          : undefined;
      await fetch(gw.baseUrl + path, { method, headers }).then((r) => r.arrayBuffer());
      const after = await read();
      const count = (l: Record<string, string>) =>
        histogramCount(after, 'http_request_duration_seconds', l) -
        histogramCount(before, 'http_request_duration_seconds', l);
      // /metrics is read on its own port: its reads are no API requests.
      expect(count({}), `${method} ${path}`).toBe(1);
      expect(count(labels), `${method} ${path}`).toBe(1);
    }
  });

  it('sns_queue_jobs shows the four states', async () => {
    const exp = await read();
    const states = labelSets(exp, 'sns_queue_jobs').map((l) => l.state ?? '');
    expect(states.sort()).toEqual([...QUEUE_STATES].sort());
    for (const state of states) {
      expect(value(exp, 'sns_queue_jobs', { state })).toBeGreaterThanOrEqual(0);
    }
  });

  it('has every metric of the table with its type and label names, and the default metrics', async () => {
    // Make sure every labelled family has a series, so its label names show.
    sim.setFaults([{ kind: 'http', status: 500, times: 1 }]);
    await gw.get('/subdomains/tableparent');
    sim.setFaults([]);
    const exp = await read();
    expect(exp.duplicates).toEqual([]);

    const ours = Object.keys(exp.families).filter((n) => /^(sns|http)_/.test(n));
    expect(ours.sort()).toEqual(METRICS_TABLE.map(({ name }) => name).sort());
    for (const { name, type, labels } of METRICS_TABLE) {
      expect(exp.families[name]?.type, name).toBe(type);
      const sets = labelSets(exp, name);
      expect(sets.length, `${name} has series`).toBeGreaterThan(0);
      for (const set of sets) expect(Object.keys(set).sort(), name).toEqual([...labels].sort());
    }
    for (const [name, type] of DEFAULT_METRICS) expect(exp.families[name]?.type, name).toBe(type);
  });

  it('keeps every label value in its bounded set', async () => {
    const exp = await read();
    for (const { name, values } of METRICS_TABLE) {
      for (const set of labelSets(exp, name)) {
        for (const [label, val] of Object.entries(set)) {
          const listed = values[label];
          if (label === 'route') expect(isRoutePattern(gw, val), val).toBe(true);
          else if (listed) expect(listed, `${name}{${label}}`).toContain(val);
          else expect(val, `${name}{${label}}`).toMatch(BOUNDED_VALUES[label] as RegExp);
        }
      }
    }
  });

  it.runIf(hasBinary('promtool'))('passes promtool check metrics', async () => {
    const exp = await read();
    expect(promtoolProblems(exp.text)).toEqual([]);
  });
  if (!hasBinary('promtool'))
    console.warn('metrics.test: promtool not installed; skipping `promtool check metrics`');

  it("registers exactly the metrics of docs/observability.md's table, the dashboard's contract", () => {
    expect(METRICS_TABLE.length).toBeGreaterThan(0);
    const registry = new Registry();
    createMetrics(registry, { defaultMetrics: false });
    const registered = registry.getMetricsAsArray().map((metric) => ({
      name: metric.name,
      type: String(metric.type),
      labels: [...((metric as { labelNames?: readonly string[] }).labelNames ?? [])].sort(),
    }));
    const documented = METRICS_TABLE.map(({ name, type, labels }) => ({
      name,
      type,
      labels: [...labels].sort(),
    }));
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect(registered.sort(byName)).toEqual(documented.sort(byName));
  });
});

/**
 * How long a scrape may take while the queue counts hang: the gauge's 500 ms race plus a margin
 * for a loaded two-core machine. Without the race such a scrape never answers at all.
 */
const SCRAPE_BOUND_MS = QUEUE_SCRAPE_TIMEOUT_MS + 1_500;

describe('queue depth gauge', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ worker: false, env: { SUBDOMAINS_WAIT_MS: '200' } });
  });
  afterAll(() => gw?.close());

  it('counts a waiting refresh when no worker takes it', async () => {
    const res = await gw.get('/subdomains/67679');
    expect(res.status).toBe(502);
    const exp = await scrape(gw.metricsUrl);
    expect(value(exp, 'sns_queue_jobs', { state: 'waiting' })).toBe(1);
    expect(value(exp, 'sns_queue_jobs', { state: 'active' })).toBe(0);
  });

  it('answers a scrape at once while the queue counts source hangs, keeping the last values', async () => {
    const metrics = gw.metrics;
    metrics.setQueueCountsSource(async () => ({ waiting: 7, active: 1, delayed: 2, failed: 3 }));
    expect(value(await scrape(gw.metricsUrl), 'sns_queue_jobs', { state: 'waiting' })).toBe(7);
    metrics.setQueueCountsSource(() => new Promise(() => undefined));
    const started = performance.now();
    const exp = await scrape(gw.metricsUrl);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeLessThan(SCRAPE_BOUND_MS);
    expect(value(exp, 'sns_queue_jobs', { state: 'waiting' })).toBe(7);
    expect(value(exp, 'sns_queue_jobs', { state: 'failed' })).toBe(3);
    expect(value(exp, 'sns_rpc_requests_total')).toBe(0);
  });

  it('answers a scrape at once when the source fails', async () => {
    gw.metrics.setQueueCountsSource(() => Promise.reject(new Error('Connection is closed.')));
    const started = performance.now();
    const res = await fetch(gw.metricsUrl);
    expect(res.status).toBe(200);
    await res.text();
    expect(performance.now() - started).toBeLessThan(SCRAPE_BOUND_MS);
  });

  it('answers a scrape at once when Redis accepts connections and never answers', async () => {
    // A "dead" Redis: TCP accepts, nothing ever comes back (a hung server or a black hole).
    const sockets = new Set<net.Socket>();
    const blackhole = net.createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    const port = (blackhole.address() as net.AddressInfo).port;
    const connection = new Redis(port, '127.0.0.1', {
      maxRetriesPerRequest: null,
      lazyConnect: false,
    });
    connection.on('error', () => undefined);
    const queue = new Queue(REFRESH_QUEUE, { connection, prefix: gw.config.QUEUE_PREFIX });
    queue.on('error', () => undefined);
    try {
      gw.metrics.setQueueCountsSource(() => queue.getJobCounts(...QUEUE_STATES));
      for (let i = 0; i < 2; i++) {
        const started = performance.now();
        const res = await fetch(gw.metricsUrl);
        expect(res.status).toBe(200);
        expect(await res.text()).toContain('sns_queue_jobs{state="waiting"}');
        expect(performance.now() - started).toBeLessThan(SCRAPE_BOUND_MS);
      }
    } finally {
      connection.disconnect();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => blackhole.close(() => resolve()));
    }
  });
});

/** A logger that keeps its lines, and the lines. */
function memoryLogger() {
  const lines: string[] = [];
  const logger = createLogger(
    'warn',
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  );
  return { logger, lines };
}

describe("the worker's metrics server", () => {
  it('serves the worker metrics on WORKER_METRICS_PORT (ROLE=api and ROLE=worker apart)', async () => {
    // The API of one process, the worker of another: each has its own registry.
    const gw = await startGateway({ worker: false });
    const workerMetrics = createMetrics(new Registry());
    const { logger } = memoryLogger();
    const worker = await startWorker(gw.config, workerMetrics, logger, { serveMetrics: true });
    try {
      expect(worker.metricsPort).toBeGreaterThan(0);
      const workerUrl = `http://127.0.0.1:${worker.metricsPort}`;
      expect((await gw.get('/subdomains/67679')).status).toBe(200);
      await waitFor(
        async () =>
          value(await scrape(`${workerUrl}/metrics`), 'sns_refresh_jobs_total', {
            outcome: REFRESH_OUTCOME.completed,
          }) === 1,
      );
      const fromWorker = await scrape(`${workerUrl}/metrics`);
      const fromApi = await scrape(gw.metricsUrl);
      // The worker makes every RPC call; the API makes none, and counts the lookup.
      expect(value(fromWorker, 'sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
      expect(value(fromWorker, 'sns_rpc_credits_total')).toBe(10);
      expect(value(fromApi, 'sns_rpc_requests_total')).toBe(0);
      expect(value(fromApi, 'sns_cache_lookups_total', { result: 'miss' })).toBe(1);
      expect(value(fromWorker, 'sns_cache_lookups_total')).toBe(0);
      // Both expose the whole contract and the process metrics.
      for (const exp of [fromWorker, fromApi]) {
        expect(exp.duplicates).toEqual([]);
        for (const { name, type } of METRICS_TABLE) expect(exp.families[name]?.type).toBe(type);
        expect(exp.families.process_resident_memory_bytes?.type).toBe('gauge');
        expect(labelSets(exp, 'sns_queue_jobs')).toHaveLength(QUEUE_STATES.length);
      }
      // The API's ops routes, in the API's shapes.
      for (const path of [OPS_ROUTE.healthz, OPS_ROUTE.readyz, '/nothing']) {
        const [fromWorkerOps, fromApiOps] = await Promise.all([
          getJson(workerUrl, path),
          gw.get(path),
        ]);
        expect(fromWorkerOps.status, path).toBe(fromApiOps.status);
        // The worker's readiness says one part more: whether it takes jobs.
        const apiBody = fromApiOps.body as { parts?: object };
        expect(fromWorkerOps.body, path).toEqual(
          apiBody.parts ? { ...apiBody, parts: { ...apiBody.parts, queue: true } } : apiBody,
        );
        expect(fromWorkerOps.headers.get('content-type')).toBe(
          fromApiOps.headers.get('content-type'),
        );
      }
      expect(await getJson(workerUrl, '/readyz')).toMatchObject({
        status: 200,
        body: { s: 'ok', result: 'ready', parts: { redis: true, redisWrites: true, queue: true } },
      });
      expect((await getJson(workerUrl, '/nothing')).body).toMatchObject({
        s: 'error',
        result: 'Not found',
      });
      expect((await getJson(workerUrl, '/healthz')).body).toEqual({ s: 'ok', result: 'live' });
    } finally {
      await worker.close();
      await gw.close();
    }
  });

  it('ROLE=all in one process: API and worker share one registry, nothing registered twice', async () => {
    const redisUrl = inject('redisUrl');
    const sim = await startRpcSimulator({ chain: seedDemo() });
    const config = testConfig({ RPC_URL: sim.url, ROLE: 'all' });
    const { logger } = memoryLogger();
    // What main.ts does for ROLE=all: one registry, the API, then the worker.
    const metrics = createMetrics(new Registry());
    const api = await startApi(config, metrics, logger, { serveMetrics: false });
    const worker = await startWorker(config, metrics, logger, { serveMetrics: true });
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    try {
      const apiUrl = baseUrlOf(api.app);
      expect((await fetch(`${apiUrl}/subdomains/demo`)).status).toBe(200);
      // Never on the public port; the worker's serves the one registry, the API's lookups too.
      expect((await fetch(`${apiUrl}/metrics`)).status).toBe(404);
      expect(api.metricsPort).toBeUndefined();
      const fromWorker = await scrape(`http://127.0.0.1:${worker.metricsPort}/metrics`);
      expect(fromWorker.duplicates).toEqual([]);
      expect(value(fromWorker, 'sns_cache_lookups_total', { result: 'miss' })).toBe(1);
      expect(value(fromWorker, 'sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
      // Registering the contract a second time on that registry is what would throw.
      expect(() => createMetrics(metrics.registry, { defaultMetrics: false })).toThrow(
        /already been registered/,
      );
    } finally {
      await api.close();
      await worker.close();
      await sim.close();
      await deletePrefix(redis, config.QUEUE_PREFIX);
      redis.disconnect();
    }
  });

  it('main.ts with ROLE=all serves /metrics on the worker port alone, from one registry', async () => {
    const redisUrl = inject('redisUrl');
    const sim = await startRpcSimulator({ chain: seedDemo() });
    const prefix = uniquePrefix();
    const port = await freePort();
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    let child: MainProcess | undefined;
    try {
      child = await spawnMain({
        ROLE: 'all',
        REDIS_URL: redisUrl,
        RPC_URL: sim.url,
        QUEUE_PREFIX: prefix,
        PORT: String(port),
        HOST: '127.0.0.1',
      });
      const { workerMetricsPort } = child.started as { workerMetricsPort: number };
      expect((await fetch(`http://127.0.0.1:${port}/subdomains/bonfida`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404);
      const exp = await scrape(`http://127.0.0.1:${workerMetricsPort}/metrics`);
      expect(exp.duplicates).toEqual([]);
      expect(value(exp, 'sns_rpc_credits_total')).toBe(10);
      expect(value(exp, 'sns_cache_lookups_total', { result: 'miss' })).toBe(1);
      for (const { name, type } of METRICS_TABLE) expect(exp.families[name]?.type).toBe(type);
      expect((await child.kill('SIGTERM')).code).toBe(0);
    } finally {
      await child?.kill('SIGKILL');
      await sim.close();
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  });
});

describe('outcome constants (src/core/metrics.ts)', () => {
  it.each([
    ['sns_refresh_jobs_total', REFRESH_OUTCOME],
    ['sns_ws_notifications_total', WS_NOTIFICATION_OUTCOME],
    ['sns_deletion_checks_total', DELETION_CHECK_OUTCOME],
  ])('%s: exactly the outcomes the table lists, each keyed by itself', (name, outcomes) => {
    const listed = METRICS_TABLE.find((row) => row.name === name)?.values['outcome'];
    expect(Object.values(outcomes).sort()).toEqual([...(listed ?? [])].sort());
    for (const [key, value] of Object.entries(outcomes)) expect(value).toBe(key);
  });
});
