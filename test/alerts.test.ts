/**
 * The alert rules of the compose Prometheus (prometheus/alerts.yml): Prometheus' own `promtool`
 * checks them and runs their unit tests (prometheus/alerts.test.yml), and every alert carries what
 * docs/operations.md's "Alerts" section promises: a severity, a summary and a description with its value,
 * and a runbook entry there.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { binary, hasBinary } from './support/programs.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

type Rule = {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
};
type RuleFile = { groups: Array<{ name: string; rules: Rule[] }> };

function parseYaml(text: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true });
  const [error] = doc.errors;
  if (error) throw error;
  return doc.toJS();
}

const rules = (parseYaml(read('prometheus/alerts.yml')) as RuleFile).groups.flatMap((g) => g.rules);
const alerts = rules.filter((r): r is Rule & { alert: string } => r.alert !== undefined);

/** Runs promtool with `args` from the repository's root; fails the test with its output. */
function promtool(...args: string[]): string {
  const run = spawnSync(binary('promtool'), args, { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (run.error) throw run.error;
  expect(run.status, run.stdout + run.stderr).toBe(0);
  return run.stdout + run.stderr;
}

describe('prometheus/alerts.yml', () => {
  it('has the alerts docs/operations.md documents, each with a severity, a summary and its value', () => {
    expect(alerts.length).toBeGreaterThanOrEqual(12);
    const doc = read('docs/operations.md');
    const section = doc.slice(doc.indexOf('\n## Alerts'));
    expect(section.length, 'docs/operations.md has no "## Alerts" section').toBeLessThan(
      doc.length,
    );
    for (const rule of alerts) {
      expect(rule.alert).toMatch(/^Sns[A-Z][A-Za-z0-9]+$/);
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toMatch(/\{\{ \$value/);
      expect(section, `docs/operations.md "Alerts" has no entry for ${rule.alert}`).toContain(
        `\`${rule.alert}\``,
      );
    }
  });

  it('is loaded by the compose Prometheus', () => {
    const config = parseYaml(read('prometheus/prometheus.yml')) as { rule_files?: string[] };
    expect(config.rule_files).toEqual(['alerts.yml']);
  });

  it('every alert has a promtool unit test', () => {
    const tests = parseYaml(read('prometheus/alerts.test.yml')) as {
      rule_files: string[];
      tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
    };
    expect(tests.rule_files).toEqual(['alerts.yml']);
    const cases = tests.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const { alert } of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert}: no case where it fires`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert}: no case where it stays quiet`,
      ).toBe(true);
    }
  });

  it.runIf(hasBinary('promtool'))('passes promtool check rules and promtool test rules', () => {
    expect(promtool('check', 'rules', 'prometheus/alerts.yml')).toMatch(
      new RegExp(`SUCCESS: ${rules.length} rules found`),
    );
    expect(promtool('test', 'rules', 'prometheus/alerts.test.yml')).toMatch(/SUCCESS/);
  });
  if (!hasBinary('promtool')) {
    console.warn(
      'alerts.test: promtool not installed (scripts/install-test-deps.sh installs it); ' +
        'skipping `promtool check rules` and `promtool test rules`',
    );
  }
});
