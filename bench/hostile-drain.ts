/**
 * Scenario `drain` of `npm run bench:hostile`: the third review's budget attacks replayed against
 * a gateway with `RPC_CREDITS_PER_DAY=2000`, an hour compressed into `--spend` seconds (the
 * cold-miss window is one second, which stands for a minute). Eight addresses flood made-up and
 * real parents (the same real ones, so they are hot and refreshed ahead); then a new client asks a
 * real parent nobody asked, and the public port is asked for `/metrics`. Measures the day's
 * spend, each attacker's, and what the new client got.
 */
import { Redis } from 'ioredis';
import { redisKeys } from '../src/core/redis-keys.js';
import { utcDay } from '../src/core/rpc/budget.js';
import { spawnMain } from '../test/support/main-process.js';
import { freePort } from '../test/support/ports.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import {
  deleteRunKeys,
  duration,
  gatewayEnv,
  get,
  type HostileContext,
  runLine,
  scenario,
  sleep,
} from './hostile-common.js';
import { benchPrefix, fmt, table, writeSection } from './lib.js';

const BUDGET = 2000;
const ATTACKERS = Array.from({ length: 8 }, (_, i) => `127.0.0.${i + 11}`);
const NEWCOMER = '127.0.0.99';
const REAL_PARENTS = 60;
/** The commit of main the third review measured: the baseline this section quotes. */
const DRAIN_BASELINE = 'c6cb50e';
/** Each attacker's pace: a request every this many ms, not waiting for answers. */
const EVERY_MS = 20;

async function run(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const seconds = ctx.spendSeconds;
  const prefix = benchPrefix();
  const chain = new SimChain();
  seedDemoChain(chain);
  const real = Array.from({ length: REAL_PARENTS }, (_, i) => `realparent${i}`);
  for (const parent of real) chain.addSubdomain(parent, 'sub');
  const sim = await startRpcSimulator({ chain });
  const redis = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const keys = redisKeys(prefix);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let gateway: Awaited<ReturnType<typeof spawnMain>> | undefined;
  try {
    gateway = await spawnMain({
      ...gatewayEnv(ctx, port, prefix, sim.url),
      RPC_CREDITS_PER_DAY: String(BUDGET),
      COLD_MISS_LIMIT: '30',
      COLD_MISS_WINDOW_SECONDS: '1',
      CACHE_FRESH_SECONDS: '1',
      CACHE_STALE_SECONDS: '600',
      RPC_MAX_PER_SECOND: '500',
      WORKER_CONCURRENCY: '16',
      RPC_WS: 'off',
    });
    const day = utcDay(Date.now());
    const spent = async () => Number((await redis.get(keys.rpcCredits(day))) ?? 0);
    const statuses = new Map<number, number>();
    const started = performance.now();
    let halfAt: number | undefined;
    const watcher = (async () => {
      while (performance.now() - started < seconds * 1000) {
        if (halfAt === undefined && (await spent()) >= BUDGET / 2) {
          halfAt = performance.now() - started;
        }
        await sleep(200);
      }
    })();
    await Promise.all(
      ATTACKERS.map(async (from, a) => {
        const answers: Array<Promise<void>> = [];
        for (let i = 0; performance.now() - started < seconds * 1000; i++) {
          const parent =
            i % 3 === 0
              ? `madeup${a}x${i}x${process.pid}`
              : (real[(i * 7 + a * 13) % real.length] ?? 'bonfida');
          answers.push(
            get(`${base}/subdomains/${parent}`, from, 20_000).then((answer) => {
              statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
            }),
          );
          await sleep(EVERY_MS);
        }
        await Promise.all(answers);
      }),
    );
    await watcher;
    const floodSeconds = (performance.now() - started) / 1000;
    chain.addSubdomain('newcomer', 'first');
    const newcomer = await get(`${base}/subdomains/newcomer`, NEWCOMER, 20_000);
    const metrics = await get(`${base}/metrics`, NEWCOMER);
    await sleep(1_000);
    const total = await spent();
    const shares = await redis.hgetall(keys.rpcCreditShares(day));
    const perAttacker = ATTACKERS.map((from) => Number(shares[`client:${from}`] ?? 0));
    const statusText = [...statuses]
      .sort((x, y) => y[1] - x[1])
      .map(([s, n]) => `${fmt.int(n)}× ${s}`)
      .join(', ');
    const newcomerText = `${newcomer.status} ${String(newcomer.headers['x-cache'] ?? '')} after ${duration(newcomer.ms)}`;
    log(
      `drain: ${floodSeconds.toFixed(0)} s of 8 addresses (${statusText}); spent ${total.toFixed(0)} ` +
        `of ${BUDGET}; new client ${newcomerText}; public /metrics ${metrics.status}`,
    );
    await writeSection(
      'hostile-drain',
      [
        runLine(
          `one process (\`ROLE=all\`, \`RPC_WS=off\`), \`RPC_CREDITS_PER_DAY=${BUDGET}\`, ` +
            '`COLD_MISS_LIMIT=30` per `COLD_MISS_WINDOW_SECONDS=1` (a second stands for a minute: ' +
            `${seconds} s for ${seconds} minutes), \`CACHE_FRESH_SECONDS=1\`, ` +
            '`RPC_MAX_PER_SECOND=500`, `WORKER_CONCURRENCY=16`, the shares at their defaults ' +
            `(\`--spend ${seconds}\`); ${ATTACKERS.length} addresses each asking every ${EVERY_MS} ms, ` +
            `a third made-up parents, the rest ${REAL_PARENTS} real ones they all share`,
          DRAIN_BASELINE,
        ),
        '',
        table(
          ['measure', 'after the flood'],
          [
            ['attacker requests: what they got', statusText],
            [
              "credits spent of the day's 2,000 (the review, on c6cb50e: all of it by six addresses in 45 s)",
              `${fmt.int(Math.round(total))} (${((100 * total) / BUDGET).toFixed(0)}%)`,
            ],
            ['half the budget reached after', halfAt === undefined ? 'never' : duration(halfAt)],
            [
              'each attacker (its share: 2%, 40 credits)',
              perAttacker.map((c) => c.toFixed(0)).join(', '),
            ],
            [
              'proactive share (refresh ahead) / pool / reserve',
              `${Number(shares.proactive ?? 0).toFixed(0)} / ${Number(shares.pool ?? 0).toFixed(0)} / ${Number(shares.reserve ?? 0).toFixed(0)}`,
            ],
            [
              'a new client, a real parent nobody asked (the review: 503, Retry-After 13 h)',
              newcomerText,
            ],
            [
              '`/metrics` on the public port (the review: 200, the budget gauges)',
              String(metrics.status),
            ],
          ],
        ),
      ].join('\n'),
    );
  } finally {
    await gateway?.kill('SIGKILL');
    redis.disconnect();
    await sim.close();
    await deleteRunKeys(ctx.redisUrl, prefix);
  }
}

export const drainScenario = scenario('drain', run);
