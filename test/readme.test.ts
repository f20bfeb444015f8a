import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedDemo, startGateway, type Gateway } from './support/gateway.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';

/**
 * The README's examples, run. Every fenced block tagged `sh example` is followed by one tagged
 * `text output`: what it prints. They run in the order of the file (the
 * walkthrough's changes to the chain show in later answers) against a gateway started as the
 * Quick start starts it, with the simulator's demo chain, and their output must be the block
 * after them, but for the volatile values named in {@link VOLATILE}.
 */

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The placeholders an output block may hold for a value that changes between runs. */
const VOLATILE: Readonly<Record<string, string>> = {
  // `Age`: whole seconds since the worker read the list.
  '<seconds>': '\\d+',
};

/** Where the Quick start runs things (the simulator's default port, the API's). */
const README_API = 'localhost:3000';
const README_SIM = 'localhost:8899';
const README_WORKER_METRICS = 'localhost:9101';
const README_RPC_URL = 'http://127.0.0.1:8899';

type Example = { line: number; commands: string[]; expected: string };

/** The example blocks and their outputs, in the order of the file. */
function examples(readme: string): Example[] {
  const found: Example[] = [];
  const pair = /```sh example\n([^]*?)```\n\n```text output\n([^]*?)```/g;
  for (const m of readme.matchAll(pair)) {
    const [, script = '', expected = ''] = m;
    const commands = script
      .replace(/\\\n\s*/g, '')
      .split('\n')
      .filter((l) => l.trim() !== '');
    const line = readme.slice(0, m.index).split('\n').length;
    found.push({ line, commands, expected: expected.replace(/\n$/, '') });
  }
  return found;
}

/** The variables the Quick start's `npm start` line sets. */
function startEnv(readme: string): Record<string, string> {
  const quick = readme.slice(readme.indexOf('## Quick start'));
  const line = /^((?:[A-Z_]+=\S+ )+)npm start\b/m.exec(quick)?.[1];
  if (!line) throw new Error('README: no `VAR=value npm start` line in the Quick start');
  return Object.fromEntries(
    line
      .trim()
      .split(/\s+/)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
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

describe('the README', () => {
  it('tags its examples in pairs, the Quick start first', () => {
    const tagged = README.split('```sh example').length - 1;
    expect(tagged).toBeGreaterThan(5);
    expect(examples(README)).toHaveLength(tagged);
    expect(README.indexOf('## Quick start')).toBeLessThan(README.indexOf('## What it is for'));
    expect(startEnv(README)).toEqual({ HOT_KEYS_MIN_CLIENTS: '1', RPC_URL: README_RPC_URL });
  });

  it('keeps placeholders to the named ones', () => {
    for (const { line, expected } of examples(README)) {
      for (const placeholder of expected.match(/<[a-z -]+>/g) ?? []) {
        expect(Object.keys(VOLATILE), `line ${line}`).toContain(placeholder);
      }
    }
  });
});

describe('the README examples, against the demo chain', () => {
  let sim: RpcSimulator;
  let gw: Gateway;
  let workerMetrics: Server;
  beforeAll(async () => {
    sim = await startRpcSimulator({ chain: seedDemo() });
    // The README's RPC_URL is the simulator's default address: here, this simulator's.
    const env = { ...startEnv(README) };
    delete env.RPC_URL;
    // As `npm start` runs: the websocket on (the test default is off), derived from RPC_URL.
    gw = await startGateway({
      sim,
      env: { ...env, RPC_URL: sim.url, RPC_WS: 'on', RPC_WS_URL: sim.wsUrl },
    });
    // The worker's metrics, as `npm start` serves them on WORKER_METRICS_PORT (the test harness
    // does not: the worker and the API share this registry).
    workerMetrics = createServer((_req, res) => {
      void gw.metrics.registry.metrics().then((text) => res.end(text));
    });
    await new Promise<void>((resolve) => workerMetrics.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => workerMetrics.close(resolve));
    await gw.close();
    await sim.close();
  });

  const here = (command: string) =>
    command
      .replaceAll(README_API, new URL(gw.baseUrl).host)
      .replaceAll(README_SIM, new URL(sim.url).host)
      .replaceAll(
        README_WORKER_METRICS,
        `127.0.0.1:${(workerMetrics.address() as AddressInfo).port}`,
      );

  for (const example of examples(README)) {
    it(`line ${example.line}: ${example.commands.at(-1) ?? ''}`, { timeout: 40_000 }, async () => {
      const outputs: string[] = [];
      for (const command of example.commands) {
        const { stdout } = await run('bash', ['-o', 'pipefail', '-c', here(command)], {
          timeout: 30_000,
        });
        const text = stdout.replaceAll('\r', '').replace(/\n$/, '');
        if (text !== '') outputs.push(text);
      }
      const actual = outputs.join('\n');
      if (!outputPattern(example.expected).test(actual)) expect(actual).toBe(example.expected);
    });
  }
});
