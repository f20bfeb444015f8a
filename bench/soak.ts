/**
 * `npm run soak`: ten minutes of mixed load on the gateway (API and worker as child processes)
 * with faults injected, then a verdict written to BENCHMARKS.md. Not part of `npm test`.
 *
 * - Load: `--connections` loops, each sending one request after another: 40% derivations of 100
 *   hot names, 20% derivations never seen before, 30% warm `/subdomains`, 10% cold `/subdomains`
 *   (a new parent each time).
 * - Faults, in turns of 30 s (20 s healthy, then 10 s of one fault): JSON-RPC errors, 429 with
 *   Retry-After, 503, garbage bodies, hangs, slow answers; and every fifth turn Redis is killed for
 *   5 s and restarted. Redis is a private `redis-server` on a free port (append-only), so the
 *   shared one is never touched.
 * - Verdict: every request answered (none timed out without an answer), no status outside what
 *   the faults explain (see `allowed` below), no process exited, API RSS flat (last minute's
 *   median within 10% of the second minute's).
 *
 * Options, how long it takes and what it writes: `npm run soak -- --help` (the spec below).
 */
import { randomBytes } from 'node:crypto';
import { parseBenchArgs } from './cli.js';
import { startPrivateRedis } from '../test/support/private-redis.js';
import { seedDemoChain, SimChain, startRpcSimulator, type Fault } from '../tools/rpc-sim/index.js';
import { fmt, gatewayEnv, machine, table, withBenchRun, writeSection } from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run soak',
  summary:
    'Mixed load on the gateway (API and worker as child processes) with RPC faults injected in ' +
    'turns of 30 s and a private redis-server killed and restarted every fifth turn; the verdict ' +
    'is whether every request was answered with an expected status and the RSS stayed flat.',
  duration: 'about 10.5 minutes with the defaults: --seconds of load, plus start-up.',
  writes: 'BENCHMARKS.md, only the part between its bench:Soak:start and bench:Soak:end markers.',
  options: {
    seconds: { value: 'N', default: '600', min: 1, description: 'seconds of load' },
    connections: { value: 'N', default: '8', min: 1, description: 'request loops' },
    sample: { value: 'N', default: '10', min: 1, description: 'seconds between RSS samples' },
  },
});
const SECONDS = Number(flags.seconds);
const CONNECTIONS = Number(flags.connections);
const SAMPLE = Number(flags.sample);
const TURN_MS = 30_000;
const FAULT_MS = 10_000;
const REDIS_DOWN_MS = 5_000;
const WAIT_MS = 3_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

const FAULTS: Array<{ name: string; fault: Fault }> = [
  { name: 'JSON-RPC error', fault: { kind: 'rpc-error', code: -32603 } },
  { name: '429 Retry-After 1', fault: { kind: 'http', status: 429, retryAfterSeconds: 1 } },
  { name: '503', fault: { kind: 'http', status: 503 } },
  { name: 'garbage body', fault: { kind: 'garbage' } },
  { name: 'hang', fault: { kind: 'hang' } },
  { name: 'slow (1.5 s)', fault: { kind: 'delay', ms: 1_500 } },
];

type Kind = 'derive-hot' | 'derive-cold' | 'subdomains-warm' | 'subdomains-cold';
type Phase = 'healthy' | 'rpc-fault' | 'redis-down';

/**
 * Which statuses a request may get in a phase. RPC faults explain 502 on cold misses; Redis down
 * explains 500 on the subdomain route (and 502 for a miss whose refresh was cut off); 503 and 429
 * are load shedding, allowed for cold misses at any time. Derivations must always be 200.
 */
function allowed(kind: Kind, phase: Phase, status: number): boolean {
  if (status === 200) return true;
  if (kind === 'derive-hot' || kind === 'derive-cold') return false;
  if (kind === 'subdomains-cold' && (status === 503 || status === 429 || status === 502))
    return true;
  if (phase === 'redis-down' || phase === 'rpc-fault') return status === 500 || status === 502;
  return false;
}

async function main(): Promise<void> {
  const started = Date.now();
  const m = machine();
  log(
    `soak: ${SECONDS} s, ${CONNECTIONS} connections, on ${m.cores} cores (${m.cpu}), Node ${m.node}`,
  );
  const redis = await startPrivateRedis();
  await withBenchRun(redis.url, async ({ prefix, start, defer }) => {
    defer(() => redis.destroy());
    const chain = new SimChain();
    seedDemoChain(chain);
    const sim = await startRpcSimulator({ chain });
    defer(() => sim.close());
    const env = gatewayEnv(redis.url, sim.url, prefix, {
      LOG_LEVEL: 'warn',
      SUBDOMAINS_WAIT_MS: String(WAIT_MS),
      RPC_TIMEOUT_MS: '2000',
      RPC_RETRIES: '1',
      CACHE_FRESH_SECONDS: '20',
      RPC_MAX_PER_SECOND: '50',
      COLD_MISS_LIMIT: '1000000',
      WORKER_LOCK_MS: '5000',
      WORKER_STALLED_INTERVAL_MS: '5000',
    });
    const api = await start('api', env);
    const worker = await start('worker', env);
    const base = `http://127.0.0.1:${api.info.port}`;

    let phase: Phase = 'healthy';
    const counts = new Map<string, number>();
    const unexpected = new Map<string, number>();
    let unanswered = 0;
    let total = 0;
    let coldSeq = 0;
    const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

    const hot = Array.from({ length: 100 }, (_, i) => `hot${i}`);
    const warmParents = ['67679', 'demo', 'bonfida', 'empty'];
    const deadline = started + SECONDS * 1000;

    async function one(): Promise<void> {
      const r = Math.random();
      const kind: Kind =
        r < 0.4
          ? 'derive-hot'
          : r < 0.6
            ? 'derive-cold'
            : r < 0.9
              ? 'subdomains-warm'
              : 'subdomains-cold';
      const path =
        kind === 'derive-hot'
          ? `/record-key-v2/${hot[Math.floor(Math.random() * hot.length)]}/SOL`
          : kind === 'derive-cold'
            ? `/record-key-v2/c${randomBytes(6).toString('hex')}/SOL`
            : kind === 'subdomains-warm'
              ? `/subdomains/${warmParents[Math.floor(Math.random() * warmParents.length)]}`
              : `/subdomains/cold${coldSeq++}`;
      const phaseAtStart = phase;
      total++;
      try {
        const res = await fetch(base + path, { signal: AbortSignal.timeout(WAIT_MS + 5_000) });
        const body = (await res.json()) as { s?: string };
        bump(counts, `${kind} ${res.status}`);
        const ok = body.s === (res.status === 200 ? 'ok' : 'error');
        if (!ok || !(allowed(kind, phaseAtStart, res.status) || allowed(kind, phase, res.status))) {
          bump(unexpected, `${kind} ${res.status} during ${phaseAtStart}`);
        }
      } catch (err) {
        unanswered++;
        bump(unexpected, `${kind} no answer (${(err as Error).name}) during ${phaseAtStart}`);
      }
    }

    const loops = Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < deadline) await one();
    });

    // Fault schedule.
    const schedule = (async () => {
      for (let turn = 0; Date.now() + TURN_MS <= deadline; turn++) {
        await sleep(TURN_MS - FAULT_MS);
        if (turn % 5 === 4) {
          phase = 'redis-down';
          log(`${elapsed(started)} Redis killed`);
          await redis.stop();
          await sleep(REDIS_DOWN_MS);
          await redis.start();
          log(`${elapsed(started)} Redis restarted`);
          await sleep(FAULT_MS - REDIS_DOWN_MS);
        } else {
          const { name, fault } = FAULTS[turn % FAULTS.length]!;
          phase = 'rpc-fault';
          log(`${elapsed(started)} RPC fault: ${name}`);
          sim.setFaults([fault]);
          await sleep(FAULT_MS);
          sim.setFaults([]);
        }
        // Answers already under way when a fault ends still carry it for a moment.
        await sleep(WAIT_MS);
        phase = 'healthy';
      }
    })();

    const samples: Array<{ t: number; rss: number }> = [];
    const sampler = (async () => {
      while (Date.now() < deadline) {
        const { rss } = await api.stats();
        samples.push({ t: Math.round((Date.now() - started) / 1000), rss });
        await sleep(SAMPLE * 1000);
      }
    })();

    await Promise.all([...loops, sampler]);
    await schedule.catch(() => undefined);
    const apiAlive = await api.stats().then(
      () => true,
      () => false,
    );
    const workerAlive = await worker.stats().then(
      () => true,
      () => false,
    );

    const median = (xs: number[]) =>
      [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
    const window = (from: number, to: number) =>
      samples.filter((s) => s.t >= from && s.t < to).map((s) => s.rss);
    const early = median(window(60, 120));
    const late = median(window(SECONDS - 60, SECONDS + 1));
    const growth = (late - early) / early;
    const peak = Math.max(...samples.map((s) => s.rss));
    const unexpectedTotal = [...unexpected.values()].reduce((a, b) => a + b, 0);
    const pass =
      unanswered === 0 &&
      unexpectedTotal === 0 &&
      apiAlive &&
      workerAlive &&
      Math.abs(growth) <= 0.1;

    const rows = [...counts.entries()].sort().map(([k, n]) => [k, n]);
    const md = [
      `Run on ${new Date().toISOString().slice(0, 10)}: ${m.cores} cores (${m.cpu}), Node ${m.node}, ` +
        `${SECONDS} s, ${CONNECTIONS} connections, ${total} requests. Faults in turns of 30 s: 20 s ` +
        `healthy, 10 s of one RPC fault (${FAULTS.map((f) => f.name).join(', ')}), and every fifth ` +
        `turn Redis killed for 5 s and restarted.`,
      '',
      table(['request and status', 'count'], rows),
      '',
      table(
        ['check', 'result'],
        [
          ['requests without an answer', unanswered],
          ['statuses the faults do not explain', unexpectedTotal],
          ['API and worker alive at the end', apiAlive && workerAlive ? 'yes' : 'NO'],
          ['API RSS, median of minute 2', `${mb(early)} MiB`],
          ['API RSS, median of the last minute', `${mb(late)} MiB (${fmt.pct(growth)})`],
          ['API RSS, peak', `${mb(peak)} MiB`],
          ['verdict', pass ? 'pass' : 'FAIL'],
        ],
      ),
      ...(unexpectedTotal > 0
        ? [
            '',
            table(
              ['unexpected', 'count'],
              [...unexpected.entries()].map(([k, n]) => [k, n]),
            ),
          ]
        : []),
    ].join('\n');
    log(md);
    await writeSection('Soak', md);
    process.exitCode = pass ? 0 : 1;
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const elapsed = (since: number) => `[${Math.round((Date.now() - since) / 1000)} s]`;

main().catch((err: unknown) => {
  process.stderr.write(`soak failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
