/**
 * Scenario `frames` of `npm run bench:hostile`: what a provider's websocket can send a watched
 * parent. Three parents, each asked once a second by two addresses so a worker follows them; then
 * on their subscriptions:
 *
 * - a notification of an existing subdomain with a forged owner and a slot of 2^63, then one with
 *   the slot written `1e309` (each on its own parent): the slot the entry holds after it, whether
 *   the forged owner was stored, and how long a real deletion made after it takes to show;
 * - 68,000 × `--flood` notifications (680,000 by default) of distinct accounts under the third
 *   parent, as fast as the socket takes them: the gateway's peak RSS, how long a subdomain created
 *   right after the flood takes to show (the drain), and `/healthz` meanwhile.
 *
 * The frames go out through the simulator's `wsSendRaw` and `wsFlood` (tools/rpc-sim).
 */
import { readFileSync } from 'node:fs';
import { PublicKey } from '@solana/web3.js';
import { Redis } from 'ioredis';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { toBase58 } from '../src/core/sns/base58.js';
import { subdomainKey } from '../worker/sns/change.js';
import { SCAN_SLICE, SLICE_AT } from '../worker/sns/discovery-decode.js';
import { domainKey } from '../src/core/sns/pda.js';
import { spawnMain } from '../test/support/main-process.js';
import { freePort } from '../test/support/ports.js';
import {
  programNotificationText,
  seedDemoChain,
  SimChain,
  startRpcSimulator,
} from '../tools/rpc-sim/index.js';
import {
  deleteRunKeys,
  duration,
  gatewayEnv,
  get,
  type HostileContext,
  probe,
  runLine,
  scenario,
  sleep,
} from './hostile-common.js';
import { benchPrefix, fmt, table, writeSection } from './lib.js';

const FRESH_SECONDS = 5;
const USERS = ['127.0.0.2', '127.0.0.3'];
const FORGED = { big: 'forgedbig', inf: 'forgedinf' } as const;
const FLOODED = 'flooded';
const FLOOD_SUBDOMAINS = 2_000;
const NOTIFICATIONS_PER_SECOND = 68_000;
/** How long a change may take to show before the wait gives up. */
const SHOW_BOUND_MS = 3 * FRESH_SECONDS * 1000 + 5_000;
const DRAIN_BOUND_MS = 60_000;
const FORGED_OWNER = new PublicKey(Buffer.alloc(32, 9)).toBase58();

/** Resident and peak resident memory of `pid`, in MiB. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (f: string) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

async function run(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const chain = new SimChain();
  seedDemoChain(chain);
  for (const parent of Object.values(FORGED)) {
    for (const label of ['one', 'two', 'three']) chain.addSubdomain(parent, label);
  }
  for (let i = 0; i < FLOOD_SUBDOMAINS; i++) chain.addSubdomain(FLOODED, `member${i}`);
  const sim = await startRpcSimulator({ chain });
  const prefix = benchPrefix();
  const redis = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const keys = redisKeys(prefix);
  const endpoint = endpointId(sim.url);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let gateway: Awaited<ReturnType<typeof spawnMain>> | undefined;
  let stopUsers = false;
  let users: Promise<unknown> | undefined;
  try {
    gateway = await spawnMain({
      ...gatewayEnv(ctx, port, prefix, sim.url),
      RPC_WS: 'on',
      RPC_WS_URL: sim.wsUrl,
      CACHE_FRESH_SECONDS: String(FRESH_SECONDS),
      WATCH_LEASE_MS: '1500',
      RPC_WS_PING_MS: '500',
    });
    const pid = gateway.pid;
    const parents = [...Object.values(FORGED), FLOODED];
    users = Promise.all(
      USERS.map(async (from) => {
        while (!stopUsers) {
          const started = performance.now();
          await Promise.all(parents.map((p) => get(`${base}/subdomains/${p}`, from, 20_000)));
          await sleep(Math.max(0, 1000 - (performance.now() - started)));
        }
      }),
    );

    const entry = async (parent: string) => {
      const raw = await redis.get(keys.entryMeta(endpoint, parent));
      if (raw === null) return undefined;
      // The slot as stored, digits and all (a number past 2^53 would be rounded by JSON.parse);
      // an entry that is not JSON any more (`Infinity`) says so.
      const slot = /"slot":([^,}]*)/.exec(raw)?.[1] ?? 'none';
      try {
        return { ...(JSON.parse(raw) as { rev?: number }), slot };
      } catch {
        return { slot: `${slot} (the entry is not JSON)` };
      }
    };
    /** The labels the API answers for `parent` (what users see), or undefined if not a 200. */
    const answered = async (parent: string) => {
      const answer = await get(`${base}/subdomains/${parent}`, USERS[0], 5_000);
      if (answer.status !== 200) return undefined;
      const result = (JSON.parse(answer.body) as { result?: unknown }).result;
      return Array.isArray(result) ? (result as string[]) : undefined;
    };
    /** The subscription of `parent` (its latest programSubscribe that got an id). */
    const subscriptionOf = (parent: string) => {
      const key = toBase58(domainKey(parent));
      const open = new Set(sim.wsSubscriptions('program'));
      const calls = sim.wsCalls.filter(
        (c) =>
          c.method === 'programSubscribe' &&
          c.subscription !== undefined &&
          open.has(c.subscription) &&
          JSON.stringify(c.params).includes(key),
      );
      return calls[calls.length - 1]?.subscription;
    };
    // Followed: subscribed, and the entry written again after the subscription's read.
    const waitStarted = performance.now();
    for (;;) {
      const ready = await Promise.all(
        parents.map(
          async (p) => subscriptionOf(p) !== undefined && ((await entry(p))?.rev ?? 0) >= 2,
        ),
      );
      if (ready.every(Boolean)) break;
      if (performance.now() - waitStarted > 30_000)
        throw new Error('parents not followed within 30 s');
      await sleep(250);
    }
    await sleep(2_500);
    log(
      `frames: ${parents.length} parents followed after ${duration(performance.now() - waitStarted)}`,
    );

    /** `label`'s name account under `parent` as the subscription slices it, owner forged if asked. */
    const slice = (parent: string, label: string, forge: boolean) => {
      const key = subdomainKey(label, domainKey(parent));
      const data = chain.getAccount(new PublicKey(key))?.data;
      if (!data) throw new Error(`no account for ${label}.${parent}`);
      const cut = Buffer.from(
        data.subarray(SCAN_SLICE.offset, SCAN_SLICE.offset + SCAN_SLICE.length),
      );
      if (forge) new PublicKey(FORGED_OWNER).toBuffer().copy(cut, SLICE_AT.owner);
      return { key, cut };
    };
    /** Waits for `check` on the parent's entry; the time it took, or undefined past `boundMs`. */
    const until = async (check: () => Promise<boolean>, boundMs: number) => {
      const started = performance.now();
      while (performance.now() - started < boundMs) {
        if (await check()) return performance.now() - started;
        await sleep(100);
      }
      return undefined;
    };

    const forgedRows: Array<Array<string | number>> = [];
    for (const [parent, slot] of [
      [FORGED.big, '9223372036854775808'],
      [FORGED.inf, '1e309'],
    ] as const) {
      const sub = subscriptionOf(parent);
      if (sub === undefined) throw new Error(`${parent}: no subscription`);
      const { key, cut } = slice(parent, 'one', true);
      const sent = sim.wsSendRaw(sub, programNotificationText(sub, slot, key, cut));
      await sleep(3_000);
      const stored = await entry(parent);
      const accounts = await redis.hvals(keys.entryMembers(endpoint, parent));
      const ownerStored = accounts.some((member) => member.includes(FORGED_OWNER));
      const api = await get(`${base}/subdomains/${parent}`, USERS[0], 5_000);
      chain.deleteSubdomain(parent, 'two');
      const gone = await until(
        async () => (await answered(parent))?.includes('two') === false,
        SHOW_BOUND_MS,
      );
      const alive = await get(`${base}/healthz`, '127.0.0.1', 5_000);
      const row = [
        `\`${slot === '1e309' ? '1e309' : '2^63'}\` (\`${slot}\`)`,
        sent ? 'yes' : 'no',
        stored?.slot ?? 'no entry',
        ownerStored ? 'yes' : 'no',
        api.status || 'no answer',
        gone === undefined ? `not within ${duration(SHOW_BOUND_MS)}` : duration(gone),
        alive.status === 200 ? 'yes' : `no (${alive.status})`,
      ];
      log(`frames: ${row.join(' | ')}`);
      forgedRows.push(row);
    }

    // The flood: distinct subdomain-like accounts under the parent, the worst case for
    // coalescing by account; data is a real subdomain's slice (the parent, an owner).
    const count = NOTIFICATIONS_PER_SECOND * ctx.floodSeconds;
    const sub = subscriptionOf(FLOODED);
    if (sub === undefined) throw new Error(`${FLOODED}: no subscription`);
    const { cut } = slice(FLOODED, 'member0', false);
    const keyBytes = Buffer.alloc(32, 7);
    const accountKeys = Array.from({ length: count }, (_, i) => {
      keyBytes.writeUInt32LE(i, 0);
      return toBase58(keyBytes);
    });
    const [head, tail] = programNotificationText(sub, String(chain.slot), '<key>', cut).split(
      '<key>',
    );
    const before = memoryOf(pid);
    const probes = probe(`${base}/healthz`);
    let peak = before.peak;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, memoryOf(pid).peak);
      } catch {
        // the process is gone: the wait below says so
      }
    }, 200);
    const flood = await sim.wsFlood(sub, count, (i) => `${head}${accountKeys[i]}${tail}`);
    const label = `afterflood${process.pid}`;
    chain.addSubdomain(FLOODED, label);
    const drained = await until(
      async () => (await answered(FLOODED))?.includes(label) === true,
      DRAIN_BOUND_MS,
    );
    clearInterval(sampler);
    peak = Math.max(peak, memoryOf(pid).peak);
    const healthz = await probes.stop();
    const drainText =
      drained === undefined ? `not within ${duration(DRAIN_BOUND_MS)}` : duration(drained);
    log(
      `frames: flood of ${fmt.int(flood.sent)} sent in ${duration(flood.ms)}; RSS ${before.rss.toFixed(0)} MiB ` +
        `before, peak ${peak.toFixed(0)} MiB; change after it shown in ${drainText}; /healthz p99 ` +
        `${fmt.ms(healthz.p99)} ms, max ${fmt.ms(healthz.max)} ms, ${healthz.failed} failed`,
    );

    await writeSection(
      'hostile-frames',
      [
        runLine(
          `one process (\`ROLE=all\`) following the simulator's websocket, ` +
            `\`CACHE_FRESH_SECONDS=${FRESH_SECONDS}\`, \`WATCH_LEASE_MS=1500\`, \`RPC_WS_PING_MS=500\`, ` +
            `other settings default; three parents asked once a second each by ${USERS.join(' and ')}`,
        ),
        '',
        table(
          [
            'forged slot',
            'sent',
            'slot in the entry 3 s later',
            'forged owner stored',
            'API status then',
            'a real deletion after it shown',
            '/healthz 200 after',
          ],
          forgedRows,
        ),
        '',
        table(
          ['notification flood on one watched parent', 'figure'],
          [
            [
              'notifications of distinct accounts (`--flood` × 68,000), handed to the socket in',
              `${fmt.int(flood.sent)} in ${duration(flood.ms)}`,
            ],
            ['gateway RSS before / peak (MiB)', `${before.rss.toFixed(0)} / ${peak.toFixed(0)}`],
            ['a subdomain created after the flood shown after (the drain)', drainText],
            [
              '`/healthz` p50 / p99 / max ms meanwhile (not 200)',
              `${fmt.ms(healthz.p50)} / ${fmt.ms(healthz.p99)} / ${fmt.ms(healthz.max)} (${healthz.failed})`,
            ],
          ],
        ),
        '',
        "Shown: in the API's answers, asked every 100 ms from 127.0.0.2; slots and owners: read " +
          "from the parents' cache entries in Redis; `/healthz` probed every 50 ms from a process " +
          'of its own, from the start of the flood until the change after it showed.',
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

export const framesScenario = scenario('frames', run);
