import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createMetrics, REFRESH_OUTCOME } from '../src/core/metrics.js';
import {
  BUDGET_STRETCH_FACTOR,
  budgetState,
  CreditBudget,
  msToNextUtcDay,
  softThreshold,
  utcDay,
} from '../src/core/rpc/budget.js';
import type { RedisClient } from '../src/core/redis.js';
import { redisKeys } from '../src/core/redis-keys.js';
import {
  REFRESH_JOB,
  REFRESH_QUEUE,
  type RefreshJobData,
} from '../src/core/queue/refresh-queue.js';
import { runHotParentScan } from '../worker/hot-parent-scan.js';
import { chargedTo, CreditBudgetRefusal, CreditMeter } from '../worker/rpc/credits.js';
import { RpcClient } from '../worker/rpc/client.js';
import { Agents } from '../worker/rpc/transport.js';
import { DecodeThread } from '../worker/sns/decode-thread.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { loadConfig } from '../src/core/config.js';
import { FOLLOW, metric, watched } from './support/freshness.js';
import {
  deletePrefix,
  seedDemo,
  startGateway,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import { startRpcSimulator } from '../tools/rpc-sim/index.js';
import { elapse } from './support/wait.js';

const HOUR = 3_600_000;
const MIDNIGHT = Date.UTC(2026, 10, 24);
describe('the budget rule', () => {
  it('stretches from the even pace plus a fifth of the budget, at most 80%, and is exhausted at 100%', () => {
    expect(softThreshold(1000, MIDNIGHT)).toBeCloseTo(200);
    expect(softThreshold(1000, MIDNIGHT + 12 * HOUR)).toBeCloseTo(700);
    expect(softThreshold(1000, MIDNIGHT + 15 * HOUR)).toBeCloseTo(800);
    expect(softThreshold(1000, MIDNIGHT + 23.9 * HOUR)).toBeCloseTo(800);
    // An hour in, 25% spent is ahead of the pace (4% + 20%); at noon it is well behind it.
    expect(budgetState(250, 1000, MIDNIGHT + HOUR)).toBe('stretched');
    expect(budgetState(250, 1000, MIDNIGHT + 12 * HOUR)).toBe('normal');
    expect(budgetState(799, 1000, MIDNIGHT + 20 * HOUR)).toBe('normal');
    expect(budgetState(800, 1000, MIDNIGHT + 20 * HOUR)).toBe('stretched');
    expect(budgetState(1000, 1000, MIDNIGHT + 20 * HOUR)).toBe('exhausted');
    expect(budgetState(1e12, undefined, MIDNIGHT)).toBe('normal');
  });

  it('names UTC days and counts the time to the next one', () => {
    expect(utcDay(MIDNIGHT + 23 * HOUR)).toBe('2026-11-24');
    expect(utcDay(MIDNIGHT + 24 * HOUR)).toBe('2026-11-25');
    expect(msToNextUtcDay(MIDNIGHT + 23 * HOUR)).toBe(HOUR);
    expect(msToNextUtcDay(MIDNIGHT)).toBe(24 * HOUR);
  });
});

describe('the budget view and the credit meter on Redis', () => {
  let redis: Redis;
  let prefix: string;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterEach(async () => {
    await deletePrefix(redis, prefix);
  });
  afterAll(() => redis.disconnect());

  it('reads the counter at most once a second, one read in flight, whoever asks', async () => {
    prefix = uniquePrefix();
    let reads = 0;
    const counting = new Proxy(redis, {
      get(target, prop, receiver) {
        if (prop !== 'get') return Reflect.get(target, prop, receiver) as unknown;
        return async (key: string) => {
          reads++;
          // A slow read, so that asks meet one in flight: what is tested is how many overlap.
          await elapse(30);
          return target.get(key);
        };
      },
    }) as unknown as RedisClient;
    let now = MIDNIGHT + 20 * HOUR;
    await redis.set(redisKeys(prefix).rpcCredits(utcDay(now)), '850');
    const budget = new CreditBudget({
      redis: counting,
      prefix,
      creditsPerDay: 1000,
      freshMs: 1000,
      metrics: createMetrics(new Registry(), { defaultMetrics: false }),
      now: () => now,
    });
    for (let i = 0; i < 100; i++) expect(budget.state()).toBe('normal');
    await waitFor(() => budget.spent() === 850);
    expect(reads).toBe(1);
    now += 500;
    for (let i = 0; i < 100; i++) expect(budget.state()).toBe('stretched');
    expect(reads).toBe(1);
    now += 600;
    budget.state();
    budget.state();
    expect(reads).toBe(2);
    // Stretched: a stale entry waits for the stretched window before its refresh.
    expect(budget.staleRefreshAllowed(now - 2_000)).toBe(false);
    expect(budget.staleRefreshAllowed(now - BUDGET_STRETCH_FACTOR * 1000)).toBe(true);
  });

  it('follows the counter down when reservations are given back (a storm of 429s)', async () => {
    prefix = uniquePrefix();
    const now = MIDNIGHT + 20 * HOUR;
    const key = redisKeys(prefix).rpcCredits(utcDay(now));
    const budget = new CreditBudget({
      redis,
      prefix,
      creditsPerDay: 1000,
      freshMs: 1000,
      metrics: createMetrics(new Registry(), { defaultMetrics: false }),
      now: () => now,
    });
    // 50 calls of 10 reserved at once, read while held...
    await redis.set(key, '1000');
    await budget.read();
    expect(budget.state()).toBe('exhausted');
    // ...then all given back: the day is half spent, not over.
    await redis.set(key, '500');
    await budget.read();
    expect(budget.spent()).toBe(500);
    expect(budget.state()).toBe('normal');
  });

  it("counts the configured endpoint's spend in the day's counter, never an override's, and refuses a call past the budget", async () => {
    prefix = uniquePrefix();
    const metrics = createMetrics(new Registry(), { defaultMetrics: false });
    // One client may spend the whole pool here, which is nearly the whole day.
    const shares = { client: 1, network: 1, proactive: 0.01, reserve: 0.01 };
    const budget = new CreditBudget({
      redis,
      prefix,
      creditsPerDay: 25,
      shares,
      freshMs: 1000,
      metrics,
    });
    const meter = new CreditMeter({ metrics, redis, prefix, budget, flushMs: 10 });
    const client = { kind: 'client', client: '10.0.0.1', reserve: false } as const;
    const reserve = () => chargedTo({ ...client }, () => meter.reserve('getProgramAccounts', 10));
    const key = redisKeys(prefix).rpcCredits(utcDay(Date.now()));
    meter.spend('wsConnection', 'default', 1);
    meter.spend('wsMegabyte', 'default', 0.5);
    meter.spend('getProgramAccounts', 'override', 10);
    await meter.close();
    expect(Number(await redis.get(key))).toBeCloseTo(1.5);
    expect(await redis.pttl(key)).toBeGreaterThan(86_400_000);

    const held = await reserve();
    meter.spend('getProgramAccounts', 'default', 10, held);
    expect(Number(await redis.get(key))).toBeCloseTo(11.5);
    const given = await reserve();
    meter.release(given);
    await waitFor(async () => Number(await redis.get(key)) < 12);
    await reserve();
    await expect(reserve()).rejects.toBeInstanceOf(CreditBudgetRefusal);
    expect(Number(await redis.get(key))).toBeCloseTo(21.5);
    expect(budget.spent()).toBeCloseTo(21.5);
    await meter.close();
  });

  it('keeps the credits of a call the provider answered too large or did not answer in time', async () => {
    prefix = uniquePrefix();
    const sim = await startRpcSimulator();
    const agents = new Agents();
    const thread = new DecodeThread({ heapMb: 64, taskMs: 5_000 });
    try {
      const metrics = createMetrics(new Registry(), { defaultMetrics: false });
      const budget = new CreditBudget({
        redis,
        prefix,
        creditsPerDay: 100,
        freshMs: 1000,
        metrics,
      });
      const credits = new CreditMeter({ metrics, redis, prefix, budget });
      const client = (maxResponseBytes: number) =>
        new RpcClient({
          metrics,
          agents,
          credits,
          timeoutMs: 200,
          retries: 0,
          maxResponseBytes,
          isTrusted: () => true,
          costs: { ...loadConfig({}).RPC_CREDITS, getSlot: 3 },
          minBackoffMs: 10,
        });
      const endpoint = { kind: 'default' as const, url: sim.url, id: endpointId(sim.url) };
      const key = redisKeys(prefix).rpcCredits(utcDay(Date.now()));
      const counter = async () => Number((await redis.get(key)) ?? 0);
      // Answered, past the byte bound: the provider served (and billed) it.
      await expect(
        client(8).call(endpoint, 'getSlot', [], { decode: thread.envelope<number>() }),
      ).rejects.toThrow();
      await waitFor(async () => (await counter()) === 3, 2_000);
      // Sent, unanswered in time: the provider may well have served it.
      sim.setFaults([{ kind: 'hang' }]);
      await expect(
        client(1 << 20).call(endpoint, 'getSlot', [], { decode: thread.envelope<number>() }),
      ).rejects.toThrow();
      await waitFor(async () => (await counter()) === 6, 2_000);
      await credits.close();
    } finally {
      agents.destroy();
      await thread.close();
      await sim.close();
    }
  });

  it('refreshes no hot parent ahead past the soft threshold', async () => {
    prefix = uniquePrefix();
    const now = Date.now();
    await redis.set(redisKeys(prefix).rpcCredits(utcDay(now)), '900');
    const budget = new CreditBudget({
      redis,
      prefix,
      creditsPerDay: 1000,
      freshMs: 1000,
      metrics: createMetrics(new Registry(), { defaultMetrics: false }),
    });
    await budget.read();
    const untouchable = new Proxy(
      {},
      {
        get() {
          throw new Error('the scan looked at the hot parents');
        },
      },
    );
    const scan = await runHotParentScan({
      redis: untouchable as RedisClient,
      cache: untouchable as never,
      queue: untouchable as never,
      prefix,
      freshMs: 1000,
      topN: 10,
      minClients: 1,
      defaultEndpointId: 'x',
      budget,
    });
    expect(scan).toEqual({ scanned: 0, queued: 0 });
  });
});

/** The gateway's own credits counted on the configured endpoint. */
const defaultCredits = (g: Gateway) => metric(g, 'sns_rpc_credits_total', { endpoint: 'default' });
const counterKey = (g: Gateway) => redisKeys(g.config.QUEUE_PREFIX).rpcCredits(utcDay(Date.now()));
const counter = async (g: Gateway) => Number((await g.redis.get(counterKey(g))) ?? 0);

describe('the daily credit budget of a gateway', () => {
  const gateways: Gateway[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const g of gateways.splice(0).reverse()) await g.close();
    for (const close of closers.splice(0)) await close();
  });

  it('adds the spend of two replicas up once, and leaves ?rpc= overrides out', async () => {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    const env = {
      RPC_CREDITS_PER_DAY: '100000',
      HOT_KEYS_TOP_N: '0',
      RPC_OVERRIDE_ALLOWLIST: sim.url,
    };
    const first = await startGateway({ sim, env });
    gateways.push(first);
    const second = await startGateway({
      sim,
      env: { ...env, QUEUE_PREFIX: first.config.QUEUE_PREFIX },
    });
    gateways.push(second);
    closers.push(() => sim.close());
    first.sim.resetCalls();
    // One parent asked on both replicas at once: one refresh; the others on one each.
    const answers = await Promise.all([
      first.get('/subdomains/67679'),
      second.get('/subdomains/67679'),
      first.get('/subdomains/bonfida'),
      second.get('/subdomains/demo'),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const scans = first.sim.callCount('getProgramAccounts');
    const others = first.sim.callCount() - scans;
    expect(scans).toBe(3);
    const spent = 10 * scans + others;
    // An override through the same server is the client's spend, not the operator's.
    const override = await second.get(
      `/subdomains/bonfida?rpc=${encodeURIComponent(first.sim.url)}`,
    );
    expect(override.status).toBe(200);
    await waitFor(async () => (await counter(first)) >= spent);
    // Time is the subject: nothing more may be counted once the calls are in.
    await elapse(400);
    expect(await counter(first)).toBeCloseTo(spent);
    expect((await defaultCredits(first)) + (await defaultCredits(second))).toBeCloseTo(spent);
    const overrideCredits = async (g: Gateway) =>
      metric(g, 'sns_rpc_credits_total', { endpoint: 'override' });
    // Either replica's worker ran it.
    expect((await overrideCredits(first)) + (await overrideCredits(second))).toBe(10);
    for (const g of [first, second]) {
      expect(await metric(g, 'sns_rpc_budget_spent_credits')).toBeCloseTo(spent);
      expect(await metric(g, 'sns_rpc_budget_credits')).toBe(100_000);
    }
  });

  it("counts the websocket's connections and bytes in the day's counter too", async () => {
    const g = await startGateway({ env: { ...FOLLOW, RPC_CREDITS_PER_DAY: '100000' } });
    gateways.push(g);
    await watched(g, g.sim);
    const ws = async () =>
      (await metric(g, 'sns_rpc_credits_total', { method: 'wsConnection' })) +
      (await metric(g, 'sns_rpc_credits_total', { method: 'wsMegabyte' }));
    expect(await ws()).toBeGreaterThan(1);
    // Every credit of the configured endpoint, websocket included, is in the shared counter.
    await waitFor(async () => Math.abs((await counter(g)) - (await defaultCredits(g))) < 1e-6);
    expect(await counter(g)).toBeGreaterThan(await ws());
  });

  it('past the soft threshold, a stale entry is refreshed only once the stretched window is over', async () => {
    const g = await startGateway({
      env: {
        RPC_CREDITS_PER_DAY: '1000',
        // One client asks throughout: its share is not what is tested.
        RPC_CREDITS_CLIENT_SHARE: '1',
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '600',
        HOT_KEYS_TOP_N: '0',
      },
    });
    gateways.push(g);
    await g.redis.set(counterKey(g), '850');
    const cold = await g.get('/subdomains/67679');
    expect(cold.headers.get('x-cache')).toBe('MISS');
    // The windows count from when the scan began (its `fetchedAt`), not from the answer.
    const head = await g.redis.get(
      redisKeys(g.config.QUEUE_PREFIX).entryMeta(endpointId(g.sim.url), '67679'),
    );
    const fetchedAt = (JSON.parse(head ?? '{}') as { fetchedAt: number }).fetchedAt;
    expect(await metric(g, 'sns_rpc_budget_state')).toBe(1);
    g.sim.resetCalls();
    // Stale, but within four fresh windows: served stale, no refresh. Time is the subject here:
    // the asks go on until the stretched window is nearly over.
    const stretchEnds = fetchedAt + BUDGET_STRETCH_FACTOR * g.config.CACHE_FRESH_MS;
    await elapse(g.config.CACHE_FRESH_MS + 200);
    let asked = 0;
    while (Date.now() < stretchEnds - 600) {
      expect((await g.get('/subdomains/67679')).headers.get('x-cache')).toBe('STALE');
      asked++;
      await elapse(100);
    }
    expect(asked).toBeGreaterThan(0);
    // Past them: the stale hit refreshes it.
    await elapse(Math.max(0, stretchEnds - Date.now()));
    await waitFor(async () => {
      await g.get('/subdomains/67679');
      return g.sim.callCount('getProgramAccounts') === 1;
    });
    // No refresh was queued within the window, whenever a loaded machine let an ask reach the API:
    // the refresh jobs' own timestamps say when each was queued.
    const connection = new Redis(g.config.REDIS_URL, { maxRetriesPerRequest: null });
    const queue = new Queue<RefreshJobData>(REFRESH_QUEUE, {
      connection,
      prefix: g.config.QUEUE_PREFIX,
    });
    try {
      const queued = (await queue.getJobs(['completed', 'active', 'wait', 'prioritized']))
        .filter((job) => job.name === REFRESH_JOB && job.data.parent === '67679')
        .map((job) => job.timestamp)
        .filter((at) => at > fetchedAt);
      expect(queued.length).toBeGreaterThan(0);
      expect(queued.filter((at) => at < stretchEnds)).toEqual([]);
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });

  it('once spent: a cold miss is 503 with Retry-After to the next UTC day, cached entries are still answered, stale ones without a refresh', async () => {
    const g = await startGateway({
      env: {
        RPC_CREDITS_PER_DAY: '1000',
        // One client asks throughout: its share is not what is tested.
        RPC_CREDITS_CLIENT_SHARE: '1',
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '600',
        HOT_KEYS_TOP_N: '0',
      },
    });
    gateways.push(g);
    expect((await g.get('/subdomains/bonfida')).status).toBe(200);
    await g.redis.set(counterKey(g), '1000');
    // The API reads the counter at most every second.
    await elapse(1_100);
    g.sim.resetCalls();
    await waitFor(async () => (await g.get('/subdomains/67679')).status === 503, 3_000);
    const refused = await g.get('/subdomains/67679');
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({
      s: 'error',
      result: 'Budget exhausted',
      detail: expect.stringContaining('budget') as unknown,
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Math.abs(retryAfter - msToNextUtcDay(Date.now()) / 1000)).toBeLessThan(3);
    const cached = await g.get('/subdomains/bonfida');
    expect(cached.status).toBe(200);
    expect(cached.headers.get('x-cache')).toBe('STALE');
    // Time is the subject: the stale hit starts no call meanwhile.
    await elapse(500);
    expect(g.sim.callCount()).toBe(0);
    expect(await metric(g, 'sns_rpc_budget_state')).toBe(2);
    expect(await metric(g, 'sns_rpc_budget_spent_credits')).toBe(1000);
  });

  it('makes no call the budget cannot pay for: the refresh fails at once, unretried, and its miss is 503', async () => {
    const g = await startGateway({
      env: {
        RPC_CREDITS_PER_DAY: '25',
        RPC_CREDITS: 'getProgramAccounts=10,*=1',
        // The client may spend the pool, nearly the whole day: the day's bound is tested.
        RPC_CREDITS_CLIENT_SHARE: '1',
        RPC_CREDITS_PROACTIVE_SHARE: '0.01',
        RPC_CREDITS_RESERVE_SHARE: '0.01',
        HOT_KEYS_TOP_N: '0',
        JOB_ATTEMPTS: '5',
      },
    });
    gateways.push(g);
    g.sim.resetCalls();
    const statuses: number[] = [];
    for (const parent of ['67679', 'bonfida', 'demo', 'madeup1', 'madeup2']) {
      statuses.push((await g.get(`/subdomains/${parent}`)).status);
    }
    // Two checks and scans fit in 25 credits (11 each); the third check takes the day to 23 and
    // its scan would take it to 33. A made-up parent costs its check alone (an empty list), until
    // the pool (24.5) cannot pay for one.
    expect(statuses).toEqual([200, 200, 503, 200, 503]);
    // Time is the subject: no retry of a refused refresh comes meanwhile.
    await elapse(1_000);
    const calls = g.sim.callCount('getProgramAccounts');
    expect(calls).toBe(2);
    expect(10 * calls + (g.sim.callCount() - calls)).toBeLessThanOrEqual(25);
    expect(await counter(g)).toBeLessThanOrEqual(25);
    expect(await metric(g, 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.retried })).toBe(0);
    expect(g.logs.join('')).toContain('RPC_CREDITS_PER_DAY');
  });
});
