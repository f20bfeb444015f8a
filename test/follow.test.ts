import { PublicKey } from '@solana/web3.js';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { labels, metric, PARENT } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { inDatabase } from './support/shared-redis.js';
import { elapse } from './support/wait.js';
import { readFollowStatus } from '../src/core/cache/follow-status.js';
import { startRpcSimulator } from '../tools/rpc-sim/index.js';
import { WS_NOTIFICATION_OUTCOME } from '../src/core/metrics.js';

/**
 * Every cached parent follows the chain (docs/design.md, "Freshness"), end to end against the
 * real API, worker, Redis and the simulator's HTTP and websockets: a parent asked once (never hot)
 * shows creations, transfers and deletions within seconds without a scan; what changes while every
 * websocket is down shows once they are back; writes under parents nobody asked about cost no RPC
 * call; a transfer the stream saw before a parent's first scan read a lagging node shows once the
 * parent joins.
 */

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

/** Following the whole program; one client never makes a parent hot (two are needed). */
const LONG_TAIL = {
  RPC_WS: 'on',
  HOT_KEYS_TOP_N: '5',
  HOT_KEYS_MIN_CLIENTS: '2',
  WATCH_LEASE_MS: '1500',
  RPC_WS_PING_MS: '500',
  CACHE_FRESH_SECONDS: '15',
  CACHE_STALE_SECONDS: '600',
} as const;

/** Waits for the stream to vouch, then asks for `parent` once and waits for it to be followed. */
async function askedOnce(g: Gateway, parent = PARENT): Promise<void> {
  await waitFor(async () => (await metric(g, 'sns_follow_healthy')) === 1, 15_000);
  const first = await g.get(`/subdomains/${parent}`);
  expect(first.headers.get('x-cache')).toBe('MISS');
  // The worker reads the registry's recent writes every second, and follows what it finds there.
  await waitFor(async () => (await metric(g, 'sns_watched_parents')) >= 1, 10_000);
}

/** How long `check` takes to hold, polling; throws past `ms`. */
async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  await waitFor(check, ms);
  return Date.now() - started;
}

describe('every cached parent follows the chain', () => {
  it('shows a creation, a transfer and a deletion under a parent asked once within 2 s, without a scan (database 5)', async () => {
    gw = await startGateway({
      env: { ...LONG_TAIL, REDIS_URL: inDatabase(inject('redisUrl'), 5) },
    });
    const g = gw;
    const { sim } = g;
    await askedOnce(g);
    sim.resetCalls();
    const states: string[] = [];
    const answer = async () => {
      const res = await g.get(`/subdomains/${PARENT}`);
      states.push(res.headers.get('x-cache') ?? '');
      return res.body.result as string[];
    };

    sim.chain.addSubdomain(PARENT, 'longtail');
    const tookCreate = await within(2_000, async () => (await answer()).includes('longtail'));

    const cache = new SubdomainCache(g.redis, g.config.QUEUE_PREFIX, 15_000, 600_000);
    const next = new PublicKey(Buffer.alloc(32, 4));
    const keys = sim.chain.transferSubdomain(PARENT, 'longtail', next);
    const owner = async () =>
      (await cache.member(endpointId(sim.url), PARENT, keys.subKey.toBase58()))?.owner;
    const tookTransfer = await within(2_000, async () => (await owner()) === next.toBase58());

    sim.chain.deleteSubdomain(PARENT, 'bullish');
    const tookDelete = await within(2_000, async () => !(await answer()).includes('bullish'));

    expect(await labels(g)).toEqual(['hollaaa', 'longtail', 'testing']);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    expect(
      await metric(g, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.reread }),
    ).toBe(0);
    expect(sim.callCount('getTransaction')).toBeGreaterThanOrEqual(1);
    // Every answer a hit: the entry stays fresh by following, no clock refresh.
    expect(states.filter((s) => s !== 'HIT')).toEqual([]);
    expect(await metric(g, 'sns_rpc_credits_total', { method: 'getTransaction' })).toBeGreaterThan(
      0,
    );
    expect(await metric(g, 'sns_rpc_credits_total', { method: 'wsMegabyte' })).toBeGreaterThan(0);
    console.log(
      `long tail: created in ${tookCreate} ms, transferred in ${tookTransfer} ms, deleted in ${tookDelete} ms`,
    );
  });

  it('shows what changed while every websocket was down once they are back, reading the gap', async () => {
    gw = await startGateway({ env: LONG_TAIL });
    const g = gw;
    const { sim } = g;
    await askedOnce(g);
    sim.resetCalls();
    sim.setWebsocketAvailable(false);
    expect(sim.dropSockets()).toBeGreaterThanOrEqual(1);
    await waitFor(() => sim.wsStats().connections === 0);
    sim.chain.addSubdomain(PARENT, 'meanwhile');
    sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    // Time is the subject: the stream stays down a while after the changes, a gap to read.
    await elapse(300);
    sim.setWebsocketAvailable(true);
    const took = await within(7_000, async () => {
      const now = await labels(g);
      return now.includes('meanwhile') && !now.includes('hollaaa');
    });
    expect(sim.callCount('getSignaturesForAddress')).toBeGreaterThanOrEqual(1);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    expect(await metric(g, 'sns_ws_reconnects_total')).toBeGreaterThanOrEqual(1);
    // And it follows on.
    sim.chain.addSubdomain(PARENT, 'afterwards');
    await within(2_000, async () => (await labels(g)).includes('afterwards'));
    console.log(
      `changes made while the websockets were down shown ${took} ms after they came back`,
    );
  });

  it('spends no RPC call on writes under parents nobody asked for', async () => {
    gw = await startGateway({ env: LONG_TAIL });
    const g = gw;
    const { sim } = g;
    await askedOnce(g);
    sim.resetCalls();
    const bytes = await metric(g, 'sns_ws_received_bytes_total');
    sim.setBackgroundWrites(50);
    await waitFor(() => sim.backgroundWrites > 50, 10_000);
    sim.setBackgroundWrites(0);
    expect(sim.backgroundWrites).toBeGreaterThan(50);
    expect(await metric(g, 'sns_ws_received_bytes_total')).toBeGreaterThan(bytes);
    // The silence probe may ask for the newest signature (once per 30 s); nothing else is read.
    expect(sim.calls.filter((c) => c.method !== 'getSignaturesForAddress')).toEqual([]);
    // The parent asked for still follows.
    sim.chain.addSubdomain(PARENT, 'amidnoise');
    await within(2_000, async () => (await labels(g)).includes('amidnoise'));
  });

  it('shows a transfer the stream saw before the first scan of its parent read a lagging node', async () => {
    // HTTP reads half a second behind the websocket: the parent's first scan reads the chain from
    // before the transfer, whose notification came while no one followed the parent (kept, then
    // replayed when the parent joins).
    const sim = await startRpcSimulator({ chain: seedDemo(), httpLagMs: 500 });
    try {
      gw = await startGateway({ sim, env: LONG_TAIL });
      const g = gw;
      await waitFor(async () => {
        const status = await readFollowStatus(g.redis, g.config.QUEUE_PREFIX);
        return status?.mode === 'program' && status.healthyUntil > Date.now();
      }, 15_000);
      const next = new PublicKey(Buffer.alloc(32, 7)).toBase58();
      sim.chain.transferSubdomain(PARENT, 'bullish', new PublicKey(next));
      const statuses = new Set<number>();
      const took = await within(5_000, async () => {
        const res = await g.get(`/subdomains/${PARENT}/details`);
        statuses.add(res.status);
        const rows = (res.body.result ?? []) as Array<{ label: string; owner: string }>;
        return rows.find((r) => r.label === 'bullish')?.owner === next;
      });
      expect([...statuses]).toEqual([200]);
      console.log(`a transfer before the first scan on a lagging node shown in ${took} ms`);
    } finally {
      await gw?.close();
      gw = undefined;
      await sim.close();
    }
  });
});
