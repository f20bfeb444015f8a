import { PublicKey } from '@solana/web3.js';
import { afterEach, describe, expect, it } from 'vitest';
import { SubdomainCache } from '../src/cache/subdomain-cache.js';
import { endpointId } from '../src/rpc/endpoint.js';
import { redisKeys } from '../src/redis-keys.js';
import { subdomainKey } from '../src/sns/change.js';
import { SCAN_SLICE, SLICE_AT } from '../src/sns/discovery-decode.js';
import { domainKey } from '../src/sns/pda.js';
import { FOLLOW, labels, metric, PARENT, watched } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { programNotificationText, type RpcSimulator } from './support/rpc-sim/index.js';

/**
 * Slots the provider sends that no chain has (docs/design.md, "Freshness"): not safe integers,
 * negative, fractions, strings, or far ahead of every slot the HTTP side has shown. None may be
 * stored, none may hold an entry back from the chain, and an entry holding one already (an earlier
 * release stored it) is replaced by the next scan.
 */

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

/** Existence checks every half second. */
const QUICK = { ...FOLLOW, CACHE_FRESH_SECONDS: '3' };
const FORGED_OWNER = new PublicKey(Buffer.alloc(32, 9)).toBase58();

/** The subdomain name account of `label` under the watched parent. */
const subKeyOf = (label: string) => subdomainKey(label, domainKey(PARENT));

/** `label`'s name account as the subscription slices it, with `owner` in its header when given. */
function slice(sim: RpcSimulator, label: string, owner?: string): Buffer {
  const data = sim.chain.getAccount(new PublicKey(subKeyOf(label)))?.data;
  if (!data) throw new Error(`no account for ${label}`);
  const cut = Buffer.from(data.subarray(SCAN_SLICE.offset, SCAN_SLICE.offset + SCAN_SLICE.length));
  if (owner) new PublicKey(owner).toBuffer().copy(cut, SLICE_AT.owner);
  return cut;
}

/** Sends a notification of `label`'s account, with its slot written as `slot`, to the parent's subscription. */
function notify(sim: RpcSimulator, slot: string, label: string, owner?: string): void {
  const [sub] = sim.wsSubscriptions('program');
  if (sub === undefined) throw new Error('no subscription');
  const text = programNotificationText(sub, slot, subKeyOf(label), slice(sim, label, owner));
  if (!sim.wsSendRaw(sub, text)) throw new Error('not sent');
}

const entryKey = (g: Gateway) =>
  redisKeys(g.config.QUEUE_PREFIX).subdomainEntry(endpointId(g.sim.url), PARENT);

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
    expect(await metric(gw, 'sns_ws_notifications_total', { outcome: 'refused' })).toBe(1);
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
    expect(await metric(gw, 'sns_ws_notifications_total', { outcome: 'patched' })).toBe(0);
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
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await metric(gw, 'sns_ws_notifications_total', { outcome: 'refused' })).toBe(1);
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
    await new Promise((r) => setTimeout(r, 500));
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
