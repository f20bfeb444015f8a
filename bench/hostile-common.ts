/**
 * Pieces the scenarios of `npm run bench:hostile` share: requests from a chosen loopback address,
 * a `/healthz` prober, a process's CPU time and Redis's output counter, and the lines every
 * section starts with.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import { codeUnderTest, deleteKeysAt, machine, quantile } from './lib.js';

/** The commit of main the second hostile review measured: the baseline its sections quote. */
export const REVIEW_BASELINE = 'bde4553';

/** What every scenario gets from bench/hostile.ts. */
export type HostileContext = {
  /** Redis for the gateway children, a database other than 0 (the run's keys are deleted). */
  readonly redisUrl: string;
  /** Seconds of the anonymous-spend flood (`--spend`). */
  readonly spendSeconds: number;
  /** The spend scenario's `CACHE_FRESH_SECONDS` and `COLD_MISS_WINDOW_SECONDS` (`--window`). */
  readonly windowSeconds: number;
  /** Seconds of the `/details` and notification floods (`--flood`). */
  readonly floodSeconds: number;
  /** Prints one line of progress or result. */
  readonly log: (line: string) => void;
};

/** One named scenario: `--only` picks them by name; each writes its own section. */
export type HostileScenario = {
  readonly name: string;
  /** Its BENCHMARKS.md section (`<!-- bench:SECTION:start -->`). */
  readonly section: string;
  readonly run: (ctx: HostileContext) => Promise<void>;
};

/**
 * The scenario `name` running `run`, writing the section `hostile-<name>` (every scenario's rule
 * but the first one's, `rpc`, whose section is `hostile`).
 */
export function scenario(name: string, run: HostileScenario['run']): HostileScenario {
  return { name, section: `hostile-${name}`, run };
}

/**
 * The environment a scenario's gateway child starts from: one process (`ROLE=all`) on loopback
 * `port`, the run's Redis and `prefix`, and `rpcUrl` (the simulator) as its RPC.
 */
export function gatewayEnv(
  ctx: HostileContext,
  port: number,
  prefix: string,
  rpcUrl: string,
): Record<string, string> {
  return {
    ROLE: 'all',
    PORT: String(port),
    HOST: '127.0.0.1',
    REDIS_URL: ctx.redisUrl,
    QUEUE_PREFIX: prefix,
    RPC_URL: rpcUrl,
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The first line of a section: when, where, and which code ran against which baseline.
 *
 * @param settings what the gateway ran with, as a sentence (no final period).
 * @param baseline the commit of main whose figures the section quotes (the second review's when
 *   absent).
 */
export function runLine(settings: string, baseline = REVIEW_BASELINE): string {
  const m = machine();
  return (
    `Run ${new Date().toISOString()} on ${m.cores} cores (${m.cpu}), Node ${m.node}, load ${m.load}; ` +
    `code under test ${codeUnderTest()}, baseline main at ${baseline} (its figures above the section); ` +
    `${settings}.`
  );
}

export type Answer = {
  /** HTTP status; 0 for a connection error or a time-out. */
  status: number;
  ms: number;
  headers: http.IncomingHttpHeaders;
  body: string;
};

const agents = new Map<string, http.Agent>();

/** A keep-alive agent whose connections leave from `localAddress` (a loopback address). */
function agentFrom(localAddress: string): http.Agent {
  let agent = agents.get(localAddress);
  if (!agent) {
    agent = new http.Agent({ keepAlive: true, maxSockets: 256, localAddress });
    agents.set(localAddress, agent);
  }
  return agent;
}

/** Closes the idle connections of every agent {@link get} made. */
export function closeAgents(): void {
  for (const agent of agents.values()) agent.destroy();
  agents.clear();
}

/**
 * GET `url` from `from` (127.0.0.x: the gateway sees another client address per source address,
 * as the cold-miss limit and the hot-parent ranking do), never throwing.
 *
 * @param timeoutMs the whole request's bound; past it the answer is status 0.
 */
export function get(url: string, from = '127.0.0.1', timeoutMs = 30_000): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: number, headers: http.IncomingHttpHeaders = {}, body = '') =>
      resolve({ status, ms: performance.now() - started, headers, body });
    const req = http.get(url, { agent: agentFrom(from), timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        done(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8')),
      );
      res.on('error', () => done(0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => done(0));
  });
}

/** User plus system CPU time `pid` has used so far, in milliseconds (Linux /proc). */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces): state is the 3rd, utime the 14th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/** `sysconf(_SC_CLK_TCK)`: the unit of /proc's CPU times; 100 on every common Linux build. */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Latency summary of a prober, in milliseconds. */
export type Probed = { count: number; failed: number; p50: number; p99: number; max: number };

/** The prober's program: GETs argv[1] every argv[2] ms until its stdin ends, then prints times. */
const PROBER = `
const [url, every] = [process.argv[1], Number(process.argv[2])];
const times = [];
let failed = 0;
let stop = false;
process.stdin.on('data', () => (stop = true)).on('end', () => (stop = true));
(async () => {
  while (!stop) {
    const started = performance.now();
    let ok = false;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(10000) });
      await res.arrayBuffer();
      ok = res.status === 200;
    } catch {}
    const ms = performance.now() - started;
    times.push(ms);
    if (!ok) failed++;
    await new Promise((r) => setTimeout(r, Math.max(0, every - ms)));
  }
  process.stdout.write(JSON.stringify({ times, failed }));
})();
`;

/**
 * Requests `url` every `everyMs` (one at a time) from a process of its own until stopped, so
 * what the bench's process does meanwhile (sending a flood, running autocannon) does not delay
 * the probes; failures (not 200, or no answer within 10 s) count as failed and their time as
 * latency.
 */
export function probe(url: string, everyMs = 50): { stop: () => Promise<Probed> } {
  const child = spawn(process.execPath, ['-e', PROBER, url, String(everyMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      process.off('exit', reap);
      resolve();
    }),
  );
  return {
    stop: async () => {
      child.stdin.end('stop\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
      let result: { times: number[]; failed: number } = { times: [], failed: 0 };
      try {
        result = JSON.parse(out) as typeof result;
      } catch {
        // killed before it printed: no probes to report
      }
      const sorted = Float64Array.from(result.times).sort();
      return {
        count: sorted.length,
        failed: result.failed,
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
        max: sorted.length ? (sorted[sorted.length - 1] as number) : NaN,
      };
    },
  };
}

/** Redis's `total_net_output_bytes` (INFO stats): every client's, the server is shared. */
export async function redisBytesSent(redisUrl: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const stats = await redis.info('stats');
    return Number(/total_net_output_bytes:(\d+)/.exec(stats)?.[1] ?? NaN);
  } finally {
    redis.disconnect();
  }
}

/** Milliseconds as the sections print them: `14 ms`, `9.0 s`. */
export const duration = (ms: number) =>
  ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`;

/**
 * Deletes the run's keys under `prefix` at `redisUrl` and, when that names another database, in
 * database 0 too: the watch leases (@sesamecare-oss/redlock) are written there whatever the URL
 * says, unless the gateway tells redlock its database. Only keys under the run's own prefix.
 */
export async function deleteRunKeys(redisUrl: string, prefix: string): Promise<void> {
  await deleteKeysAt(redisUrl, prefix);
  const zero = new URL(redisUrl);
  if (zero.pathname !== '' && zero.pathname !== '/' && zero.pathname !== '/0') {
    zero.pathname = '/0';
    await deleteKeysAt(zero.href, prefix);
  }
}
