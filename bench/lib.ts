/**
 * Shared pieces of the benchmarks: child processes spoken to over IPC, an autocannon run with
 * sub-millisecond percentiles, the machine's description, and BENCHMARKS.md sections.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import * as prettier from 'prettier';
import { deletePrefix } from '../test/support/redis-keys.js';
import { LOCAL_REDIS, withTestDatabase } from '../test/support/shared-redis.js';
import type { ChildInfo, ChildStats } from './gateway-ipc.js';

export type Role = 'api' | 'worker' | 'baseline' | 'ceiling' | 'sim';

type Reply = { id: number; result?: unknown; error?: string };

/** How long a child may take to start (the large parent's seeding is a request, not start-up). */
const READY_TIMEOUT_MS = 60_000;

/** The roles that are the gateway itself. */
const isGateway = (role: Role): boolean => role === 'api' || role === 'worker';

/**
 * One process of the benchmark (bench/child.ts in a role), started with `tsx` so it runs the
 * TypeScript sources as they are. Requests are IPC messages answered by id.
 */
export class Child {
  private nextId = 1;
  private readonly pending = new Map<number, (reply: Reply) => void>();

  private constructor(
    readonly role: Role,
    private readonly proc: ChildProcess,
    /** What the child sent when ready (its port, for the servers). */
    readonly info: ChildInfo,
  ) {
    proc.on('message', (msg: Reply) => this.pending.get(msg.id)?.(msg));
    // A child that died answers nothing: fail what waits on it instead of hanging.
    proc.once('exit', (code, signal) => {
      const error = `exited (${signal ?? code})`;
      for (const [id, settle] of [...this.pending]) settle({ id, error });
    });
  }

  /**
   * Forks bench/child.ts as `role` with `env` added to this process's environment; `script` runs
   * another checkout's child.ts instead (bench/ab.ts). With `BENCH_CODE=dist` in the environment,
   * the gateway's roles (`api`, `worker`) run the compiled build instead, with plain `node` and
   * nothing else loaded (dist/bench/gateway-child.js; `npm run bench:build` writes it).
   */
  static async start(
    role: Role,
    env: Record<string, string> = {},
    script?: string,
  ): Promise<Child> {
    const compiled = script === undefined && process.env.BENCH_CODE === 'dist' && isGateway(role);
    const file = compiled
      ? fileURLToPath(new URL('../dist/bench/gateway-child.js', import.meta.url))
      : (script ?? fileURLToPath(new URL('./child.ts', import.meta.url)));
    if (compiled && !existsSync(file)) throw new Error(`${file} is missing: npm run bench:build`);
    const proc = fork(file, [role], {
      execArgv: compiled ? [] : ['--import', 'tsx'],
      env: { ...process.env, ...env },
      // The gateway logs JSON lines to stdout, as in production; the bench discards them.
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const info = await new Promise<ChildInfo>((resolve, reject) => {
      const fail = (why: string) => {
        clearTimeout(timer);
        proc.off('exit', onExit);
        // A child that did not get ready is nobody's to stop: kill it here.
        proc.kill('SIGKILL');
        reject(new Error(`${role}: ${why}`));
      };
      const onExit = (code: number | null) => fail(`exited with ${code}`);
      const timer = setTimeout(
        () => fail(`not ready after ${READY_TIMEOUT_MS} ms`),
        READY_TIMEOUT_MS,
      );
      proc.once('exit', onExit);
      proc.once('message', (msg: { ready?: ChildInfo }) => {
        if (!msg.ready) return fail('unexpected first message');
        clearTimeout(timer);
        proc.off('exit', onExit);
        resolve(msg.ready);
      });
    });
    return new Child(role, proc, info);
  }

  /** Sends `cmd` and waits for the child's answer. */
  request<T = unknown>(cmd: string, args?: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      if (!this.proc.connected) {
        reject(new Error(`${this.role}: not running`));
        return;
      }
      const settle = (reply: Reply) => {
        this.pending.delete(id);
        if (reply.error !== undefined) reject(new Error(`${this.role}: ${reply.error}`));
        else resolve(reply.result as T);
      };
      this.pending.set(id, settle);
      // With a callback, a failed send is this request's failure, not an unhandled 'error' event.
      this.proc.send({ id, cmd, args }, (err) => {
        if (err) settle({ id, error: err.message });
      });
    });
  }

  stats(): Promise<ChildStats> {
    return this.request<ChildStats>('stats');
  }

  /** Asks the child to close what it opened and exit; kills this child (only) after 15 s. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    this.request('stop').catch(() => undefined);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * The Redis of a benchmark: `REDIS_URL`, else 127.0.0.1:6379, in the tests' database (9) unless
 * the URL names one (test/support/shared-redis.ts).
 */
export const BENCH_REDIS_URL = withTestDatabase(process.env.REDIS_URL ?? LOCAL_REDIS);

/**
 * The environment of a gateway process (API or worker) of a benchmark: `redisUrl` under the
 * run's own key `prefix`, the simulator at `rpcUrl`, ephemeral ports on loopback, entries fresh
 * for an hour (no refresh during a measurement), a cold miss allowed to wait two minutes (the
 * large parent) and no websocket. `extra` overrides any of them.
 */
export function gatewayEnv(
  redisUrl: string,
  rpcUrl: string,
  prefix: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    REDIS_URL: redisUrl,
    RPC_URL: rpcUrl,
    QUEUE_PREFIX: prefix,
    PORT: '0',
    HOST: '127.0.0.1',
    WORKER_METRICS_PORT: '0',
    // Both metrics ports ephemeral: a fixed one collides with any other gateway on the machine.
    API_METRICS_PORT: '0',
    CACHE_FRESH_SECONDS: '3600',
    SUBDOMAINS_WAIT_MS: '120000',
    LOG_LEVEL: 'info',
    // Off unless a bench follows the chain (bench/freshness.ts): the others measure the API.
    RPC_WS: 'off',
    ...extra,
  };
}

/** What a benchmark script runs with: see {@link withBenchRun}. */
export type BenchRun = {
  /** This run's Redis key prefix. */
  readonly prefix: string;
  /** {@link Child.start}, the child stopped at the end. */
  start: (...args: Parameters<typeof Child.start>) => Promise<Child>;
  /** Adds a clean-up step, run after the children stopped (the last added first). */
  defer: (step: () => Promise<unknown>) => void;
};

/**
 * Runs a benchmark script's `body` and then cleans up whether it returned or threw: the children
 * it started are stopped (the last started first), the keys under its prefix deleted from
 * `redisUrl` (only those: never the whole database), and its deferred steps run.
 */
export async function withBenchRun<T>(
  redisUrl: string,
  body: (run: BenchRun) => Promise<T>,
): Promise<T> {
  const prefix = benchPrefix();
  const children: Child[] = [];
  const deferred: Array<() => Promise<unknown>> = [];
  try {
    return await body({
      prefix,
      start: async (...args) => {
        const child = await Child.start(...args);
        children.push(child);
        return child;
      },
      defer: (step) => deferred.push(step),
    });
  } finally {
    for (const child of children.reverse()) await child.stop().catch(() => undefined);
    const deleted = await deleteKeysAt(redisUrl, prefix).catch(() => -1);
    process.stderr.write(`deleted ${deleted} Redis keys under ${prefix}\n`);
    for (const step of deferred.reverse()) await step().catch(() => undefined);
  }
}

/** A key prefix of this run alone, deleted at the end. */
export const benchPrefix = () => `snsgw-bench-${process.pid}-${randomBytes(4).toString('hex')}`;

/**
 * {@link deletePrefix} (test/support/redis-keys.ts) on the Redis at `redisUrl`, through a
 * connection of its own, for scripts that hold none.
 *
 * @returns how many keys were deleted.
 */
export async function deleteKeysAt(redisUrl: string, prefix: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    return await deletePrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

export type LoadResult = {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  /** Answers that were not 2xx, plus connection errors and time-outs. */
  failures: number;
  /** CPU time the server process spent per request, in microseconds (when it was measured). */
  cpuUsPerRequest?: number;
};

const toError = (err: unknown): Error =>
  err instanceof Error ? err : new Error(typeof err === 'string' ? err : 'autocannon failed');

/** The q-quantile of sorted values (nearest rank). */
export function quantile(sorted: Float64Array | number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] as number;
}

type Slice = { requests: number; seconds: number; failures: number };

/**
 * One autocannon run of `seconds` at `connections` closed-loop connections; `nextPath` picks each
 * request's path (the load generator does the same work for every server compared). With
 * `latencies`, each response time is pushed there (autocannon's own histogram rounds to whole
 * milliseconds).
 */
async function drive(
  baseUrl: string,
  nextPath: () => string,
  seconds: number,
  connections: number,
  latencies?: number[],
): Promise<Slice> {
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: baseUrl,
        connections,
        duration: seconds,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: nextPath() }) }],
      },
      (err: unknown, res) => (err ? reject(toError(err)) : resolve(res)),
    );
    if (latencies) {
      instance.on('response', (_client, _status, _bytes, responseTime) => {
        latencies.push(responseTime);
      });
    }
  });
  return {
    requests: result.requests.total,
    seconds: result.duration,
    failures: result.non2xx + result.errors + result.timeouts,
  };
}

/** A server under load: where to send requests, which paths, and its process (for CPU time). */
export type Contender = { baseUrl: string; nextPath: () => string; server?: Child };
export type LoadOptions = { seconds: number; warmupSeconds: number; connections: number };

/**
 * Drives each contender for `seconds` in all, after an unrecorded warm-up of `warmupSeconds`, in
 * alternating slices of at most `sliceSeconds` (A B B A A B…): on a shared machine, slow phases
 * then fall on every contender alike instead of on whichever ran during them, so ratios taken in
 * one run compare like with like. With one contender it is a plain run. The CPU time a
 * contender's process spent is reported per request: unlike requests per second, it barely
 * depends on what else the machine is doing.
 */
export async function loadSideBySide(
  contenders: Contender[],
  opts: LoadOptions & { sliceSeconds?: number },
): Promise<LoadResult[]> {
  for (const c of contenders) {
    if (opts.warmupSeconds > 0) {
      await drive(c.baseUrl, c.nextPath, opts.warmupSeconds, opts.connections);
    }
  }
  const slices = Math.max(1, Math.ceil(opts.seconds / (opts.sliceSeconds ?? opts.seconds)));
  const sliceSeconds = Math.max(1, Math.round(opts.seconds / slices));
  const totals = contenders.map(() => ({
    requests: 0,
    seconds: 0,
    failures: 0,
    cpuUs: 0,
    latencies: [] as number[],
  }));
  for (let round = 0; round < slices; round++) {
    const order = contenders.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) {
      const c = contenders[i] as Contender;
      const t = totals[i] as (typeof totals)[number];
      const before = await c.server?.stats();
      const slice = await drive(c.baseUrl, c.nextPath, sliceSeconds, opts.connections, t.latencies);
      const after = await c.server?.stats();
      t.requests += slice.requests;
      t.seconds += slice.seconds;
      t.failures += slice.failures;
      if (before && after) t.cpuUs += after.cpuUs - before.cpuUs;
    }
  }
  return contenders.map((c, i) => {
    const t = totals[i] as (typeof totals)[number];
    const sorted = Float64Array.from(t.latencies).sort();
    return {
      requests: t.requests,
      rps: t.requests / t.seconds,
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      failures: t.failures,
      ...(c.server ? { cpuUsPerRequest: t.cpuUs / t.requests } : {}),
    };
  });
}

/** {@link loadSideBySide} of one server. */
export async function load(
  baseUrl: string,
  nextPath: () => string,
  opts: LoadOptions & { server?: Child },
): Promise<LoadResult> {
  const [result] = await loadSideBySide([{ baseUrl, nextPath, server: opts.server }], opts);
  return result as LoadResult;
}

/** Cores, CPU model, Node version, load average at the start: the first lines of a report. */
export function machine(): { cores: number; cpu: string; node: string; load: string } {
  return {
    cores: os.availableParallelism(),
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    load: os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  };
}

/** Where a bench ran: {@link machine}, Redis's version and database, the code under test. */
export type BenchSetting = ReturnType<typeof machine> & {
  redis: string;
  code: string;
  database: string;
};

/** {@link BenchSetting} at the start of a run on `redisUrl`. */
export async function benchSetting(redisUrl: string): Promise<BenchSetting> {
  return {
    ...machine(),
    redis: await redisVersion(redisUrl),
    code: codeUnderTest(),
    database: new URL(redisUrl).pathname.slice(1) || '0',
  };
}

/** The Redis server's version (INFO server), or 'unknown' when INFO is refused. */
export async function redisVersion(redisUrl: string): Promise<string> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    return /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  } finally {
    redis.disconnect();
  }
}

/** A target's cell in a report's table of targets. */
export const met = (ok: boolean) => (ok ? 'yes' : '**no**');

/**
 * Prints a report, then writes it as the section `name` of BENCHMARKS.md ({@link writeSection})
 * when `write`, saying which it did and how long the run took (`tookS`, seconds).
 */
export async function publishReport(
  name: string,
  markdown: string,
  tookS: number,
  write: boolean,
): Promise<void> {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  log(`\n${markdown}`);
  if (write) {
    await writeSection(name, markdown);
    log(`\nwrote the ${name} section of BENCHMARKS.md (${tookS.toFixed(0)} s)`);
  } else log(`\n(${tookS.toFixed(0)} s; --write no: BENCHMARKS.md left as it was)`);
}

/** The worker's /metrics text (its ops port). */
export async function workerMetricsText(worker: Child): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${worker.info.port}/metrics`);
  if (res.status !== 200) throw new Error(`worker /metrics: HTTP ${res.status}`);
  return res.text();
}

/** `sns_rpc_credits_total` of the default endpoint on the worker's /metrics, by method. */
export async function workerCredits(worker: Child): Promise<Map<string, number>> {
  const byMethod = new Map<string, number>();
  for (const line of (await workerMetricsText(worker)).split('\n')) {
    const m = /^sns_rpc_credits_total\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = new Map(
      [...(m[1] as string).matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (labels.get('endpoint') !== 'default') continue;
    const method = labels.get('method') ?? '';
    byMethod.set(method, (byMethod.get(method) ?? 0) + Number(m[2]));
  }
  return byMethod;
}

/** The sum of credits by method. */
export const creditTotal = (byMethod: Map<string, number>) =>
  [...byMethod.values()].reduce((a, b) => a + b, 0);

/** Milliseconds as seconds for a report: two decimals below 10 s, one above; `never` if unset. */
export const fmtSeconds = (ms: number | undefined) =>
  ms === undefined
    ? 'never'
    : ms >= 10_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${(ms / 1000).toFixed(2)} s`;

/** The checked-out commit, `+changes` when the code a bench runs (src, bench, tools) differs. */
export function codeUnderTest(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--', 'src', 'bench', 'tools', 'main.ts'],
      { encoding: 'utf8' },
    ).trim();
    return dirty === '' ? head : `${head}+changes`;
  } catch {
    return 'unknown';
  }
}

const BENCHMARKS_MD = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));

/**
 * Replaces the section between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` in
 * BENCHMARKS.md (appending it when absent), so hand-written text around it survives a re-run, and
 * formats the file with the project's Prettier settings (`npm run lint` checks it).
 */
export async function writeSection(name: string, markdown: string): Promise<void> {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let text = existsSync(BENCHMARKS_MD)
    ? readFileSync(BENCHMARKS_MD, 'utf8')
    : '# Benchmarks\n\nWritten by `npm run bench` and `npm run bench:memory` (bench/).\n';
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from >= 0 && to > from) text = text.slice(0, from) + block + text.slice(to + end.length);
  else text = `${text.trimEnd()}\n\n${block}\n`;
  const options = (await prettier.resolveConfig(BENCHMARKS_MD)) ?? {};
  writeFileSync(
    BENCHMARKS_MD,
    await prettier.format(text, { ...options, filepath: BENCHMARKS_MD, parser: 'markdown' }),
  );
}

/** A markdown table from a header and rows. */
export function table(header: string[], rows: Array<Array<string | number>>): string {
  const line = (cells: Array<string | number>) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export const fmt = {
  int: (n: number) => Math.round(n).toLocaleString('en-US'),
  ms: (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)),
  ratio: (n: number) => (n >= 10 ? `${n.toFixed(0)}x` : `${n.toFixed(2)}x`),
  pct: (n: number) => `${(n * 100).toFixed(0)}%`,
  bytes: (n: number) => `${(n / 1e6).toFixed(2)} MB`,
};

/** The steady-state load scenarios: 100 hot names, never-repeating names, one warm parent. */
export const SCENARIOS = ['hot', 'cold', 'warm'] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** The parent the warm scenario asks for (the simulator's demo chain has it). */
export const WARM_PARENT = '67679';

/**
 * The gateway paths of a scenario, one per call: derivations of 100 hot names cycled (a quarter
 * with two labels), of names no request has had before (a quarter with two labels), or
 * `/subdomains` of {@link WARM_PARENT}. Each call to this function starts its own sequence.
 */
export function scenarioPaths(scenario: Scenario): () => string {
  let i = 0;
  switch (scenario) {
    case 'hot':
      return () => {
        const n = i++ % 100;
        return `/record-key-v2/${n % 4 === 0 ? `sub${n}.hot${n}` : `hot${n}`}/SOL`;
      };
    case 'cold':
      return () => {
        const n = (i++).toString(36);
        return `/record-key-v2/${i % 4 === 0 ? `s${n}.p${n}` : `c${n}`}/SOL`;
      };
    case 'warm':
      return () => `/subdomains/${WARM_PARENT}`;
  }
}

/** The ceiling's path answering like `path` (bench/child.ts's `ceiling` role). */
export const ceilingPath = (path: string) => path.replace(/^\/[^/]+/, '/ceiling');

/** Whether `s` names a scenario of {@link SCENARIOS}. */
export const isScenario = (s: string): s is Scenario =>
  (SCENARIOS as readonly string[]).includes(s);

/**
 * A deterministic label generator for seeded subdomains: mostly 3 to 16 characters, some up to 26,
 * a few of 27 to 64 (longer than the inline slice), so every path of the discovery runs.
 */
export function labelMaker(seed: number): (i: number) => string {
  let state = seed >>> 0;
  const next = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return (state >>> 8) % n;
  };
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789-';
  return (i: number) => {
    const roll = next(100);
    const len = roll < 90 ? 3 + next(14) : roll < 98 ? 17 + next(10) : 27 + next(38);
    let label = '';
    for (let k = 0; k < len; k++) label += chars[next(chars.length)];
    return `${label}${i.toString(36)}`;
  };
}
