/**
 * Docs that cannot drift: the names and numbers in prose that a reader acts on, held against the
 * code that has them. Variables, metrics and alerts named anywhere in the documents must exist;
 * intervals and bounds quoted in prose must be the constants'; the alert table's severities and
 * durations must be the rules'; CONTRIBUTING's file counts must count the files it lists, and those
 * files must exist. (Routes: test/http-extras.test.ts; the variables table: test/config.test.ts;
 * the examples: test/readme.test.ts.)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { MAX_BATCH_RECORDS } from '../src/api/http/routes/record-key.js';
import { PAGE_LIMIT_PATTERN } from '../src/api/http/paged-answer.js';
import { HEARTBEAT_MS } from '../src/api/subdomains/live-updates.js';
import { configSchema, loadConfig } from '../src/core/config.js';
import { MAX_ECHO_CHARS } from '../src/core/errors.js';
import { createMetrics } from '../src/core/metrics.js';
import { DEFAULT_HOST_CHECK_LIMITS } from '../src/core/rpc/endpoint.js';
import { JOIN_EVERY_MS, RELOAD_EVERY_MS } from '../worker/follow/followed-parents.js';
import { REPLAY_MAX, REPLAY_MS } from '../worker/follow/parent-index.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** Every file under `dir` (repository-relative), recursively. */
const under = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .map((f) => join(dir, f))
    .filter((f) => statSync(join(ROOT, f)).isFile());

/** The documents a reader meets (BENCHMARKS.md is figures, written by the benches). */
const DOCUMENTS = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...under('docs')].filter((f) =>
  f.endsWith('.md'),
);

/** What the project runs: every name a document may point at lives in one of these. */
const CODE = [
  'main.ts',
  'Dockerfile',
  'docker-compose.yml',
  '.ci/run',
  ...['src', 'worker', 'tools', 'bench', 'scripts', 'prometheus', 'grafana', 'test'].flatMap(under),
]
  .filter((f) => /\.(ts|mjs|lua|sh|yml|yaml)$|^Dockerfile$|^main\.ts$|^\.ci\/run$/.test(f))
  // Not this file: its own lists would vouch for themselves.
  .filter((f) => f !== 'test/docs.test.ts')
  .map(read)
  .join('\n');

/** Names the documents quote from outside the repository, and why. */
const OUTSIDE: Readonly<Record<string, string>> = {
  // The SNS SDK 4's cut-off slot for `.sol`, quoted to say what this gateway does not cover.
  SOL_TLD_CUTOFF_SLOT: '@bonfida/spl-name-service 4',
};

/** The backticked `UPPER_CASE` names of `text` (a variable, or a constant), `=value` dropped. */
const upperNames = (text: string) =>
  new Set([...text.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g)].map((m) => m[1]!));

describe('the names the documents use', () => {
  it('are variables of the schema, or names the code has', () => {
    const variables = new Set(Object.keys(configSchema.in.shape));
    const unknown: string[] = [];
    for (const doc of DOCUMENTS) {
      for (const name of upperNames(read(doc))) {
        if (variables.has(name) || name in OUTSIDE) continue;
        if (!new RegExp(`\\b${name}\\b`).test(CODE)) unknown.push(`${doc}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('name only metrics the gateway registers', () => {
    const registry = new Registry();
    createMetrics(registry, { defaultMetrics: false });
    const registered = new Set(registry.getMetricsAsArray().map((m) => m.name));
    const unknown: string[] = [];
    for (const doc of DOCUMENTS) {
      for (const [name] of read(doc).matchAll(/\bsns_[a-z0-9_]+\*?/g)) {
        // `sns_rpc_budget_*`: a family, which must have a member.
        if (name.endsWith('*')) {
          if (![...registered].some((m) => m.startsWith(name.slice(0, -1))))
            unknown.push(`${doc}: ${name}`);
          continue;
        }
        const base = name.replace(/_(bucket|sum|count)$/, '');
        if (!registered.has(name) && !registered.has(base)) unknown.push(`${doc}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('name only alerts prometheus/alerts.yml has', () => {
    const alerts = new Set(alertRules().map((r) => r.alert));
    const unknown: string[] = [];
    for (const doc of DOCUMENTS) {
      for (const [, name] of read(doc).matchAll(/`(Sns[A-Z][A-Za-z0-9]+)`/g)) {
        if (!alerts.has(name!)) unknown.push(`${doc}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});

type AlertRule = { alert: string; for?: string; labels?: { severity?: string } };

function alertRules(): AlertRule[] {
  const file = parseYaml(read('prometheus/alerts.yml')) as { groups: { rules: AlertRule[] }[] };
  return file.groups.flatMap((g) => g.rules);
}

/** The ways the alert table writes a rule's `for`: `5m` -> `5 min`; `1h` -> `1 h` or `60 min`. */
function durations(duration: string): string[] {
  const match = /^(\d+)([mh])$/.exec(duration);
  if (!match) throw new Error(`unexpected alert duration ${duration}`);
  const n = Number(match[1]);
  return match[2] === 'h' ? [`${n} h`, `${n * 60} min`] : [`${n} min`];
}

describe('docs/operations.md, "Alerts"', () => {
  it("gives each alert its rule's severity and duration", () => {
    const rows = read('docs/operations.md')
      .split('\n')
      .filter((l) => l.startsWith('| `Sns'));
    const rules = alertRules();
    expect(rows).toHaveLength(rules.length);
    for (const rule of rules) {
      const row = rows.find((r) => r.startsWith(`| \`${rule.alert}\` `)) ?? '';
      const [, , severity = '', when = ''] = row.split('|').map((c) => c.trim());
      expect(severity, rule.alert).toBe(rule.labels?.severity);
      // Without `for`, a rule fires at its first evaluation: the row then names no duration.
      if (rule.for === undefined) expect(when, rule.alert).not.toMatch(/\(\d+ (min|h)\)/);
      else expect(when, rule.alert).toMatch(new RegExp(`\\((${durations(rule.for).join('|')})\\)`));
    }
  });
});

/**
 * A number the prose states, found by `pattern` (its first group) in `doc`, and the value the code
 * has. Each claim names where the value lives.
 */
type Claim = { doc: string; pattern: RegExp; value: number; from: string };

const CLAIMS: Claim[] = [
  {
    doc: 'docs/design.md',
    pattern: /reads the parents asked for or written lately every (\d+) s/,
    value: JOIN_EVERY_MS / 1000,
    from: 'JOIN_EVERY_MS',
  },
  {
    doc: 'docs/design.md',
    pattern: /and the whole registry every (\d+) s/,
    value: RELOAD_EVERY_MS / 1000,
    from: 'RELOAD_EVERY_MS',
  },
  {
    doc: 'docs/design.md',
    pattern: /under no followed parent are kept for (\d+) s/,
    value: REPLAY_MS / 1000,
    from: 'REPLAY_MS',
  },
  {
    doc: 'docs/design.md',
    pattern: /are kept for \d+ s \(([\d,]+) at most/,
    value: REPLAY_MAX,
    from: 'REPLAY_MAX',
  },
  {
    doc: 'docs/design.md',
    pattern: /A comment `: ping` every (\d+) s/,
    value: HEARTBEAT_MS / 1000,
    from: 'HEARTBEAT_MS',
  },
  {
    doc: 'README.md',
    pattern: /`\?records=SOL,email` \(1 to (\d+)\)/,
    value: MAX_BATCH_RECORDS,
    from: 'MAX_BATCH_RECORDS',
  },
  {
    doc: 'docs/api.md',
    pattern: /It repeats at most (\d+) characters of the input/,
    value: MAX_ECHO_CHARS,
    from: 'MAX_ECHO_CHARS',
  },
  {
    doc: 'docs/api.md',
    pattern: /a lookup unsettled after (\d+) s is refused/,
    value: DEFAULT_HOST_CHECK_LIMITS.deadlineMs / 1000,
    from: 'DEFAULT_HOST_CHECK_LIMITS.deadlineMs',
  },
  {
    doc: 'docs/api.md',
    pattern: /at\s+most (\d+) lookups at once\s+per process/,
    value: DEFAULT_HOST_CHECK_LIMITS.maxInFlight,
    from: 'DEFAULT_HOST_CHECK_LIMITS.maxInFlight',
  },
  {
    doc: 'docs/api.md',
    pattern: /its result is\s+reused for (\d+) s/,
    value: DEFAULT_HOST_CHECK_LIMITS.cacheMs / 1000,
    from: 'DEFAULT_HOST_CHECK_LIMITS.cacheMs',
  },
];

describe('the numbers in prose', () => {
  it.each(CLAIMS)('$doc states $from', ({ doc, pattern, value }) => {
    const stated = pattern.exec(read(doc))?.[1];
    expect(stated, `${doc}: ${pattern.source}`).toBeDefined();
    expect(Number(stated!.replaceAll(',', ''))).toBe(value);
  });

  it("the README's first screen names the ports the configuration defaults to", () => {
    const defaults = loadConfig({});
    const line = /^npm ci && npm run demo .*$/m.exec(read('README.md'))?.[0] ?? '';
    expect(line).toContain(`the API on :${defaults.PORT},`);
    expect(line).toContain(`the worker's metrics on :${defaults.WORKER_METRICS_PORT},`);
  });

  it('docs/observability.md states the scrape interval prometheus.yml has', () => {
    const config = parseYaml(read('prometheus/prometheus.yml')) as {
      global: { scrape_interval: string };
    };
    const stated = /`prometheus` scrapes both every (\d+) s/.exec(
      read('docs/observability.md'),
    )?.[1];
    expect(`${stated}s`).toBe(config.global.scrape_interval);
  });

  it("docs/api.md states the page limit the route's schema has", () => {
    const stated = Number(/`N` is 1 to (\d+) written in decimal/.exec(read('docs/api.md'))?.[1]);
    const limit = new RegExp(PAGE_LIMIT_PATTERN);
    expect(limit.test(String(stated))).toBe(true);
    expect(limit.test(String(stated + 1))).toBe(false);
  });
});

/** The routes a table names in its first column: `GET /a/:b[?x]`, `/c` -> /a/:b, /c. */
function tableRoutes(text: string): Set<string> {
  const routes = new Set<string>();
  for (const row of text.split('\n').filter((l) => l.startsWith('| `'))) {
    for (const [, cell] of (row.split('|')[1] ?? '').matchAll(/`([^`]+)`/g)) {
      routes.add(cell!.replace(/^GET /, '').replace(/[[?].*$/, ''));
    }
  }
  return routes;
}

describe('the routes', () => {
  it("are the same in docs/design.md's endpoints table as in the README's", () => {
    const section = (text: string, heading: string) => {
      const from = text.slice(text.indexOf(`\n## ${heading}\n`) + 1);
      return from.slice(0, from.indexOf('\n## ', 1));
    };
    const readme = tableRoutes(section(read('README.md'), 'Routes'));
    const design = tableRoutes(section(read('docs/design.md'), 'Endpoints and the error contract'));
    expect(readme.size).toBeGreaterThan(10);
    expect([...design].filter((r) => r.startsWith('/')).sort()).toEqual([...readme].sort());
  });
});

describe('the history the documents tell', () => {
  it('is dated by commits and releases, not by who worked when', () => {
    for (const doc of [...DOCUMENTS, 'BENCHMARKS.md']) {
      // A socket's session (worker/follow/session.ts) is a thing of the code, not of history.
      expect(read(doc), doc).not.toMatch(
        /\bsession[ -]\d|\bsession's start\b|\b(this|that|all|in some) sessions?\b|\bthis branch\b/i,
      );
    }
  });
});

describe("CONTRIBUTING.md's recipes", () => {
  it('count the files they list, and every listed file exists', () => {
    const lines = [...read('CONTRIBUTING.md').matchAll(/^Files: (\d+) — (.+?);/gms)];
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const [, count, list = ''] of lines) {
      const files = [...list.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      expect(files, list).toHaveLength(Number(count));
      for (const file of files) {
        // `<route>` and the like stand for a name the recipe chooses: its folder must exist.
        const path = file.includes('<') ? file.slice(0, file.lastIndexOf('/')) : file;
        expect(existsSync(join(ROOT, path)), file).toBe(true);
      }
    }
  });
});
