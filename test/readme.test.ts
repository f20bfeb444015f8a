import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { waitFor } from './support/gateway.js';
import { settled } from './support/wait.js';
import { killGroup, npmRun, type NpmRun } from './support/npm-run.js';
import { freePort } from './support/ports.js';
import { inDatabase } from './support/shared-redis.js';

/**
 * The documents' examples, run. Every fenced block tagged `sh example` is followed by one tagged
 * `text output`: what it prints. They run in reading order (the README, then the documents of
 * {@link DOCUMENTS}: the walkthrough's changes to the chain show in later answers) against
 * `npm run demo`, as the README tells a new user to start it, and their output must be the block
 * after them, but for the volatile values named in {@link VOLATILE}.
 */

/** Where examples are, in the order a reader meets them. */
const DOCUMENTS = ['README.md', 'docs/api.md'];

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

/** The placeholders an output block may hold for a value that changes between runs. */
const VOLATILE: Readonly<Record<string, string>> = {
  // `Age`: whole seconds since the worker read the list.
  '<seconds>': '\\d+',
  // The registry index's state on `/readyz`: the demo's build starts, runs and ends on its own.
  '<index>': '(?:none|building|serving)',
};

/** Where the demo runs things by default, as the examples name them. */
const DEMO_API = 'localhost:3000';
const DEMO_SIM = 'localhost:8899';
const DEMO_WORKER_METRICS = 'localhost:9101';

type Example = { where: string; commands: string[]; expected: string };

/** The example blocks of `path` and their outputs, in the order of the file. */
function examples(path: string): Example[] {
  const text = read(path);
  const found: Example[] = [];
  const pair = /```sh example\n([^]*?)```\n\n```text output\n([^]*?)```/g;
  for (const m of text.matchAll(pair)) {
    const [, script = '', expected = ''] = m;
    const commands = script
      .replace(/\\\n\s*/g, '')
      .split('\n')
      .filter((l) => l.trim() !== '');
    const line = text.slice(0, m.index).split('\n').length;
    found.push({ where: `${path}:${line}`, commands, expected: expected.replace(/\n$/, '') });
  }
  return found;
}

/** `expected` as a whole-text pattern: literal, but for the {@link VOLATILE} placeholders. */
function outputPattern(expected: string): RegExp {
  let source = expected.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const [placeholder, pattern] of Object.entries(VOLATILE)) {
    source = source.split(placeholder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join(pattern);
  }
  return new RegExp(`^${source}$`);
}

const run = promisify(execFile);

describe('the documents', () => {
  it('tag their examples in pairs, and every document with examples is run', () => {
    const docs = ['README.md', ...readdirSync(new URL('../docs/', import.meta.url))]
      .map((f) => (f === 'README.md' ? f : `docs/${f}`))
      .filter((f) => f.endsWith('.md'));
    for (const doc of docs) {
      const tagged = read(doc).split('```sh example').length - 1;
      expect(examples(doc), doc).toHaveLength(tagged);
      if (tagged > 0) expect(DOCUMENTS, doc).toContain(doc);
    }
    expect(examples('README.md').length).toBeGreaterThan(4);
  });

  it('put the two commands on the first screen of the README', () => {
    const firstScreen = read('README.md').split('\n').slice(0, 30).join('\n');
    const block = /```sh\n([^]*?)```/.exec(firstScreen)?.[1] ?? '';
    expect(block).toMatch(/^npm ci && npm run demo\b/m);
    expect(block).toMatch(/^npm test\b/m);
  });

  it('keep placeholders to the named ones', () => {
    for (const { where, expected } of DOCUMENTS.flatMap(examples)) {
      for (const placeholder of expected.match(/<[a-z -]+>/g) ?? []) {
        expect(Object.keys(VOLATILE), where).toContain(placeholder);
      }
    }
  });
});

describe('the examples, against npm run demo', () => {
  let demo: NpmRun;
  const ports = { api: 0, metrics: 0, sim: 0 };
  beforeAll(async () => {
    [ports.api, ports.metrics, ports.sim] = [await freePort(), await freePort(), await freePort()];
    demo = npmRun('demo', {
      PORT: String(ports.api),
      WORKER_METRICS_PORT: String(ports.metrics),
      RPC_SIM_PORT: String(ports.sim),
      // A database of its own: the demo's keys have one prefix, which it clears at start.
      REDIS_URL: inDatabase(inject('redisUrl'), 10),
    });
    await waitFor(() => /Ctrl-C stops everything|demo: stopped/.test(demo.output()), 150_000);
    expect(demo.output()).toContain('Ctrl-C stops everything');
    // The simulator takes another port when the one after RPC_SIM_PORT is taken: read it back.
    ports.sim = Number(/curl -s localhost:(\d+) -H/.exec(demo.output())?.[1]);
  }, 180_000);
  afterAll(async () => {
    if (!demo) return;
    demo.child.kill('SIGTERM');
    try {
      expect(await settled(demo.exited, 'npm run demo stopped by SIGTERM', 40_000)).toBe(0);
    } finally {
      killGroup(demo.child);
    }
  }, 60_000);

  const here = (command: string) =>
    command
      .replaceAll(DEMO_API, `127.0.0.1:${ports.api}`)
      .replaceAll(DEMO_SIM, `127.0.0.1:${ports.sim}`)
      .replaceAll(DEMO_WORKER_METRICS, `127.0.0.1:${ports.metrics}`);

  for (const example of DOCUMENTS.flatMap(examples)) {
    it(`${example.where}: ${example.commands.at(-1) ?? ''}`, { timeout: 40_000 }, async () => {
      const outputs: string[] = [];
      for (const command of example.commands) {
        const { stdout } = await run('bash', ['-o', 'pipefail', '-c', here(command)], {
          timeout: 30_000,
        });
        // Trailing blank lines (an event stream's end of event) are not part of what is shown.
        const text = stdout.replaceAll('\r', '').trimEnd();
        if (text !== '') outputs.push(text);
      }
      const actual = outputs.join('\n');
      if (!outputPattern(example.expected).test(actual)) expect(actual).toBe(example.expected);
    });
  }
});
