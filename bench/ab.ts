/**
 * `npm run bench:ab -- --base REV`: the gateway's API as it is in this checkout (with uncommitted
 * changes) against the same API at git revision REV, side by side with the ceiling, under one
 * load scenario of bench/run.ts. For telling whether a change to a hot path helps: the three
 * share the run's seconds in alternating slices, so this shared machine's slow phases fall on all
 * of them alike, and a difference of a few percent stands out of the noise that separate runs of
 * `npm run bench` have (±10%).
 *
 * REV is checked out into a temporary git worktree (removed at the end) that uses this checkout's
 * node_modules; its bench/child.ts must speak the same IPC as this one's. Both APIs share one
 * Redis prefix, simulator and worker (this checkout's).
 *
 * Options, how long it takes and what it writes: `npm run bench:ab -- --help` (the spec below).
 * Environment: `REDIS_URL` (redis://127.0.0.1:6379/9).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOAD_OPTIONS, parseBenchArgs } from './cli.js';
import type { Child } from './lib.js';
import {
  BENCH_REDIS_URL,
  ceilingPath,
  fmt,
  gatewayEnv,
  isScenario,
  type LoadResult,
  loadSideBySide,
  machine,
  scenarioPaths,
  SCENARIOS,
  table,
  WARM_PARENT,
  withBenchRun,
} from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench:ab',
  summary:
    "This checkout's API (uncommitted changes included) against the API at git revision REV, side " +
    'by side with the ceiling, under one load scenario, in alternating slices. Prints a table.',
  duration:
    'about 2 to 3 minutes with the defaults: 3 servers x (warmup + seconds) of load, plus start-up.',
  writes:
    'no file of the repository; a temporary git worktree of REV (under the system temporary ' +
    'directory, removed at the end).',
  options: {
    base: { value: 'REV', default: 'HEAD', description: 'git revision to compare against' },
    scenario: { value: 'NAME', default: 'warm', choices: SCENARIOS, description: 'load scenario' },
    seconds: { value: 'N', default: '30', min: 1, description: 'seconds of load per server' },
    ...LOAD_OPTIONS,
  },
});
const REDIS_URL = BENCH_REDIS_URL;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const git = (...args: string[]) =>
  execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim();

async function main(): Promise<void> {
  const scenario = flags.scenario;
  if (!isScenario(scenario)) throw new Error(`unknown scenario ${scenario} (hot, cold or warm)`);
  const rev = git('rev-parse', '--short', flags.base);
  const m = machine();
  process.stdout.write(
    `bench:ab ${scenario}: ${rev} against this checkout; ${m.cores} cores, Node ${m.node}, ` +
      `load ${m.load}\n`,
  );
  await withBenchRun(REDIS_URL, async ({ prefix, start, defer }) => {
    const worktree = mkdtempSync(path.join(os.tmpdir(), 'snsgw-ab-'));
    defer(async () => rmSync(worktree, { recursive: true, force: true }));
    git('worktree', 'add', '--detach', '--quiet', worktree, rev);
    defer(async () => git('worktree', 'remove', '--force', worktree));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(worktree, 'node_modules'));
    const sim = await start('sim');
    const env = gatewayEnv(REDIS_URL, sim.info.url as string, prefix);
    const ceiling = await start('ceiling');
    const before = await start('api', env, path.join(worktree, 'bench', 'child.ts'));
    const after = await start('api', env);
    const url = (c: Child) => `http://127.0.0.1:${c.info.port}`;
    if (scenario === 'warm') {
      await start('worker', env);
      const res = await fetch(`${url(after)}/subdomains/${WARM_PARENT}`);
      if (res.status !== 200) throw new Error(`priming /subdomains/${WARM_PARENT}: ${res.status}`);
    }
    const paths = scenarioPaths(scenario);
    const results = await loadSideBySide(
      [
        { baseUrl: url(ceiling), nextPath: () => ceilingPath(paths()), server: ceiling },
        { baseUrl: url(before), nextPath: paths, server: before },
        { baseUrl: url(after), nextPath: paths, server: after },
      ],
      {
        seconds: Number(flags.seconds),
        sliceSeconds: Number(flags.slice),
        warmupSeconds: Number(flags.warmup),
        connections: Number(flags.connections),
      },
    );
    const [top, was, now] = results as [LoadResult, LoadResult, LoadResult];
    const cpu = (r: LoadResult) => r.cpuUsPerRequest ?? NaN;
    const row = (name: string, r: LoadResult) => [
      name,
      fmt.int(r.rps),
      fmt.ms(r.p50),
      fmt.ms(r.p99),
      fmt.ms(cpu(r)),
      fmt.pct(r.rps / top.rps),
      fmt.pct(cpu(top) / cpu(r)),
      r.failures,
    ];
    const change = (a: number, b: number) =>
      `${b >= a ? '+' : ''}${(((b - a) / a) * 100).toFixed(1)}%`;
    process.stdout.write(
      `\n${table(
        [
          'server',
          'req/s',
          'p50 ms',
          'p99 ms',
          'CPU µs/req',
          'of ceiling (req/s)',
          'of ceiling (CPU)',
          'failures',
        ],
        [row('ceiling', top), row(`API at ${rev}`, was), row('API here', now)],
      )}\n\nhere vs ${rev}: req/s ${change(was.rps, now.rps)}, CPU per request ` +
        `${change(cpu(was), cpu(now))}\n`,
    );
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
