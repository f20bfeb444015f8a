import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PublicKey } from '@solana/web3.js';
import { afterEach, describe, expect, it } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { createLogger } from '../src/core/logger.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { subdomainKey } from '../worker/sns/change.js';
import { SCAN_SLICE, SLICE_AT } from '../worker/sns/discovery-decode.js';
import { HEAD_SLICE } from '../worker/follow/name-program.js';
import { domainKey } from '../src/core/sns/pda.js';
import { FOLLOW, labels, metric, PARENT, watched } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import {
  programNotificationText,
  startRpcSimulator,
  type RpcSimulator,
} from '../tools/rpc-sim/index.js';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { elapse } from './support/wait.js';
import { DELETION_CHECK_OUTCOME, WS_NOTIFICATION_OUTCOME } from '../src/core/metrics.js';

/**
 * Slots the provider sends that no chain has (docs/design.md, "Freshness"): not safe integers,
 * negative, fractions, strings, or far ahead of every slot the HTTP side has shown. None may be
 * stored, none may hold an entry back from the chain, and an entry holding one already (an earlier
 * release stored it) is replaced by the next scan.
 */

let gw: Gateway | undefined;
let sim: RpcSimulator | undefined;
let proxy: http.Server | undefined;
/** A worker started again by a test (the gateway closes only the one it started). */
let restarted: WorkerRuntime | undefined;
afterEach(async () => {
  await restarted?.close();
  await gw?.close();
  await sim?.close();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  gw = sim = proxy = restarted = undefined;
});

/** Existence checks every half second. */
const QUICK = { ...FOLLOW, CACHE_FRESH_SECONDS: '3' };
const FORGED_OWNER = new PublicKey(Buffer.alloc(32, 9)).toBase58();

/** The subdomain name account of `label` under the watched parent. */
const subKeyOf = (label: string) => subdomainKey(label, domainKey(PARENT));

/** `label`'s name account as the stream slices it, with `owner` in its header when given. */
function slice(sim: RpcSimulator, label: string, owner?: string): Buffer {
  const data = sim.chain.getAccount(new PublicKey(subKeyOf(label)))?.data;
  if (!data) throw new Error(`no account for ${label}`);
  const cut = Buffer.from(data.subarray(HEAD_SLICE.offset, HEAD_SLICE.offset + HEAD_SLICE.length));
  if (owner) new PublicKey(owner).toBuffer().copy(cut, SCAN_SLICE.offset + SLICE_AT.owner);
  return cut;
}

/** Sends a notification of `label`'s account, with its slot written as `slot`, on the stream. */
function notify(sim: RpcSimulator, slot: string, label: string, owner?: string): void {
  const [sub] = sim.wsSubscriptions('program');
  if (sub === undefined) throw new Error('no subscription');
  const text = programNotificationText(sub, slot, subKeyOf(label), slice(sim, label, owner));
  if (!sim.wsSendRaw(sub, text)) throw new Error('not sent');
}

const entryKey = (g: Gateway) =>
  redisKeys(g.config.QUEUE_PREFIX).entryMeta(endpointId(g.sim.url), PARENT);

/** The owner the entry's accounts hold for `label`. */
async function ownerOf(g: Gateway, label: string): Promise<string | undefined> {
  const cache = new SubdomainCache(g.redis, g.config.QUEUE_PREFIX, 3_000, 600_000);
  return (await cache.getWithAccounts(endpointId(g.sim.url), PARENT))?.accounts?.[
    subKeyOf(label)
  ]?.[1];
}

describe('slots from the websocket', () => {
  it('refuses a slot of 2^63: a deletion still shows, the forged owner is never stored', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const owner = await ownerOf(gw, 'bullish');
    notify(sim, '9223372036854775808', 'bullish', FORGED_OWNER);
    await waitFor(async () => (await metric(gw as Gateway, 'sns_ws_notifications_total')) >= 1);
    expect(
      await metric(gw, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.refused }),
    ).toBe(1);
    sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    await waitFor(async () => !(await labels(gw as Gateway)).includes('hollaaa'), 15_000);
    expect(await labels(gw)).toEqual(['bullish', 'testing']);
    expect(await ownerOf(gw, 'bullish')).toBe(owner);
    const raw = (await gw.redis.get(entryKey(gw))) ?? '';
    expect(Number.isSafeInteger((JSON.parse(raw) as { slot: number }).slot)).toBe(true);
  });

  it('does not patch in a safe slot far ahead of the chain: re-reads instead, and follows on', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const owner = await ownerOf(gw, 'bullish');
    notify(sim, String(sim.chain.slot + 10_000_000), 'bullish', FORGED_OWNER);
    await waitFor(async () => (await metric(gw as Gateway, 'sns_ws_notifications_total')) >= 1);
    expect(
      await metric(gw, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.patched }),
    ).toBe(0);
    sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    await waitFor(async () => !(await labels(gw as Gateway)).includes('hollaaa'), 15_000);
    expect(await ownerOf(gw, 'bullish')).toBe(owner);
    // Additions are patched again from their notifications.
    sim.chain.addSubdomain(PARENT, 'later');
    await waitFor(async () => (await labels(gw as Gateway)).includes('later'), 15_000);
    const raw = (await gw.redis.get(entryKey(gw))) ?? '';
    expect((JSON.parse(raw) as { slot: number }).slot).toBeLessThan(sim.chain.slot + 1_000);
    expect(gw.logs.filter((line) => line.includes('slot ahead')).length).toBe(1);
  });

  it('checks deletions of an entry that holds a slot far ahead (an earlier release stored it)', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const key = entryKey(gw);
    const raw = (await gw.redis.get(key)) ?? '';
    await gw.redis.set(key, raw.replace(/^\{"slot":\d+/, '{"slot":4503599627370496'), 'KEEPTTL');
    sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    await waitFor(async () => !(await labels(gw as Gateway)).includes('hollaaa'), 15_000);
    expect(await labels(gw)).toEqual(['bullish', 'testing']);
  });

  it('never stores a slot of 1e309 and never answers 500 for it', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    notify(sim, '1e309', 'bullish', FORGED_OWNER);
    await waitFor(async () => (await metric(gw as Gateway, 'sns_ws_notifications_total')) >= 1);
    for (let i = 0; i < 20; i++) {
      const res = await gw.get(`/subdomains/${PARENT}`);
      expect(res.status).toBe(200);
      expect(await gw.redis.get(entryKey(gw))).not.toMatch(/Infinity|e\+|null,"rev"/);
      await elapse(100);
    }
    expect(
      await metric(gw, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.refused }),
    ).toBe(1);
  });

  it('refuses slots that are negative, fractions, strings or missing, logging once', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const slots = ['-1', '1.5', '"7"', 'null', '{}', '2e-3'];
    for (const slot of slots) notify(sim, slot, 'bullish', FORGED_OWNER);
    const outcome = (name: string) =>
      metric(gw as Gateway, 'sns_ws_notifications_total', { outcome: name });
    await waitFor(async () => (await outcome('refused')) >= slots.length);
    // Time is the subject: nothing more is refused or patched afterwards.
    await elapse(500);
    expect(await outcome('refused')).toBe(slots.length);
    expect(await outcome('patched')).toBe(0);
    expect(gw.logs.filter((line) => line.includes('notification refused')).length).toBe(1);
  });
});

describe('entries holding a slot no chain has (written by an earlier release)', () => {
  const poisoned = async (g: Gateway, slot: string) => {
    await g.redis.set(
      entryKey(g),
      `{"slot":${slot},"rev":7,"fetchedAt":${Date.now() - 3_600_000},"labels":["forged"]}`,
      'PX',
      600_000,
    );
  };

  for (const slot of ['Infinity', '9223372036854776000', '4503599627370496']) {
    it(`is replaced by the next scan when its slot is ${slot}`, async () => {
      gw = await startGateway({ env: { CACHE_FRESH_SECONDS: '3', CACHE_STALE_SECONDS: '600' } });
      await poisoned(gw, slot);
      await waitFor(async () => {
        const res = await (gw as Gateway).get(`/subdomains/${PARENT}`);
        expect(res.status).toBe(200);
        return JSON.stringify(res.body.result) === '["bullish","hollaaa","testing"]';
      }, 10_000);
    });
  }
});

/**
 * A proxy in front of the simulator's HTTP side that, while `bump.on`, adds 10^9 to the context
 * slot of getProgramAccounts replies: one node of the provider's pool answering with a slot of
 * another cluster, or a bug. The data is the chain's.
 */
async function slotBumpingProxy(target: string, bump: { on: boolean }): Promise<string> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      void fetch(target, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
        .then((r) => r.text())
        .then((text) => {
          const out =
            bump.on && body.includes('getProgramAccounts')
              ? text.replace(
                  /("context":\{[^}]*"slot":)(\d+)/,
                  (_m, head: string, slot: string) => {
                    return `${head}${Number(slot) + 1e9}`;
                  },
                )
              : text;
          res.writeHead(200, { 'content-type': 'application/json' }).end(out);
        })
        .catch(() => res.writeHead(502).end());
    });
  });
  proxy = server;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('slots from the HTTP side', () => {
  for (const anchored of [true, false]) {
    it(`one scan reply with a slot 10^9 ahead ${anchored ? 'is refused' : 'before the clock has an anchor is replaced'}: the entry does not freeze, a subdomain added later shows`, async () => {
      sim = await startRpcSimulator({ chain: seedDemo() });
      const bump = { on: false };
      const url = await slotBumpingProxy(sim.url, bump);
      gw = await startGateway({
        sim,
        env: {
          RPC_URL: url,
          RPC_WS_URL: sim.wsUrl,
          CACHE_FRESH_SECONDS: '1',
          CACHE_STALE_SECONDS: '600',
          COLD_MISS_LIMIT: '1000',
          HOT_KEYS_TOP_N: '0',
        },
      });
      const g = gw;
      const key = redisKeys(g.config.QUEUE_PREFIX).entryMeta(endpointId(url), 'demo');
      const storedSlot = async () =>
        (JSON.parse((await g.redis.get(key)) ?? '{}') as { slot?: number | null }).slot ?? 0;
      const refused = () => g.logs.filter((line) => line.includes('scan reply slot past')).length;
      /** Asks for the entry once it is stale, and waits for the refresh job that causes to end. */
      const rescan = async () => {
        await elapse(1_100); // past CACHE_FRESH_SECONDS: the next ask finds the entry stale
        const jobs = () => metric(g, 'sns_refresh_jobs_total');
        const ended = await jobs();
        const calls = g.sim.callCount('getProgramAccounts');
        await g.get('/subdomains/demo');
        await waitFor(() => g.sim.callCount('getProgramAccounts') > calls, 5_000);
        await waitFor(async () => (await jobs()) > ended, 5_000);
      };
      expect((await g.get('/subdomains/demo')).status).toBe(200);
      // A second honest scan anchors the clock (two replies agree), or the bumped one comes
      // second, while the first has nothing to agree with.
      if (anchored) await rescan();
      bump.on = true;
      await rescan();
      bump.on = false;
      if (anchored) expect(await storedSlot()).toBeLessThan(1e9);
      else expect(await storedSlot()).toBeGreaterThan(1e9);
      g.sim.chain.addSubdomain('demo', 'zeta');
      let last: unknown;
      const shows = async () => {
        const res = await g.get('/subdomains/demo');
        last = res.body.result;
        return Array.isArray(last) && last.includes('zeta');
      };
      await waitFor(shows, 10_000).catch(() => undefined);
      expect(last).toContain('zeta');
      expect(refused()).toBe(anchored ? 1 : 0);
      expect(await storedSlot()).toBeLessThan(g.sim.chain.slot + 1_000);
    });
  }

  it('a restarted worker does not take a slot stored far ahead for where the chain is', async () => {
    gw = await startGateway({ env: QUICK });
    const g = gw;
    await watched(g, g.sim);
    // An entry written by an earlier release, or a process that believed a bad reply: its scan
    // slot and slot far ahead, scanned just now (so no gap read is owed by its time).
    const key = entryKey(g);
    const ahead = g.sim.chain.slot + 1_000_000_000;
    const raw = (await g.redis.get(key)) ?? '';
    const entry = JSON.parse(raw) as Record<string, unknown>;
    const poisoned = JSON.stringify({ ...entry, scanSlot: ahead, scannedAt: Date.now() + 60_000 });
    await g.redis.set(key, poisoned.replace(/^\{"slot":\d+/, `{"slot":${ahead}`), 'KEEPTTL');
    await g.worker?.close();
    restarted = await startWorker(g.config, g.metrics, createLogger('silent'), {
      serveMetrics: false,
    });
    g.sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    g.sim.chain.addSubdomain(PARENT, 'later');
    // Behaviour, not latency (that is the bench's): a new worker trusts no slot until two of its
    // own replies agree, so on a loaded machine the scans that replace the entry take a while.
    await waitFor(async () => {
      const now = await labels(g);
      return !now.includes('hollaaa') && now.includes('later');
    }, 60_000);
    const stored = JSON.parse((await g.redis.get(key)) ?? '{}') as { slot?: number };
    expect(stored.slot ?? 0).toBeLessThan(g.sim.chain.slot + 1_000);
  }, 90_000);

  it('re-reads, not ignores, a change the stream brings to an entry holding a slot far ahead', async () => {
    // A window of ten minutes: neither the existence checks (first due a window after a parent
    // is followed) nor an entry gone stale correct the entry meanwhile; only the change can.
    gw = await startGateway({ env: { ...FOLLOW, CACHE_FRESH_SECONDS: '600' } });
    const g = gw;
    await watched(g, g.sim);
    const key = entryKey(g);
    const ahead = g.sim.chain.slot + 1_000_000_000;
    const entry = JSON.parse((await g.redis.get(key)) ?? '') as Record<string, unknown>;
    const poisoned = JSON.stringify({ ...entry, scanSlot: ahead, scannedAt: Date.now() + 60_000 });
    await g.redis.set(key, poisoned.replace(/^\{"slot":\d+/, `{"slot":${ahead}`), 'KEEPTTL');
    await g.worker?.close();
    restarted = await startWorker(g.config, g.metrics, createLogger('silent'), {
      serveMetrics: false,
    });
    // The new worker vouches for the stream: its gap is healed, so its slot clock has an anchor
    // and every slot the stream brings now is believed.
    await waitFor(async () => (await metric(g, 'sns_follow_healthy')) === 1, 30_000);
    g.sim.chain.addSubdomain(PARENT, 'later');
    await waitFor(async () => (await labels(g)).includes('later'), 30_000, "'later' listed");
    // The store re-read the parent; the patcher still counts the notification as a re-read.
    expect(
      await metric(g, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.reread }),
    ).toBeGreaterThanOrEqual(1);
    const stored = JSON.parse((await g.redis.get(key)) ?? '{}') as { slot?: number };
    expect(stored.slot ?? 0).toBeLessThan(g.sim.chain.slot + 1_000);
  }, 90_000);

  it('re-reads, not ignores, an owner the existence check finds wrong in an entry holding a slot far ahead', async () => {
    // A window of three seconds: the first existence check is due that long after the parent is
    // followed, and nothing else corrects a followed entry the stream vouches for.
    gw = await startGateway({ env: QUICK });
    const g = gw;
    await watched(g, g.sim);
    const owner = await ownerOf(g, 'bullish');
    const id = endpointId(g.sim.url);
    const keys = redisKeys(g.config.QUEUE_PREFIX);
    const account = subKeyOf('bullish');
    const raw = await g.redis.hget(keys.entryMembers(id, PARENT), account);
    const [label, , memberSlot] = JSON.parse(raw ?? '') as [string, string, number];
    // An entry an earlier release stored: a forged transfer the websocket reported, and a slot
    // and scan slot no chain has. Written at once, so no check comes between the two.
    const ahead = g.sim.chain.slot + 1_000_000_000;
    const entry = JSON.parse((await g.redis.get(entryKey(g))) ?? '') as Record<string, unknown>;
    const poisoned = JSON.stringify({ ...entry, scanSlot: ahead }).replace(
      /^\{"slot":\d+/,
      `{"slot":${ahead}`,
    );
    await g.redis
      .multi()
      .hset(
        keys.entryMembers(id, PARENT),
        account,
        JSON.stringify([label, FORGED_OWNER, memberSlot]),
      )
      .set(entryKey(g), poisoned, 'KEEPTTL')
      .exec();
    expect(await ownerOf(g, 'bullish')).toBe(FORGED_OWNER);
    const scans = g.sim.callCount('getProgramAccounts');
    await waitFor(
      async () => (await ownerOf(g, 'bullish')) === owner,
      20_000,
      'the owner the chain holds',
    );
    expect(g.sim.callCount('getProgramAccounts')).toBeGreaterThan(scans);
    expect(
      await metric(g, 'sns_deletion_checks_total', { outcome: DELETION_CHECK_OUTCOME.scanned }),
    ).toBeGreaterThanOrEqual(1);
    const stored = JSON.parse((await g.redis.get(entryKey(g))) ?? '{}') as { slot?: number };
    expect(stored.slot ?? 0).toBeLessThan(g.sim.chain.slot + 1_000);
  }, 60_000);
});
