/**
 * Reading Prometheus text exposition in tests: scrape an endpoint, parse it with an npm parser
 * (prom2javascript), sum samples by label subset, and lint it with `promtool` when installed.
 */
import { spawnSync } from 'node:child_process';
import {
  getMetricsFromIterator,
  type PromData,
  type PromHistogramData,
  type PromLabels,
  type PromMetrics,
} from 'prom2javascript';

/** The content type of text format 0.0.4, what prom-client's registry serves. */
export const PROMETHEUS_CONTENT_TYPE = /^text\/plain; version=0\.0\.4; charset=utf-8$/;

export type Exposition = {
  /** The body as served. */
  text: string;
  /** Families by name (`sns_rpc_requests_total`, `http_request_duration_seconds`, ...). */
  families: PromMetrics;
  /** Names with more than one `# TYPE` line: a metric registered twice. */
  duplicates: string[];
};

/**
 * Parses text exposition. Throws on a line the parser cannot read and on a histogram whose `+Inf`
 * bucket differs from its `_count`.
 */
export async function parseExposition(text: string): Promise<Exposition> {
  const families = await getMetricsFromIterator(text.split('\n')[Symbol.iterator]());
  const seen = new Set<string>();
  const duplicates: string[] = [];
  for (const line of text.split('\n')) {
    const name = /^# TYPE (\S+) /.exec(line)?.[1];
    if (name === undefined) continue;
    if (seen.has(name)) duplicates.push(name);
    seen.add(name);
  }
  return { text, families, duplicates };
}

/** GETs `url` (a `/metrics` endpoint), checks status and content type, and parses the body. */
export async function scrape(url: string): Promise<Exposition> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status}: ${text.slice(0, 200)}`);
  const type = res.headers.get('content-type') ?? '';
  if (!PROMETHEUS_CONTENT_TYPE.test(type)) throw new Error(`${url}: content-type ${type}`);
  return parseExposition(text);
}

const matches = (labels: PromLabels, want: PromLabels) =>
  Object.entries(want).every(([k, v]) => labels[k] === v);

/** The samples of a counter or gauge family (empty when the family is absent). */
export function samples(exp: Exposition, name: string): PromData[] {
  const family = exp.families[name];
  if (!family || family.type === 'histogram' || family.type === 'summary') return [];
  return family.data as PromData[];
}

/** The series of a histogram family (empty when the family is absent). */
export function histograms(exp: Exposition, name: string): PromHistogramData[] {
  const family = exp.families[name];
  if (!family || family.type !== 'histogram') return [];
  return family.data as PromHistogramData[];
}

/** Sum of a counter's or gauge's samples whose labels include `labels` (0 when none match). */
export function value(exp: Exposition, name: string, labels: PromLabels = {}): number {
  return samples(exp, name)
    .filter((s) => matches(s.labels, labels))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Sum of `_count` over a histogram's series whose labels include `labels`. */
export function histogramCount(exp: Exposition, name: string, labels: PromLabels = {}): number {
  return histograms(exp, name)
    .filter((h) => matches(h.labels, labels))
    .reduce((sum, h) => sum + h.count, 0);
}

/** Every label set of a family's series (`le` of histogram buckets excluded). */
export function labelSets(exp: Exposition, name: string): PromLabels[] {
  const family = exp.families[name];
  if (!family) return [];
  return (family.data as Array<{ labels: PromLabels }>).map((s) => s.labels);
}

/** Whether an executable answers `--version` (so it is installed and runs). */
export function hasBinary(name: string): boolean {
  const run = spawnSync(name, ['--version'], { stdio: 'ignore', timeout: 10_000 });
  return run.error === undefined && run.status === 0;
}

/**
 * prom-client's default metrics that `promtool check metrics` lints (gauges named `*_total`).
 * They are prom-client's names, not ours; anything else promtool reports is a finding.
 */
const PROM_CLIENT_LINT = /^nodejs_active_(handles|requests|resources)_total non-counter metrics/;

/**
 * Runs `promtool check metrics` (Prometheus' own parser and linter) over `text`.
 *
 * @returns the problems it reported, minus prom-client's known default-metric lints; a parse
 *   error is returned as a problem too.
 */
export function promtoolProblems(text: string): string[] {
  const run = spawnSync('promtool', ['check', 'metrics'], {
    input: text,
    encoding: 'utf8',
    timeout: 20_000,
  });
  if (run.error) throw run.error;
  const lines = `${run.stdout}\n${run.stderr}`
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  // Exit 0: clean; 3: lint problems only (listed); anything else: it could not parse.
  if (run.status !== 0 && run.status !== 3) return [`promtool exit ${run.status}`, ...lines];
  return lines.filter((l) => !PROM_CLIENT_LINT.test(l));
}
