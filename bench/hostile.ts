/**
 * `npm run bench:hostile`: replays the attacks of a hostile `?rpc=` server
 * (test/support/hostile-rpc.ts) against one gateway process (`ROLE=all`, main.ts), each for a
 * burst of override requests while `/healthz` is probed every 50 ms and the configured endpoint
 * takes cold misses; then a SIGTERM in the middle of an attack. Prints and writes to BENCHMARKS.md
 * (section `hostile`): the worst probe, the slowest cold miss, what the hostile requests got, the
 * process's peak RSS, and how long the SIGTERM took. About a minute; rewrites only its section.
 *
 * Flags: `--requests N` hostile requests per attack (16), `--help`.
 */
import { freePort } from '../test/support/ports.js';
import { spawnMain } from '../test/support/main-process.js';
import { ATTACK_NAMES, peakRss, startHostileRpc } from '../test/support/hostile-rpc.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../test/support/rpc-sim/index.js';
import { parseBenchArgs } from './cli.js';
import { BENCH_REDIS_URL, benchPrefix, deleteKeysAt, machine, table, writeSection } from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench:hostile',
  summary:
    'Replays the replies of a hostile ?rpc= server (test/support/hostile-rpc.ts) against one ' +
    'gateway process (ROLE=all) while /healthz is probed and the configured endpoint takes cold ' +
    'misses, then sends a SIGTERM mid-attack; prints the worst probe, the slowest cold miss, the ' +
    'peak RSS and the time to exit.',
  duration: 'about a minute with the defaults (six attacks, each as long as its slowest request).',
  writes: 'the "hostile" section of BENCHMARKS.md, nothing else.',
  options: {
    requests: { description: 'hostile requests per attack', value: 'N', default: '16', min: 1 },
  },
});
const REQUESTS = Number(flags.requests);
const REDIS_URL = BENCH_REDIS_URL;
const SHUTDOWN_TIMEOUT_MS = 10_000;
const log = (line: string) => process.stdout.write(`${line}\n`);

async function get(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

async function main(): Promise<void> {
  const m = machine();
  const prefix = benchPrefix();
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  const hostile = await startHostileRpc();
  const port = await freePort();
  const gateway = await spawnMain({
    ROLE: 'all',
    PORT: String(port),
    HOST: '127.0.0.1',
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    RPC_URL: sim.url,
    RPC_OVERRIDE_ALLOWLIST: hostile.url,
    COLD_MISS_LIMIT: '100000',
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
  });
  const base = `http://127.0.0.1:${port}`;
  const rows: Array<Array<string | number>> = [];
  let cold = 0;
  try {
    for (const attack of ATTACK_NAMES) {
      const rpc = encodeURIComponent(`${hostile.url}/${attack}`);
      const hostileReplies = Promise.all(
        Array.from({ length: REQUESTS }, (_, i) =>
          get(`${base}/subdomains/${attack}${i}?rpc=${rpc}`),
        ),
      );
      let done = false;
      void hostileReplies.finally(() => (done = true));
      let worstProbe = 0;
      let slowestMiss = 0;
      const missStatuses = new Set<number>();
      // Probes every 50 ms; cold misses every 500 ms, under the configured endpoint's rate limit
      // (RPC_MAX_PER_SECOND, 5 by default), so their time is the gateway's, not the limiter's.
      const probes = (async () => {
        while (!done) {
          const probe = await get(`${base}/healthz`);
          worstProbe = Math.max(worstProbe, probe.status === 200 ? probe.ms : Infinity);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      while (!done) {
        const miss = await get(`${base}/subdomains/cold${cold++}`);
        slowestMiss = Math.max(slowestMiss, miss.ms);
        missStatuses.add(miss.status);
        await new Promise((r) => setTimeout(r, Math.max(0, 500 - miss.ms)));
      }
      await probes;
      const statuses = new Map<number, number>();
      for (const r of await hostileReplies)
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      const row = [
        attack,
        [...statuses].map(([s, n]) => `${n}× ${s}`).join(', '),
        worstProbe.toFixed(0),
        `${slowestMiss.toFixed(0)} (${[...missStatuses].join(', ')})`,
        (peakRss(gateway.pid) / 2 ** 20).toFixed(0),
      ];
      log(row.join(' | '));
      rows.push(row);
    }
    const rpc = encodeURIComponent(`${hostile.url}/junk`);
    const pending = Array.from({ length: 4 }, (_, i) =>
      get(`${base}/subdomains/last${i}?rpc=${rpc}`),
    );
    await new Promise((r) => setTimeout(r, 300));
    const peak = peakRss(gateway.pid);
    const started = performance.now();
    const exit = await gateway.kill('SIGTERM');
    const took = performance.now() - started;
    await Promise.all(pending);
    log(
      `SIGTERM mid-attack: exit ${exit.code} after ${took.toFixed(0)} ms; peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB`,
    );
    await writeSection(
      'hostile',
      [
        `Run ${new Date().toISOString()} on ${m.cores} cores (${m.cpu}), Node ${m.node}, load ${m.load}; ` +
          `${REQUESTS} hostile requests per attack against one process (\`ROLE=all\`, defaults).`,
        '',
        table(
          [
            'attack',
            'hostile requests got',
            'worst /healthz ms',
            'slowest default cold miss ms (status)',
            'peak RSS MiB so far',
          ],
          rows,
        ),
        '',
        `SIGTERM during a hostile decode: exit code ${exit.code} after ${took.toFixed(0)} ms ` +
          `(bound ${SHUTDOWN_TIMEOUT_MS} ms); peak RSS over the whole run ${(peak / 2 ** 20).toFixed(0)} MiB.`,
      ].join('\n'),
    );
  } finally {
    await gateway.kill('SIGKILL');
    await hostile.close();
    await sim.close();
    await deleteKeysAt(REDIS_URL, prefix);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench:hostile failed: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
