/**
 * Scenario `spend` of `npm run bench:hostile`: one anonymous address asks for 150 made-up parents
 * at 20 requests a second while two other addresses ask for a real parent once a second between
 * them. Measures what the flood costs at the RPC (the simulator's recorded calls), what the
 * attacker got, and whether the real parent stays followed on the chain: how long a subdomain
 * created under it takes to show, before the flood and in its middle.
 */
import { getDomainKeySync } from '@bonfida/spl-name-service';
import { Redis } from 'ioredis';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { spawnMain } from '../test/support/main-process.js';
import { freePort } from '../test/support/ports.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import type { RpcCallRecord } from '../tools/rpc-sim/index.js';
import {
  type Answer,
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

const COLD_MISS_LIMIT = 30;
const HOT_KEYS_MIN_CLIENTS = 2;
const MADE_UP_PARENTS = 150;
const ATTACK_PER_SECOND = 20;
/** The real users' addresses; the attacker is 127.0.0.1. */
const USERS = ['127.0.0.2', '127.0.0.3'];
const ATTACKER = '127.0.0.1';
const REAL_PARENT = 'realparent';
/** A parent a real user asks once, in the flood's middle: a cold miss waiting behind it. */
const REAL_COLD = 'realcold';
/** How often the cache entry is read while a new subdomain is awaited. */
const POLL_MS = 50;
/** Credits of a getProgramAccounts and of any other call (RPC_CREDITS's default table). */
const GPA_CREDITS = 10;

type Showing = { ms: number | undefined; rank: string; followed: boolean; boundMs: number };

/** The RPC calls of `calls` by kind: getProgramAccounts of the real parent, of others, the rest. */
function spent(calls: RpcCallRecord[], realKey: string) {
  let gpaReal = 0;
  let gpaOther = 0;
  let other = 0;
  for (const call of calls) {
    if (call.method === 'getProgramAccounts') {
      if (JSON.stringify(call.params).includes(realKey)) gpaReal++;
      else gpaOther++;
    } else if (!call.method.startsWith('sim')) other++;
  }
  return { gpaReal, gpaOther, other, credits: (gpaReal + gpaOther) * GPA_CREDITS + other };
}

async function run(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const seconds = ctx.spendSeconds;
  const FRESH_SECONDS = ctx.windowSeconds;
  const COLD_MISS_WINDOW_SECONDS = ctx.windowSeconds;
  /** How long a new subdomain may take to show before the wait gives up. */
  const SHOW_BOUND_MS = 2 * FRESH_SECONDS * 1000 + 5_000;
  const prefix = benchPrefix();
  const chain = new SimChain();
  seedDemoChain(chain);
  for (let i = 0; i < 5; i++) chain.addSubdomain(REAL_PARENT, `sub${i}`);
  for (let i = 0; i < 3; i++) chain.addSubdomain(REAL_COLD, `sub${i}`);
  const realKey = getDomainKeySync(REAL_PARENT).pubkey.toBase58();
  const sim = await startRpcSimulator({ chain });
  const redis = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const keys = redisKeys(prefix);
  const labelsKey = keys.entryLabels(endpointId(sim.url), REAL_PARENT);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let gateway: Awaited<ReturnType<typeof spawnMain>> | undefined;
  let stopUsers = false;
  let users: Promise<number[]> | undefined;
  try {
    gateway = await spawnMain({
      ...gatewayEnv(ctx, port, prefix, sim.url),
      RPC_WS: 'on',
      RPC_WS_URL: sim.wsUrl,
      CACHE_FRESH_SECONDS: String(FRESH_SECONDS),
      COLD_MISS_WINDOW_SECONDS: String(COLD_MISS_WINDOW_SECONDS),
      COLD_MISS_LIMIT: String(COLD_MISS_LIMIT),
      // After the fix, proactive work needs this many distinct clients; ignored before it.
      HOT_KEYS_MIN_CLIENTS: String(HOT_KEYS_MIN_CLIENTS),
    });

    // The real users: each address asks every 2 s, one second apart, so the parent is asked
    // once a second by two clients.
    const userStatuses: number[] = [];
    users = Promise.all(
      USERS.map(async (from, i) => {
        await sleep(i * 1000);
        while (!stopUsers) {
          const started = performance.now();
          userStatuses.push((await get(`${base}/subdomains/${REAL_PARENT}`, from, 20_000)).status);
          await sleep(Math.max(0, 1000 * USERS.length - (performance.now() - started)));
        }
      }),
    ).then(() => userStatuses);

    /** Whether `label` is in the real parent's entry (read from Redis: no request is counted). */
    const shows = async (label: string) => {
      // The labels' sorted set holds `label \0 account` members.
      const members = await redis.zrangebylex(labelsKey, `[${label}\0`, `[${label}\0\xff`);
      return members.length > 0;
    };
    /** The real parent's place in the hot-parent ranking (its two windows' sorted sets). */
    const rank = async (): Promise<string> => {
      const windowMs = FRESH_SECONDS * 1000;
      const now = Math.floor(Date.now() / windowMs);
      const totals = new Map<string, number>();
      for (const w of [now, now - 1]) {
        const flat = await redis.zrange(keys.hotParents(w), 0, -1, 'WITHSCORES');
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const p = flat[i] as string;
          totals.set(p, (totals.get(p) ?? 0) + Number(flat[i + 1]));
        }
      }
      const order = [...totals].sort((a, b) => b[1] - a[1]).map(([p]) => p);
      const at = order.indexOf(REAL_PARENT);
      return at < 0 ? `not ranked of ${order.length}` : `${at + 1} of ${order.length}`;
    };
    /**
     * Whether a worker follows the real parent: a programSubscribe of it is open at the simulator
     * (subscribed, not unsubscribed since; the lease is not read, as its database has varied).
     */
    const followed = () => {
      const unsubscribed = new Set(
        sim.wsCalls
          .filter((c) => c.method.endsWith('Unsubscribe'))
          .map((c) => JSON.stringify(c.params)),
      );
      return sim.wsCalls.some(
        (c) =>
          c.method === 'programSubscribe' &&
          c.subscription !== undefined &&
          JSON.stringify(c.params).includes(realKey) &&
          !unsubscribed.has(JSON.stringify([c.subscription])),
      );
    };
    /** Creates a subdomain under the real parent and waits for it to show. */
    const timeToShow = async (label: string): Promise<Showing> => {
      const ranked = await rank();
      const watching = followed();
      chain.addSubdomain(REAL_PARENT, label);
      const started = performance.now();
      const showing = { rank: ranked, followed: watching, boundMs: SHOW_BOUND_MS };
      while (performance.now() - started < SHOW_BOUND_MS) {
        if (await shows(label)) return { ms: performance.now() - started, ...showing };
        await sleep(POLL_MS);
      }
      return { ms: undefined, ...showing };
    };

    // Before the flood: wait until a worker follows the parent (or a window and a half passed),
    // plus the read after subscribing, then time a new subdomain.
    const waitStarted = performance.now();
    while (performance.now() - waitStarted < 1.5 * FRESH_SECONDS * 1000) {
      if (followed()) break;
      await sleep(200);
    }
    await sleep(3_000);
    const before = await timeToShow(`before${process.pid}`);
    log(`spend: before the flood, a new subdomain showed in ${showText(before)}`);

    // The flood: made-up parents in turn at a steady rate, not waiting for answers.
    const callsAtStart = sim.calls.length;
    const subscribesAtStart = sim.wsCalls.filter((c) => c.method === 'programSubscribe').length;
    const answers: Array<Promise<{ parent: string; answer: Answer }>> = [];
    let flooding = true;
    const floodStarted = performance.now();
    let subscriptionsMid = 0;
    const flood = (async () => {
      const started = performance.now();
      for (let i = 0; flooding; i++) {
        const parent = `madeup${i % MADE_UP_PARENTS}x${process.pid}`;
        answers.push(
          get(`${base}/subdomains/${parent}`, ATTACKER, 20_000).then((answer) => ({
            parent,
            answer,
          })),
        );
        await sleep(
          Math.max(0, started + ((i + 1) * 1000) / ATTACK_PER_SECOND - performance.now()),
        );
      }
      return (performance.now() - started) / 1000;
    })();
    // In its middle (at least a window and a half in): is the real parent still followed?
    await sleep(Math.max(seconds / 2, FRESH_SECONDS + 5) * 1000);
    subscriptionsMid = sim.wsStats().subscriptions;
    const coldMiss = await get(`${base}/subdomains/${REAL_COLD}`, USERS[1], 30_000);
    const coldText = `${coldMiss.status || 'no answer'} after ${duration(coldMiss.ms)}`;
    log(`spend: a real user's cold miss in the flood's middle: ${coldText}`);
    const during = await timeToShow(`during${process.pid}`);
    log(`spend: in the flood's middle, a new subdomain showed in ${showText(during)}`);
    await sleep(Math.max(0, seconds * 1000 - (performance.now() - floodStarted)));
    flooding = false;
    const floodSeconds = await flood;
    const calls = sim.calls.slice(callsAtStart);
    const subscribes =
      sim.wsCalls.filter((c) => c.method === 'programSubscribe').length - subscribesAtStart;
    const settled = await Promise.all(answers);
    stopUsers = true;
    const userStatuses2 = await users;

    // What the attacker got: statuses, 200s by X-Cache, and, as the review counted, how many of
    // its requests got a 200 once its cold-miss limit was spent (its first 429).
    const statuses = new Map<string, number>();
    let afterLimit = 0;
    let afterLimit200 = 0;
    let limited = false;
    for (const { answer } of settled) {
      if (limited) {
        afterLimit++;
        if (answer.status === 200) afterLimit200++;
      } else if (answer.status === 429) limited = true;
      const cacheState = String(answer.headers['x-cache'] ?? '');
      const key = answer.status === 200 ? `200 ${cacheState}` : String(answer.status);
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }
    const cost = spent(calls, realKey);
    // Windows of the limit the flood spans (a few milliseconds past a whole number start none).
    const windows = Math.ceil(Math.round(floodSeconds) / COLD_MISS_WINDOW_SECONDS);
    const allowance = COLD_MISS_LIMIT * windows * GPA_CREDITS;
    const statusText = [...statuses]
      .sort((a, b) => b[1] - a[1])
      .map(([s, n]) => `${fmt.int(n)}× ${s}`)
      .join(', ');
    const userFailed = userStatuses2.filter((s) => s !== 200).length;
    log(
      `spend: ${settled.length} attacker requests in ${floodSeconds.toFixed(0)} s (${statusText}); ` +
        `getProgramAccounts ${cost.gpaOther} for other parents + ${cost.gpaReal} for the real one, ` +
        `${cost.credits} credits (cold-miss allowance ${allowance}); ${afterLimit200} of ${afterLimit} 200 ` +
        `after its first 429; ${subscribes} programSubscribe, ${subscriptionsMid} subscriptions mid-flood`,
    );

    await writeSection(
      'hostile-spend',
      [
        runLine(
          `one process (\`ROLE=all\`) following the simulator's websocket, ` +
            `\`CACHE_FRESH_SECONDS=${FRESH_SECONDS}\`, \`COLD_MISS_WINDOW_SECONDS=${COLD_MISS_WINDOW_SECONDS}\` ` +
            `(\`--window ${ctx.windowSeconds}\`), ` +
            `\`COLD_MISS_LIMIT=${COLD_MISS_LIMIT}\`, \`HOT_KEYS_MIN_CLIENTS=${HOT_KEYS_MIN_CLIENTS}\` ` +
            `(ignored by the baseline, which predates it), other settings default; ` +
            `${MADE_UP_PARENTS} made-up parents asked in turn by ${ATTACKER} at ` +
            `${ATTACK_PER_SECOND}/s for ${floodSeconds.toFixed(0)} s (\`--spend ${seconds}\`, longer ` +
            `when the mid-flood wait needs it); \`${REAL_PARENT}\` asked once a second by ` +
            `${USERS.join(' and ')} in turn throughout`,
        ),
        '',
        table(
          ['measure', 'during the flood'],
          [
            ['attacker requests: what they got', statusText],
            [
              'attacker requests after its first 429 (its cold-miss limit spent): answered 200',
              limited ? `${fmt.int(afterLimit200)} of ${fmt.int(afterLimit)}` : 'never limited',
            ],
            [
              '`getProgramAccounts` the simulator got: other parents / the real parent',
              `${cost.gpaOther} / ${cost.gpaReal}`,
            ],
            [
              'RPC credits of all HTTP calls (getProgramAccounts 10, others 1)',
              `${fmt.int(cost.credits)} (the attacker's cold-miss limit allows ${fmt.int(allowance)}: ${COLD_MISS_LIMIT} × ${windows} windows × ${GPA_CREDITS})`,
            ],
            [
              '`programSubscribe` sent / subscriptions open in the middle',
              `${subscribes} / ${subscriptionsMid}`,
            ],
            ['real users: answers not 200', `${userFailed} of ${userStatuses2.length}`],
            ["a real user's cold miss of another parent in the middle", coldText],
          ],
        ),
        '',
        table(
          [
            'new subdomain under the real parent',
            'rank in the hot-parent counts',
            'subscribed at the simulator',
            'shown after',
          ],
          [
            ['before the flood', before.rank, before.followed ? 'yes' : 'no', showText(before)],
            ['in the flood', during.rank, during.followed ? 'yes' : 'no', showText(during)],
          ],
        ),
        '',
        `"Shown" is the label in the real parent's cache entry, read from Redis every ${POLL_MS} ms ` +
          'so the polls are not requests for the parent.',
      ].join('\n'),
    );
  } finally {
    stopUsers = true;
    await users?.catch(() => undefined);
    await gateway?.kill('SIGKILL');
    redis.disconnect();
    await sim.close();
    await deleteRunKeys(ctx.redisUrl, prefix);
  }
}

const showText = (s: Showing) =>
  s.ms === undefined ? `not within ${duration(s.boundMs)}` : duration(s.ms);

export const spendScenario = scenario('spend', run);
