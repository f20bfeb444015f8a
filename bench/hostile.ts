/**
 * `npm run bench:hostile`: replays the attacks of two hostile reviews against gateway processes
 * (main.ts, through test/support/main-process.ts), one named scenario at a time (`--only`), each
 * writing its own section of BENCHMARKS.md:
 *
 * - `rpc` (section `hostile`): the replies of a hostile `?rpc=` server
 *   (test/support/hostile-rpc.ts), each for a burst of override requests while `/healthz` is
 *   probed every 50 ms and the configured endpoint takes cold misses; then a SIGTERM in the middle
 *   of an attack: the worst probe, the slowest cold miss, the peak RSS, the time to exit;
 * - `spend` (bench/hostile-spend.ts): an anonymous address floods made-up parents; RPC spend, what
 *   it got, whether a real parent stays followed;
 * - `drain` (bench/hostile-drain.ts): eight addresses flood a 2,000-credit day;
 * - `spent`, `shortpage` and `lostevent` (bench/hostile-proofs.ts): wrong answers marked fresh
 *   once the budget is spent, after a short `getSignaturesForAddress` page, and after a lost
 *   change event;
 * - `details` (bench/hostile-details.ts): a `/details` flood on a parent of 3,203 subdomains;
 * - `frames` (bench/hostile-frames.ts): forged slots and notification floods on the websocket;
 * - `noinfo` and `password` (bench/hostile-redis.ts): a Redis user without INFO, a wrong Redis
 *   password.
 *
 * Flags: `npm run bench:hostile -- --help`. Environment: `REDIS_URL` (the benches' database of
 * the local Redis by default, bench/lib.ts); each scenario deletes its keys (and its ACL user).
 */
import { freePort } from '../test/support/ports.js';
import { spawnMain } from '../test/support/main-process.js';
import { ATTACK_NAMES, peakRss, startHostileRpc } from '../test/support/hostile-rpc.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { parseBenchArgs } from './cli.js';
import { detailsScenario } from './hostile-details.js';
import { closeAgents, type HostileContext, type HostileScenario } from './hostile-common.js';
import { framesScenario } from './hostile-frames.js';
import { noInfoScenario, passwordScenario } from './hostile-redis.js';
import { spendScenario } from './hostile-spend.js';
import { drainScenario } from './hostile-drain.js';
import { lostEventScenario, shortPageScenario, spentScenario } from './hostile-proofs.js';
import { BENCH_REDIS_URL, benchPrefix, deleteKeysAt, machine, table, writeSection } from './lib.js';

const SCENARIO_NAMES = [
  'rpc',
  'spend',
  'drain',
  'spent',
  'shortpage',
  'lostevent',
  'details',
  'frames',
  'noinfo',
  'password',
] as const;

const flags = parseBenchArgs({
  command: 'npm run bench:hostile',
  summary:
    'Replays the attacks of two hostile reviews against gateway processes, one scenario at a ' +
    'time: rpc (the replies of a hostile ?rpc= server, with /healthz probes, cold misses and a ' +
    'SIGTERM mid-attack), spend (an anonymous flood of made-up parents: RPC spend, and whether a ' +
    'real parent stays followed), drain (eight addresses flooding a 2,000-credit day for an hour in ' +
    'a minute: the spend, and whether a new client is answered), spent (the budget spent, then a ' +
    'subdomain whose label needs a re-read: answers HIT without it), shortpage (a provider capping ' +
    'getSignaturesForAddress at three rows while six subdomains are made during a websocket drop: ' +
    "answers HIT without them), lostevent (Redis refusing the worker's PUBLISH of a change: the " +
    "API's answers HIT without it), details (a /details flood on a parent of 3,203 subdomains), " +
    'frames (forged slots and notification floods on the websocket), noinfo (a Redis user ' +
    'without INFO) and password (a wrong Redis password: credentials in the log). Prints each ' +
    "scenario's figures, beside the review's where it measured them.",
  duration:
    'about 5 minutes with the defaults (rpc about a minute, spend about --spend plus 30 s, ' +
    'details and frames about 3 × --flood plus start-up, spent and shortpage about 40 s each, lostevent about a minute, ' +
    'noinfo and password under a minute).',
  writes:
    'one section of BENCHMARKS.md per scenario run ("hostile", "hostile-spend", ' +
    '"hostile-drain", "hostile-spent", "hostile-shortpage", "hostile-lostevent", "hostile-details", "hostile-frames", "hostile-noinfo", "hostile-password"), nothing else.',
  options: {
    requests: { description: 'hostile requests per rpc attack', value: 'N', default: '16', min: 1 },
    only: {
      description: 'the scenarios to run, comma-separated',
      value: 'LIST',
      default: SCENARIO_NAMES.join(','),
      choices: SCENARIO_NAMES,
      list: true,
    },
    spend: {
      description: 'seconds of the anonymous flood of the spend scenario',
      value: 'N',
      default: '30',
      min: 10,
    },
    window: {
      description:
        "the spend scenario's CACHE_FRESH_SECONDS and COLD_MISS_WINDOW_SECONDS (the review: 60)",
      value: 'N',
      default: '10',
      min: 3,
    },
    flood: {
      description: 'seconds of each /details flood and of the notification flood',
      value: 'N',
      default: '10',
      min: 1,
    },
  },
});
const SHUTDOWN_TIMEOUT_MS = 10_000;
const log = (line: string) => process.stdout.write(`${line}\n`);

async function timedFetch(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

async function rpcAttacks(ctx: HostileContext): Promise<void> {
  const m = machine();
  const REDIS_URL = ctx.redisUrl;
  const REQUESTS = Number(flags.requests);
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
          timedFetch(`${base}/subdomains/${attack}${i}?rpc=${rpc}`),
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
          const probe = await timedFetch(`${base}/healthz`);
          worstProbe = Math.max(worstProbe, probe.status === 200 ? probe.ms : Infinity);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      while (!done) {
        const miss = await timedFetch(`${base}/subdomains/cold${cold++}`);
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
      timedFetch(`${base}/subdomains/last${i}?rpc=${rpc}`),
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

const rpcScenario: HostileScenario = { name: 'rpc', section: 'hostile', run: rpcAttacks };

const SCENARIOS: readonly HostileScenario[] = [
  rpcScenario,
  spendScenario,
  drainScenario,
  spentScenario,
  shortPageScenario,
  lostEventScenario,
  detailsScenario,
  framesScenario,
  noInfoScenario,
  passwordScenario,
];

async function main(): Promise<void> {
  const only = new Set(flags.only.split(',').map((s) => s.trim()));
  const ctx: HostileContext = {
    // The benches' database (not 0), unless REDIS_URL names one.
    redisUrl: BENCH_REDIS_URL,
    spendSeconds: Number(flags.spend),
    windowSeconds: Number(flags.window),
    floodSeconds: Number(flags.flood),
    log,
  };
  const failed: string[] = [];
  for (const scenario of SCENARIOS) {
    if (!only.has(scenario.name)) continue;
    log(`--- ${scenario.name}`);
    try {
      await scenario.run(ctx);
    } catch (err) {
      // One scenario's failure leaves the others' figures to take.
      failed.push(scenario.name);
      process.stderr.write(
        `bench:hostile ${scenario.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    } finally {
      closeAgents();
    }
  }
  if (failed.length > 0) throw new Error(`scenarios failed: ${failed.join(', ')}`);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench:hostile failed: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
