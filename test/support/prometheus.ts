/**
 * Reading Prometheus text exposition (format 0.0.4) in tests: scrape an endpoint, parse it,
 * sum samples by label subset, and lint it with Prometheus' own `promtool` when installed.
 *
 * The reader is strict and small on purpose. The npm parsers tried first each fail on what
 * prom-client serves: `parse-prometheus-text-format` 1.1.1 folds the series of a labelled histogram
 * into one and drops their labels, and `prom2javascript` 0.2.0 rejects the `Nan` that prom-client
 * writes for an idle event-loop gauge. `promtool check metrics` (Go's reference parser) reads the
 * same text in the tests where it is installed.
 */
import { spawnSync } from 'node:child_process';
import { binary } from './programs.js';

/** The content type of text format 0.0.4, what prom-client's registry serves. */
export const PROMETHEUS_CONTENT_TYPE = /^text\/plain; version=0\.0\.4; charset=utf-8$/;

export type Labels = Record<string, string>;
export type Sample = { name: string; labels: Labels; value: number };
export type Family = {
  name: string;
  /** `counter`, `gauge`, `histogram`, `summary` or `untyped`. */
  type: string;
  help: string;
  samples: Sample[];
};

export type Exposition = {
  /** The body as served. */
  text: string;
  /** Families by name (`sns_rpc_requests_total`, `http_request_duration_seconds`, ...). */
  families: Record<string, Family>;
  /** Names with more than one `# TYPE` line: a metric registered twice. */
  duplicates: string[];
};

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const WHOLE_METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Record<string, readonly string[]> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count'],
};

/** A Go `ParseFloat` value as the format allows: decimal, `NaN`, `+Inf`, `-Inf` (any case). */
function parseValue(raw: string, line: number): number {
  const lower = raw.toLowerCase();
  if (lower === 'nan') return NaN;
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) {
    throw new Error(`line ${line}: bad value ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

/** Parses `{a="x",b="y"}` from the start of `rest`; returns the labels and what follows. */
function parseLabels(rest: string, line: number): { labels: Labels; rest: string } {
  const labels: Labels = {};
  let i = 1; // after '{'
  const fail = (why: string): never => {
    throw new Error(`line ${line}: ${why} in ${JSON.stringify(rest)}`);
  };
  for (;;) {
    while (rest[i] === ' ') i++;
    if (rest[i] === '}') return { labels, rest: rest.slice(i + 1) };
    const name = LABEL_NAME.exec(rest.slice(i))?.[0] ?? fail('bad label name');
    i += name.length;
    if (rest[i] !== '=' || rest[i + 1] !== '"') fail('expected ="');
    i += 2;
    let val = '';
    for (;;) {
      const c = rest[i++];
      if (c === undefined) fail('unterminated label value');
      if (c === '"') break;
      if (c === '\\') {
        const e = rest[i++];
        if (e === 'n') val += '\n';
        else if (e === '\\' || e === '"') val += e;
        else fail('bad escape');
      } else val += c;
    }
    if (name in labels) fail(`label ${name} twice`);
    labels[name] = val;
    while (rest[i] === ' ') i++;
    if (rest[i] === ',') i++;
    else if (rest[i] !== '}') fail('expected , or }');
  }
}

/**
 * Parses text exposition strictly: metric and label names, escapes, values (with `NaN` and
 * `±Inf`), `# TYPE` before its samples, and histograms (every series has `le` buckets, cumulative,
 * `+Inf` equal to `_count`). Throws on the first violation.
 */
export function parseExposition(text: string): Exposition {
  const families: Record<string, Family> = {};
  const duplicates: string[] = [];
  const typed = new Set<string>();
  let current: Family | undefined;
  text.split('\n').forEach((raw, index) => {
    const n = index + 1;
    const line = raw.trim();
    if (line === '') return;
    const meta = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
    if (meta) {
      const [, kind, name = '', rest = ''] = meta;
      if (!WHOLE_METRIC_NAME.test(name)) {
        throw new Error(`line ${n}: bad metric name ${name}`);
      }
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`line ${n}: bad type ${rest}`);
        if (typed.has(name)) duplicates.push(name);
        typed.add(name);
      }
      const family = (families[name] ??= { name, type: 'untyped', help: '', samples: [] });
      if (kind === 'TYPE') family.type = rest;
      else family.help = rest;
      current = family;
      return;
    }
    if (line.startsWith('#')) return;
    const name = METRIC_NAME.exec(line)?.[0];
    if (!name) throw new Error(`line ${n}: bad sample ${JSON.stringify(line)}`);
    let rest = line.slice(name.length);
    let labels: Labels = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, n));
    const parts = rest.trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || parts[0] === '') {
      throw new Error(`line ${n}: expected a value and an optional timestamp`);
    }
    const sample = { name, labels, value: parseValue(parts[0] as string, n) };
    const belongs =
      current !== undefined &&
      (name === current.name ||
        (SUFFIXES[current.type] ?? []).some((s) => name === current?.name + s));
    if (belongs && current) current.samples.push(sample);
    else {
      if (families[name]) throw new Error(`line ${n}: samples of ${name} are not together`);
      current = families[name] = { name, type: 'untyped', help: '', samples: [sample] };
    }
  });
  for (const family of Object.values(families)) {
    if (family.type === 'histogram') checkHistogram(family);
  }
  return { text, families, duplicates };
}

const seriesKey = (labels: Labels) =>
  JSON.stringify(
    Object.entries(labels)
      .filter(([k]) => k !== 'le')
      .sort(([a], [b]) => a.localeCompare(b)),
  );

function checkHistogram(family: Family): void {
  const series = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const s of family.samples) {
    const key = seriesKey(s.labels);
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (s.name.endsWith('_bucket')) {
      if (s.labels.le === undefined) throw new Error(`${s.name}: bucket without le`);
      entry.buckets.push([parseValue(s.labels.le, 0), s.value]);
    } else if (s.name.endsWith('_count')) entry.count = s.value;
  }
  for (const [key, { buckets, count }] of series) {
    const inf = buckets.find(([le]) => le === Infinity);
    if (!inf || inf[1] !== count) throw new Error(`${family.name}${key}: +Inf bucket != _count`);
    const sorted = [...buckets].sort(([a], [b]) => a - b);
    sorted.forEach(([, v], i) => {
      if (i > 0 && v < (sorted[i - 1]?.[1] ?? 0)) {
        throw new Error(`${family.name}${key}: buckets not cumulative`);
      }
    });
  }
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

const matches = (labels: Labels, want: Labels) =>
  Object.entries(want).every(([k, v]) => labels[k] === v);

/** Sum of the samples named `sample` in family `name` whose labels include `labels`. */
function sum(exp: Exposition, name: string, sample: string, labels: Labels): number {
  return (exp.families[name]?.samples ?? [])
    .filter((s) => s.name === sample && matches(s.labels, labels))
    .reduce((total, s) => total + s.value, 0);
}

/** Sum of a counter's or gauge's samples whose labels include `labels` (0 when none match). */
export function value(exp: Exposition, name: string, labels: Labels = {}): number {
  return sum(exp, name, name, labels);
}

/** Sum of `_count` over a histogram's series whose labels include `labels`. */
export function histogramCount(exp: Exposition, name: string, labels: Labels = {}): number {
  return sum(exp, name, `${name}_count`, labels);
}

/** Every label set of a family's series (histograms: of their `_count`, so without `le`). */
export function labelSets(exp: Exposition, name: string): Labels[] {
  const family = exp.families[name];
  if (!family) return [];
  const sample = family.type === 'histogram' ? `${name}_count` : name;
  return family.samples.filter((s) => s.name === sample).map((s) => s.labels);
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
  const run = spawnSync(binary('promtool'), ['check', 'metrics'], {
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
