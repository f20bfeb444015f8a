import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { clientKeyOf } from '../src/api/http/plugins/client-identity.js';
import { createMetrics } from '../src/core/metrics.js';
import { CreditBudget, shareCaps, utcDay } from '../src/core/rpc/budget.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { chargedTo, CreditBudgetRefusal, CreditMeter } from '../worker/rpc/credits.js';
import { metric } from './support/freshness.js';
import {
  deletePrefix,
  seedDemo,
  startGateway,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import { elapse } from './support/wait.js';
import { deleteLogs, fakeDeletions } from './support/follow-fakes.js';

/**
 * The day's credits shared so that nobody anonymous can drain them (docs/design.md, "Budget"):
 * each client a share, a share for work no request asks for, a reserve for cold misses of parents
 * known to exist.
 */

const HOUR = 3_600_000;
const NOON = Date.UTC(2026, 10, 24) + 12 * HOUR;

describe('the credit meter charges every call to an account', () => {
  let redis: Redis;
  let prefix: string;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterEach(async () => {
    await deletePrefix(redis, prefix);
  });
  afterAll(() => redis.disconnect());

  /** A meter over a budget of `budget` credits at noon. */
  const meterOf = (budget: number, now = NOON) => {
    prefix = uniquePrefix();
    const metrics = createMetrics(new Registry(), { defaultMetrics: false });
    const view = new CreditBudget({
      redis,
      prefix,
      creditsPerDay: budget,
      shares: { client: 0.02, network: 0.05, proactive: 0.3, reserve: 0.2 },
      freshMs: 1000,
      metrics,
      now: () => now,
    });
    const meter = new CreditMeter({ metrics, redis, prefix, budget: view, now: () => now });
    const shares = async () => redis.hgetall(redisKeys(prefix).rpcCreditShares(utcDay(now)));
    return { meter, view, shares };
  };

  /** Reserves `credits` as `account` until refused: how many went through, and the refusal. */
  async function drain(
    meter: CreditMeter,
    account: Parameters<typeof chargedTo>[0],
    credits: number,
    most = 10_000,
  ): Promise<{ reserved: number; refusal: CreditBudgetRefusal | undefined }> {
    let reserved = 0;
    for (let i = 0; i < most; i++) {
      try {
        await chargedTo(account, () => meter.reserve('getProgramAccounts', credits));
        reserved++;
      } catch (err) {
        if (err instanceof CreditBudgetRefusal) return { reserved, refusal: err };
        throw err;
      }
    }
    return { reserved, refusal: undefined };
  }

  it('holds one client to its share, and the next client still spends from the pool', async () => {
    const { meter, shares } = meterOf(2000);
    const first = await drain(meter, { kind: 'client', client: '10.0.0.1', reserve: true }, 10);
    // 2% of 2000: four scans.
    expect(first.reserved).toBe(4);
    expect(first.refusal?.kind).toBe('client');
    const second = await drain(meter, { kind: 'client', client: '10.0.0.2', reserve: true }, 10);
    expect(second.reserved).toBe(4);
    const spent = await shares();
    expect(Number(spent['client:10.0.0.1'])).toBe(40);
    expect(Number(spent.pool)).toBe(80);
  });

  it('holds the /64s of one IPv6 /48 to the network share together', async () => {
    const { meter, shares } = meterOf(2000);
    let reserved = 0;
    for (let i = 0; i < 40; i++) {
      const client = clientKeyOf(`2001:db8:7:${i.toString(16)}::1`);
      reserved += (await drain(meter, { kind: 'client', client, reserve: true }, 10)).reserved;
    }
    // 5% of 2000 for the whole /48, where 40 clients alone would have had 1,600.
    expect(reserved * 10).toBe(100);
    expect(Number((await shares())['network:2001:db8:7::/48'])).toBe(100);
  });

  it('spends the reserve only for a parent known to exist, once the pool is spent', async () => {
    const { meter, shares } = meterOf(1000);
    // The pool (half of 1000) spent by 25 clients of 20 each.
    for (let i = 0; i < 25; i++) {
      await drain(meter, { kind: 'client', client: `10.0.1.${i}`, reserve: false }, 10);
    }
    expect(Number((await shares()).pool)).toBe(500);
    const unknown = await drain(meter, { kind: 'client', client: '10.0.2.1', reserve: false }, 1);
    expect(unknown).toMatchObject({ reserved: 0, refusal: { kind: 'budget' } });
    const known = await drain(meter, { kind: 'client', client: '10.0.2.1', reserve: true }, 10);
    expect(known.reserved).toBe(2);
    expect(Number((await shares()).reserve)).toBe(20);
  });

  it('paces the proactive share over the day, and charges unreserved spends to it', async () => {
    const morning = Date.UTC(2026, 10, 24) + 2.4 * HOUR;
    const { meter, shares } = meterOf(1000, morning);
    const cap = shareCaps(
      1000,
      { client: 0.02, network: 0.05, proactive: 0.3, reserve: 0.2 },
      morning,
    );
    // 0.3 of the budget times (a tenth of the day gone + a fifth): 90 credits.
    expect(cap.proactive).toBeCloseTo(90);
    const ahead = await drain(meter, { kind: 'proactive' }, 10);
    expect(ahead).toMatchObject({ reserved: 9, refusal: { kind: 'proactive' } });
    // A websocket's credits arrive unasked and outside any refresh: the proactive share's.
    meter.spend('wsMegabyte', 'default', 2);
    await meter.flush();
    expect(Number((await shares()).proactive)).toBe(92);
  });

  it('puts back the shares Redis lost with the day: a client that spent its share stays refused', async () => {
    const { meter, shares } = meterOf(2000);
    const client = { kind: 'client', client: '10.0.4.1', reserve: false } as const;
    // The client's share is 40 credits of 2,000: four scans.
    expect(await drain(meter, client, 10)).toMatchObject({
      reserved: 4,
      refusal: { kind: 'client' },
    });
    await drain(meter, { kind: 'proactive' }, 10, 3);
    const before = await shares();
    expect(before).toMatchObject({ 'client:10.0.4.1': '40', pool: '40', proactive: '30' });
    // Redis loses the day (a restart without persistence): the counter and the shares hash.
    const keys = redisKeys(prefix);
    await redis.del(keys.rpcCredits(utcDay(NOON)), keys.rpcCreditShares(utcDay(NOON)));
    // Not a fresh share: the client is refused as before, and the fields are back.
    expect(await drain(meter, client, 10)).toMatchObject({
      reserved: 0,
      refusal: { kind: 'client' },
    });
    expect(await shares()).toMatchObject({ 'client:10.0.4.1': '40', pool: '40' });
    expect(Number(await redis.get(keys.rpcCredits(utcDay(NOON))))).toBe(70);
    // Another client spends from the pool, on top of what it held; the proactive share too.
    expect(
      await drain(meter, { kind: 'client', client: '10.0.4.2', reserve: false }, 10, 1),
    ).toMatchObject({ reserved: 1 });
    meter.spend('wsMegabyte', 'default', 2);
    await meter.flush();
    expect(await shares()).toMatchObject({ pool: '50', proactive: '32', 'client:10.0.4.2': '10' });
    expect(await redis.pttl(keys.rpcCreditShares(utcDay(NOON)))).toBeGreaterThan(0);
  });

  it("gives up a followed Delete's read once the proactive share is spent at its pace, not the day", async () => {
    const morning = Date.UTC(2026, 10, 24) + 2.4 * HOUR;
    const { meter, view } = meterOf(1000, morning);
    const { rpc, lost, deletions } = fakeDeletions({
      affordable: () => view.proactiveAffordable(),
    });
    const deleting = (signature: string) => deleteLogs(signature);
    // A transaction that failed: read once, it changed nothing.
    rpc.setTx('affordable', { slot: 60, meta: { err: { InstructionError: [0, 'Custom'] } } });
    await view.read();
    expect(view.proactiveAffordable()).toBe(true);
    deletions.onLogs(deleting('affordable'));
    await deletions.idle();
    expect(rpc.count('getTransaction affordable')).toBe(1);
    // The share's 90 credits of the morning spent by refreshes ahead: a tenth of the day.
    expect(await drain(meter, { kind: 'proactive' }, 10)).toMatchObject({ reserved: 9 });
    await view.read();
    expect(view.state()).toBe('normal');
    expect(view.proactiveAffordable()).toBe(false);
    rpc.calls.length = 0;
    deletions.onLogs(deleting('paced'));
    await deletions.idle();
    expect(rpc.calls).toEqual([]);
    expect(lost).toContain('paced');
    // At noon the share's pace has room again.
    expect(view.proactiveAffordable(1, NOON)).toBe(true);
  });

  it('gives a refused or unspent reservation back to every field it took', async () => {
    const { meter, shares } = meterOf(2000);
    const held = await chargedTo({ kind: 'client', client: '10.0.3.1', reserve: false }, () =>
      meter.reserve('getProgramAccounts', 10),
    );
    meter.release(held);
    await waitFor(async () => Number((await shares()).pool) === 0);
    expect(Number((await shares())['client:10.0.3.1'])).toBe(0);
  });
});

/** Credits spent today by the gateway, as its counter holds them. */
const spentToday = async (g: Gateway) =>
  Number((await g.redis.get(redisKeys(g.config.QUEUE_PREFIX).rpcCredits(utcDay(Date.now())))) ?? 0);

describe('a budget nobody anonymous can drain', () => {
  let gw: Gateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  it('keeps the budget and spend figures off the public port, on API_METRICS_PORT', async () => {
    gw = await startGateway({ env: { RPC_CREDITS_PER_DAY: '1000' } });
    expect((await gw.get('/subdomains/67679')).status).toBe(200);
    const open = await fetch(`${gw.baseUrl}/metrics`);
    expect(open.status).toBe(404);
    expect(await open.text()).not.toContain('sns_rpc_budget');
    const kept = await fetch(gw.metricsUrl);
    expect(kept.status).toBe(200);
    expect(await kept.text()).toContain('sns_rpc_budget_spent_credits');
    expect(new URL(gw.metricsUrl).port).not.toBe(new URL(gw.baseUrl).port);
  });

  it('lets eight addresses flooding for an hour (one second a minute) spend at most half the budget, and still answers a new client', async () => {
    const budget = 2000;
    const chain = seedDemo();
    const real = Array.from({ length: 60 }, (_, i) => `realparent${i}`);
    for (const parent of real) chain.addSubdomain(parent, 'sub');
    gw = await startGateway({
      chain,
      env: {
        RPC_CREDITS_PER_DAY: String(budget),
        // A minute of the cold-miss limit in a second: the flood is an hour in a minute.
        COLD_MISS_LIMIT: '30',
        COLD_MISS_WINDOW_SECONDS: '1',
        // Entries go stale at once, so stale hits start refreshes too, and refresh-ahead runs.
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '600',
        RPC_MAX_PER_SECOND: '500',
        WORKER_CONCURRENCY: '16',
        HOT_KEYS_MIN_CLIENTS: '2',
      },
    });
    const g = gw;
    const attackers = Array.from({ length: 8 }, (_, i) => `198.51.100.${i + 1}`);
    const statuses = new Map<number, number>();
    const ask = async (parent: string, from: string) => {
      const res = await g.api.app.inject({
        method: 'GET',
        url: `/subdomains/${parent}`,
        remoteAddress: from,
      });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      return res.statusCode;
    };
    const floodMs = 8_000;
    const started = Date.now();
    await Promise.all(
      attackers.map(async (from, a) => {
        const inFlight: Array<Promise<number>> = [];
        for (let i = 0; Date.now() - started < floodMs; i++) {
          // Real parents (a scan each), made-up ones (the cheap attack), and the same real
          // parents as the other attackers (so they are hot, and refreshed ahead).
          const parent =
            i % 3 === 0 ? `madeup${a}x${i}` : (real[(i * 7 + a * 13) % real.length] ?? 'bonfida');
          inFlight.push(ask(parent, from));
          // The flood's rate: a request every 20 ms per address.
          await elapse(20);
        }
        await Promise.all(inFlight);
      }),
    );
    const keys = redisKeys(g.config.QUEUE_PREFIX);
    const attackersSpent = async () => {
      const shares = await g.redis.hgetall(keys.rpcCreditShares(utcDay(Date.now())));
      return attackers.map((from) => Number(shares[`client:${from}`] ?? 0));
    };
    // Every attacker has spent its share (2% of the day) and no more.
    await waitFor(async () =>
      (await attackersSpent()).every((spent) => spent > 0.02 * budget - 11),
    );
    const before = await attackersSpent();
    for (const spent of before) expect(spent).toBeLessThanOrEqual(0.02 * budget + 1e-6);
    // The hour goes on: the flood is refused (429) and spends nothing more.
    const more: Array<Promise<number>> = [];
    for (let i = 0; i < 80; i++) {
      more.push(ask(`late${i}`, attackers[i % 8] ?? '198.51.100.1'));
    }
    expect(new Set(await Promise.all(more))).toEqual(new Set([429]));
    expect(await attackersSpent()).toEqual(before);
    // A new client asks a real parent nobody asked yet: a cold miss it pays from its own share.
    chain.addSubdomain('newcomer', 'first');
    const answer = await g.api.app.inject({
      method: 'GET',
      url: '/subdomains/newcomer',
      remoteAddress: '203.0.113.7',
    });
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toMatchObject({ s: 'ok', result: ['first'] });
    const spent = await spentToday(g);
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(budget / 2);
    expect(await metric(g, 'sns_http_refusals_total', { reason: 'client_share' })).toBeGreaterThan(
      0,
    );
  });
});
