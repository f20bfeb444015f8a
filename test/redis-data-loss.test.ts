import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/core/metrics.js';
import {
  HOT_PARENT_SCAN_QUEUE,
  HOT_PARENT_SCHEDULER_ID,
} from '../src/core/queue/hot-parent-scans.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { utcDay } from '../src/core/rpc/budget.js';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { getJson, startGateway, waitFor, type Gateway, type Reply } from './support/gateway.js';
import { hasBinary } from './support/programs.js';
import { startPrivateRedis, type PrivateRedis } from './support/private-redis.js';
import { parseExposition, value } from './support/prometheus.js';

/**
 * Redis losing its data under a running gateway (a Redis without persistence restarted, a failover
 * to an empty replica), staged with FLUSHALL on a private redis-server this file starts: the
 * hot-parent scans' job scheduler is installed again, readiness says when refresh-ahead is not
 * running, and neither the day's credit counter nor a client's share of it is reset to a fresh
 * budget.
 */

const available = hasBinary('redis-server');
if (!available) console.warn('Redis data-loss tests skipped: redis-server is not installed');

describe.skipIf(!available)('Redis losing its data under the API and the worker', () => {
  let server: PrivateRedis;
  let gw: Gateway;
  let worker: WorkerRuntime | undefined;
  let inspect: Redis;
  let scans: Queue;

  beforeAll(async () => {
    server = await startPrivateRedis();
    gw = await startGateway({
      worker: false,
      env: {
        REDIS_URL: server.url,
        HOT_KEYS_TOP_N: '10',
        HOT_KEYS_MIN_CLIENTS: '1',
        RPC_CREDITS_PER_DAY: '1000000',
        CACHE_FRESH_SECONDS: '6',
      },
    });
    inspect = new Redis(server.url, { maxRetriesPerRequest: 1 });
    scans = new Queue(HOT_PARENT_SCAN_QUEUE, {
      connection: inspect.duplicate(),
      prefix: gw.config.QUEUE_PREFIX,
    });
  });
  afterAll(async () => {
    await worker?.close().catch(() => undefined);
    await gw?.close().catch(() => undefined);
    await scans?.close();
    inspect?.disconnect();
    await server?.destroy();
  });

  const workerMetrics = createMetrics(new Registry());
  const startOwnWorker = () =>
    startWorker(gw.config, workerMetrics, pino({ level: 'silent' }), { serveMetrics: true });
  /** Credits the worker spent on the configured endpoint since it started (all of them today). */
  const workerSpent = async () =>
    value(parseExposition(await workerMetrics.registry.metrics()), 'sns_rpc_credits_total', {
      endpoint: 'default',
    });
  const workerReadyz = () => getJson(`http://127.0.0.1:${worker?.metricsPort}`, '/readyz');
  const scheduled = async () => (await scans.getJobScheduler(HOT_PARENT_SCHEDULER_ID)) != null;
  const counterKey = () => redisKeys(gw.config.QUEUE_PREFIX).rpcCredits(utcDay(Date.now()));
  const sharesKey = () => redisKeys(gw.config.QUEUE_PREFIX).rpcCreditShares(utcDay(Date.now()));
  const refreshAheadOf = async (reply: Promise<Reply>) =>
    ((await reply).body as { parts?: { refreshAhead?: string } }).parts?.refreshAhead;
  const apiSpent = async () =>
    value(parseExposition(await gw.metrics.registry.metrics()), 'sns_rpc_budget_spent_credits');

  it('says refresh-ahead is stopped while no scheduler runs it, and running once a worker has installed it', async () => {
    // No worker yet: nothing scheduled the scans.
    const before = await gw.get('/readyz');
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({ parts: { refreshAhead: 'stopped' } });

    worker = await startOwnWorker();
    await waitFor(scheduled, 10_000);
    // The API reads the scheduler once a second at most.
    await waitFor(async () => (await refreshAheadOf(gw.get('/readyz'))) === 'running', 5_000);
    expect(await workerReadyz()).toMatchObject({
      status: 200,
      body: { parts: { refreshAhead: 'running' } },
    });
  });

  it('installs the scheduler again when Redis lost it, and keeps the day spent so far', async () => {
    expect(await gw.get('/subdomains/demo')).toMatchObject({ status: 200 });
    expect(await gw.get('/subdomains/bonfida')).toMatchObject({ status: 200 });
    // Every credit this worker spent today is in the counter (its writes are batched).
    await waitFor(async () => {
      const counter = Number(await inspect.get(counterKey()));
      return counter > 0 && counter === (await workerSpent());
    }, 10_000);
    const spent = Number(await inspect.get(counterKey()));
    await waitFor(async () => (await apiSpent()) === spent, 5_000);
    // What the client (this test's address) and the pool were charged before the loss.
    const charged = Object.entries(await inspect.hgetall(sharesKey())).filter(
      ([field]) => field.startsWith('client:') || field === 'pool',
    );
    expect(charged.length).toBeGreaterThanOrEqual(2);

    await inspect.flushall();
    expect(await scheduled()).toBe(false);
    // The API's view of the day is not reset by the lost counter: an empty read within the day
    // is data lost, not a new day (each scrape reads the counter).
    expect(await apiSpent()).toBe(spent);
    expect(await apiSpent()).toBe(spent);

    // The worker notices and installs the scheduler again, by itself.
    await waitFor(scheduled, 15_000);
    await waitFor(async () => (await refreshAheadOf(gw.get('/readyz'))) === 'running', 10_000);
    expect(await refreshAheadOf(workerReadyz())).toBe('running');

    // The next spend is added on top of the day known before the loss, not to zero: the counter
    // again holds everything this worker spent today.
    expect(await gw.get('/subdomains/67679')).toMatchObject({ status: 200 });
    await waitFor(async () => (await workerSpent()) > spent, 10_000);
    await waitFor(
      async () => Number(await inspect.get(counterKey())) === (await workerSpent()),
      10_000,
    );
    await waitFor(async () => (await apiSpent()) === (await workerSpent()), 5_000);
    // The client's share and the pool are put back too, not reset: each holds what it held
    // before the loss (two cold misses) and the new spend (one) on top.
    const after = await inspect.hgetall(sharesKey());
    for (const [field, before] of charged) {
      expect(Number(after[field]), field).toBeGreaterThan(Number(before));
    }
  }, 60_000);
});
