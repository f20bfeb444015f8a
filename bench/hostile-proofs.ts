/**
 * Scenarios `spent` and `shortpage` of `npm run bench:hostile`: the third review's attacks on
 * answers marked fresh, replayed against a gateway process following the simulator's chain, each
 * printing what the review saw (the baseline, before the fix) beside what this code does (after):
 *
 * - `spent`: the day's budget spent, then a subdomain created whose label needs a re-read (longer
 *   than the stream's inline slice); the parent is polled: answers `HIT` without the label are
 *   wrong answers marked fresh.
 * - `shortpage`: a provider capping `getSignaturesForAddress` at three rows
 *   (`setSignaturesPageCap`), the websocket refused while six subdomains are created; once it is
 *   back the gap read must page to its anchor. Answers `HIT` without all six are wrong.
 * - `lostevent`: the API and the worker as two processes, each a Redis user of its own; the
 *   worker's user loses its channels (`ACL SETUSER ... resetchannels`, so Redis refuses its
 *   PUBLISH) while a subdomain is created, for less than the publish's retries and then for
 *   longer. Answers `HIT` without the label, from the API's in-process copy, are wrong.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { redisKeys } from '../src/core/redis-keys.js';
import { utcDay } from '../src/core/rpc/budget.js';
import { spawnMain } from '../test/support/main-process.js';
import { freePort } from '../test/support/ports.js';
import {
  seedDemoChain,
  SimChain,
  startRpcSimulator,
  type RpcSimulator,
} from '../tools/rpc-sim/index.js';
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

/** The commit of main the third review measured: the baseline these sections quote. */
const PROOFS_BASELINE = 'c6cb50e';
const PARENT = 'demo';
const FRESH_SECONDS = 5;
/** How long each attack's answers are watched after it. */
const WATCH_MS = 20_000;
const POLL_MS = 100;

/** The settings of a gateway that follows the chain, for the section's first line. */
const FOLLOW_SETTINGS =
  `\`RPC_WS=on\` on the simulator's websocket, ` +
  `\`CACHE_FRESH_SECONDS=${FRESH_SECONDS}\`, \`HOT_KEYS_MIN_CLIENTS=1\`, \`WATCH_LEASE_MS=1500\`, ` +
  `\`RPC_WS_PING_MS=500\``;
const FOLLOWING = `one process (\`ROLE=all\`), ${FOLLOW_SETTINGS}`;

type Watched = {
  answers: number;
  /** `HIT` answers missing a label the chain has: wrong answers marked fresh. */
  wrongHits: number;
  /** Ms from the attack to the last of them (how long wrong answers were marked fresh). */
  lastWrong: number | undefined;
  stale: number;
  /** Ms from the attack until every label showed, if it did. */
  shownAfter: number | undefined;
};

/**
 * The environment of a gateway (or of its API or worker process) on loopback `port` that follows
 * `sim`'s chain with {@link FOLLOW_SETTINGS}.
 */
function followingEnv(
  ctx: HostileContext,
  port: number,
  prefix: string,
  sim: RpcSimulator,
): Record<string, string> {
  return {
    ...gatewayEnv(ctx, port, prefix, sim.url),
    RPC_WS: 'on',
    RPC_WS_URL: sim.wsUrl,
    CACHE_FRESH_SECONDS: String(FRESH_SECONDS),
    CACHE_STALE_SECONDS: '600',
    HOT_KEYS_MIN_CLIENTS: '1',
    WATCH_LEASE_MS: '1500',
    RPC_WS_PING_MS: '500',
  };
}

/** What an answer for `PARENT` says: its `x-cache`, and its labels (none for an answer not 200). */
type Asked = { cache: string; labels: string[] };

/** Asks the gateway at `base` for `PARENT`'s subdomains (10 s bound; a failure has no labels). */
function askerOf(base: string): () => Promise<Asked> {
  return async () => {
    const answer = await get(`${base}/subdomains/${PARENT}`, '127.0.0.1', 10_000);
    const result =
      answer.status === 200 ? (JSON.parse(answer.body) as { result?: unknown }).result : undefined;
    return {
      cache: String(answer.headers['x-cache'] ?? ''),
      labels: Array.isArray(result) ? (result as string[]) : [],
    };
  };
}

/**
 * Asks once, lets a freshness window pass, then asks until a `HIT`: past the window, a HIT is
 * fresh by following alone. Throws when none came within 60 s.
 */
async function untilFresh(ask: () => Promise<Asked>): Promise<void> {
  const until = Date.now() + 60_000;
  await ask();
  await sleep((FRESH_SECONDS + 1) * 1000);
  while ((await ask()).cache !== 'HIT') {
    if (Date.now() > until) throw new Error('the entry never became fresh by following');
    await sleep(200);
  }
}

/** Starts a following gateway on `sim`, asks `PARENT` until its entry is fresh by following. */
async function following(ctx: HostileContext, sim: RpcSimulator, extra: Record<string, string>) {
  const prefix = benchPrefix();
  const port = await freePort();
  const gateway = await spawnMain({ ...followingEnv(ctx, port, prefix, sim), ...extra });
  const ask = askerOf(`http://127.0.0.1:${port}`);
  await untilFresh(ask);
  return { prefix, gateway, ask };
}

/**
 * Polls `ask` for {@link WATCH_MS}: wrong `HIT`s, `STALE`s, and when `wanted` all showed, timed
 * from `started` (the attack, `performance.now()`).
 */
async function watch(
  ask: () => Promise<Asked>,
  wanted: readonly string[],
  started: number,
): Promise<Watched> {
  const seen: Watched = {
    answers: 0,
    wrongHits: 0,
    lastWrong: undefined,
    stale: 0,
    shownAfter: undefined,
  };
  while (performance.now() - started < WATCH_MS) {
    const { cache, labels } = await ask();
    seen.answers++;
    const whole = wanted.every((label) => labels.includes(label));
    if (cache === 'HIT' && !whole) {
      seen.wrongHits++;
      seen.lastWrong = performance.now() - started;
    }
    if (cache === 'STALE') seen.stale++;
    if (whole && seen.shownAfter === undefined) seen.shownAfter = performance.now() - started;
    await sleep(POLL_MS);
  }
  return seen;
}

const wrongText = (w: Watched) =>
  w.lastWrong === undefined ? 'none' : `${duration(w.lastWrong)} after the change`;

const shownText = (w: Watched) =>
  w.shownAfter === undefined
    ? `not within ${WATCH_MS / 1000} s`
    : `after ${duration(w.shownAfter)}`;

async function spent(ctx: HostileContext): Promise<void> {
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  const redis = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  let run: Awaited<ReturnType<typeof following>> | undefined;
  const budget = 100_000;
  try {
    run = await following(ctx, sim, { RPC_CREDITS_PER_DAY: String(budget) });
    // The day spent, as a flood would leave it: every call is refused from now on.
    await redis.set(redisKeys(run.prefix).rpcCredits(utcDay(Date.now())), String(budget));
    await sleep(2_000);
    const label = 'a-label-longer-than-the-inline-slice-of-thirty-bytes';
    const attack = performance.now();
    chain.addSubdomain(PARENT, label);
    const seen = await watch(run.ask, [label], attack);
    ctx.log(
      `spent: ${seen.answers} answers, ${seen.wrongHits} HIT without the label (the last ` +
        `${wrongText(seen)}), ` +
        `${seen.stale} STALE; label shown ${shownText(seen)}`,
    );
    await writeSection(
      'hostile-spent',
      [
        runLine(
          `${FOLLOWING}, \`RPC_CREDITS_PER_DAY=${budget}\` with the day's counter set to it ` +
            `(the budget spent); a subdomain whose label needs a re-read created under \`${PARENT}\`, ` +
            `then \`GET /subdomains/${PARENT}\` every ${POLL_MS} ms for ${WATCH_MS / 1000} s`,
          PROOFS_BASELINE,
        ),
        '',
        table(
          ['measure', 'the review (before)', 'now (after)'],
          [
            [
              'answers `HIT` without the new label: until',
              'more than 60 s (`HIT`, `Age: 0`), the re-read refused every 2 s',
              `${wrongText(seen)} (${fmt.int(seen.wrongHits)} of ${fmt.int(seen.answers)} answers)`,
            ],
            ['answers `STALE` (honest: not vouched for)', 'none', fmt.int(seen.stale)],
            [
              'the label shown (the re-read is refused until the next UTC day)',
              'no',
              shownText(seen),
            ],
          ],
        ),
      ].join('\n'),
    );
  } finally {
    await run?.gateway.kill('SIGKILL');
    redis.disconnect();
    await sim.close();
    if (run) await deleteRunKeys(ctx.redisUrl, run.prefix);
  }
}

async function shortPage(ctx: HostileContext): Promise<void> {
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  let run: Awaited<ReturnType<typeof following>> | undefined;
  const cap = 3;
  try {
    run = await following(ctx, sim, {});
    sim.setSignaturesPageCap(cap);
    sim.setWebsocketAvailable(false);
    sim.dropSockets();
    const added = Array.from({ length: 6 }, (_, i) => `gap${i}x${process.pid}`);
    const attack = performance.now();
    for (const label of added) chain.addSubdomain(PARENT, label);
    await sleep(1_000);
    sim.resetCalls();
    sim.setWebsocketAvailable(true);
    const seen = await watch(run.ask, added, attack);
    const pages = sim.callCount('getSignaturesForAddress');
    ctx.log(
      `shortpage: ${seen.answers} answers, ${seen.wrongHits} HIT without all six (the last ` +
        `${wrongText(seen)}), ` +
        `${seen.stale} STALE; all six shown ${shownText(seen)}; ${pages} getSignaturesForAddress`,
    );
    await writeSection(
      'hostile-shortpage',
      [
        runLine(
          `${FOLLOWING}; the simulator answering \`getSignaturesForAddress\` at most ${cap} rows ` +
            `(\`setSignaturesPageCap\`), its websocket dropped and refused while six subdomains are ` +
            `created under \`${PARENT}\`, then accepted again; \`GET /subdomains/${PARENT}\` every ` +
            `${POLL_MS} ms for ${WATCH_MS / 1000} s from then`,
          PROOFS_BASELINE,
        ),
        '',
        table(
          ['measure', 'the review (before)', 'now (after)'],
          [
            [
              'the six subdomains created during the drop shown',
              'three lost for good',
              `all six ${shownText(seen)}`,
            ],
            [
              'answers `HIT` without all six: until',
              'more than 15 minutes, no warning',
              `${wrongText(seen)} (${fmt.int(seen.wrongHits)} of ${fmt.int(seen.answers)} answers)`,
            ],
            ['answers `STALE` meanwhile', 'not measured', fmt.int(seen.stale)],
            [
              '`getSignaturesForAddress` calls after the drop (pages)',
              'one page, never paged on',
              fmt.int(pages),
            ],
          ],
        ),
      ].join('\n'),
    );
  } finally {
    await run?.gateway.kill('SIGKILL');
    await sim.close();
    if (run) await deleteRunKeys(ctx.redisUrl, run.prefix);
  }
}

/** The ACL LOG entries of `user` refused a channel (a PUBLISH), as Redis counts them. */
async function channelRefusals(admin: Redis, user: string): Promise<number> {
  const entries = (await admin.call('ACL', 'LOG', '128')) as unknown[][];
  let count = 0;
  for (const entry of entries) {
    const fields = new Map<string, unknown>();
    for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
    if (fields.get('username') === user && fields.get('reason') === 'channel') {
      count += Number(fields.get('count') ?? 1);
    }
  }
  return count;
}

async function lostEvent(ctx: HostileContext): Promise<void> {
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  const prefix = benchPrefix();
  const admin = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const users = { api: `${prefix}-api`, worker: `${prefix}-worker` };
  const password = randomBytes(12).toString('hex');
  const urlOf = (user: string) => {
    const url = new URL(ctx.redisUrl);
    url.username = user;
    url.password = password;
    return url.href;
  };
  const children: Array<Awaited<ReturnType<typeof spawnMain>>> = [];
  const rounds: Array<{ refusedMs: number; refusals: number; seen: Watched }> = [];
  try {
    for (const user of Object.values(users)) {
      await admin.call(
        'ACL',
        'SETUSER',
        user,
        'on',
        `>${password}`,
        `~${prefix}:*`,
        `&${prefix}:*`,
      );
      await admin.call('ACL', 'SETUSER', user, '+@all');
    }
    const port = await freePort();
    const env = followingEnv(ctx, port, prefix, sim);
    children.push(await spawnMain({ ...env, ROLE: 'worker', REDIS_URL: urlOf(users.worker) }));
    children.push(await spawnMain({ ...env, ROLE: 'api', REDIS_URL: urlOf(users.api) }));
    const ask = askerOf(`http://127.0.0.1:${port}`);
    await untilFresh(ask);
    // Shorter than the publish's retries (0.1 + 0.2 + 0.4 + 0.8 s), then longer.
    for (const refusedMs of [700, 3_000]) {
      const before = await channelRefusals(admin, users.worker);
      await admin.call('ACL', 'SETUSER', users.worker, 'resetchannels');
      const label = `lost${refusedMs}x${process.pid}`;
      const attack = performance.now();
      chain.addSubdomain(PARENT, label);
      const restore = sleep(refusedMs).then(() =>
        admin.call('ACL', 'SETUSER', users.worker, `&${prefix}:*`),
      );
      const seen = await watch(ask, [label], attack);
      await restore;
      const refusals = (await channelRefusals(admin, users.worker)) - before;
      rounds.push({ refusedMs, refusals, seen });
      ctx.log(
        `lostevent (${refusedMs} ms refused): ${refusals} PUBLISH refused; ${seen.answers} answers, ` +
          `${seen.wrongHits} HIT without the label (the last ${wrongText(seen)}); ` +
          `label shown ${shownText(seen)}`,
      );
    }
    const [short, long] = rounds;
    const row = (r: (typeof rounds)[number] | undefined) =>
      r === undefined
        ? 'not run'
        : `${wrongText(r.seen)} (${fmt.int(r.seen.wrongHits)} of ${fmt.int(r.seen.answers)} answers; ` +
          `${r.refusals} PUBLISH refused)`;
    await writeSection(
      'hostile-lostevent',
      [
        runLine(
          `${FOLLOW_SETTINGS}; an API process and a worker process (\`ROLE=api\`, \`ROLE=worker\`), each ` +
            "a Redis user made for the run; the worker's user loses its channels (`ACL SETUSER " +
            'resetchannels`: Redis refuses its PUBLISH) while a subdomain is created under ' +
            `\`${PARENT}\`, for 0.7 s and then for 3 s; \`GET /subdomains/${PARENT}\` every ${POLL_MS} ms ` +
            `for ${WATCH_MS / 1000} s from each change`,
          PROOFS_BASELINE,
        ),
        '',
        table(
          ['answers `HIT` without the new label: until', 'the review (before)', 'now (after)'],
          [
            ['PUBLISH refused for 0.7 s', '60 s (one PUBLISH refused)', row(short)],
            ['PUBLISH refused for 3 s', '3 minutes (a second loss)', row(long)],
          ],
        ),
      ].join('\n'),
    );
  } finally {
    for (const child of children.reverse()) await child.kill('SIGKILL');
    for (const user of Object.values(users)) {
      await admin.call('ACL', 'DELUSER', user).catch(() => undefined);
    }
    admin.disconnect();
    await sim.close();
    await deleteRunKeys(ctx.redisUrl, prefix);
  }
}

export const lostEventScenario = scenario('lostevent', lostEvent);
export const spentScenario = scenario('spent', spent);
export const shortPageScenario = scenario('shortpage', shortPage);
