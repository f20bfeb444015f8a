/**
 * Which refresh runs, and when (src/core/queue/refresh-queue.ts, worker/refresh-processor.ts): a cold
 * miss, which has a request waiting, starts before refreshes queued ahead of expiry, so a burst of
 * those cannot hold a user's request behind the rate limiter; an override refresh that waited its
 * whole bound in the queue is dropped unstarted.
 */
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import {
  addRefreshJob,
  OVERRIDE_REFRESH_QUEUE,
  refreshBackoff,
  REFRESH_QUEUE,
  waitingRefreshes,
  type RefreshJobData,
} from '../src/core/queue/refresh-queue.js';
import { RpcCallError } from '../worker/rpc/client.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { seedDemo, startGateway, waitFor } from './support/gateway.js';
import { startRpcSimulator } from '../tools/rpc-sim/index.js';
import { redisKeys } from '../src/core/redis-keys.js';

describe('refresh priorities', () => {
  it('starts a cold miss before refreshes queued ahead of expiry', async () => {
    // One start per second: six ahead-of-expiry refreshes in first-come order would take 6 s.
    const gw = await startGateway({
      env: { RPC_MAX_PER_SECOND: '1', HOT_KEYS_TOP_N: '0', WORKER_CONCURRENCY: '1' },
    });
    const queue = new Queue<RefreshJobData>(REFRESH_QUEUE, {
      connection: gw.redis,
      prefix: gw.config.QUEUE_PREFIX,
    });
    try {
      const id = endpointId(gw.config.RPC_URL ?? '');
      for (let i = 0; i < 6; i++) {
        const parent = `ahead${i}`;
        await addRefreshJob(
          queue,
          {
            cacheKey: redisKeys(gw.config.QUEUE_PREFIX).entryMeta(id, parent),
            parent,
            endpoint: { kind: 'default' },
          },
          'ahead',
        );
      }
      const started = performance.now();
      const reply = await gw.get('/subdomains/67679');
      const took = performance.now() - started;
      expect(reply.status).toBe(200);
      expect(reply.body.result).toEqual(['bullish', 'hollaaa', 'testing']);
      // At most the refresh under way and one limiter window before it.
      expect(took).toBeLessThan(2_500);
      // The cold parent's scan came before most of the six queued ahead of it.
      expect(gw.sim.callCount('getProgramAccounts')).toBeLessThan(4);
    } finally {
      await queue.close();
      await gw.close();
    }
  }, 30_000);
});

describe('override refreshes', () => {
  it('drops one that waited SUBDOMAINS_WAIT_MS in the queue, without calling the RPC', async () => {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    const gw = await startGateway({
      sim,
      worker: false,
      env: { SUBDOMAINS_WAIT_MS: '300', RPC_OVERRIDE_ALLOWLIST: new URL(sim.url).origin },
    });
    const overrides = new Queue<RefreshJobData>(OVERRIDE_REFRESH_QUEUE, {
      connection: gw.redis,
      prefix: gw.config.QUEUE_PREFIX,
    });
    let worker: WorkerRuntime | undefined;
    try {
      // No worker yet: the request gives up waiting (502); its job stays queued.
      const reply = await gw.get(`/subdomains/67679?rpc=${encodeURIComponent(sim.url)}`);
      expect(reply.status).toBe(502);
      expect(await waitingRefreshes(overrides)).toBe(1);
      worker = await startWorker(gw.config, gw.metrics, pino({ level: 'silent' }), {
        serveMetrics: false,
      });
      await waitFor(async () => {
        const counts = await overrides.getJobCounts('waiting', 'prioritized', 'active');
        return Object.values(counts).every((n) => n === 0);
      });
      expect(sim.callCount('getProgramAccounts')).toBe(0);
    } finally {
      await worker?.close();
      await overrides.close();
      await gw.close();
      await sim.close();
    }
  });
});

describe('the back-off between attempts', () => {
  const backoff = refreshBackoff(2_000);

  it('doubles from JOB_BACKOFF_MS', () => {
    expect([1, 2, 3, 4].map((attempts) => backoff(attempts))).toEqual([
      2_000, 4_000, 8_000, 16_000,
    ]);
  });

  it("waits at least the upstream's Retry-After, at most ten minutes of it", () => {
    const asked = (ms: number) =>
      new RpcCallError('getProgramAccounts: HTTP 429', 'http_error', true, ms);
    expect(backoff(1, 'retry-after', asked(30_000))).toBe(30_000);
    expect(backoff(4, 'retry-after', asked(3_000))).toBe(16_000);
    expect(backoff(1, 'retry-after', asked(3_600_000))).toBe(600_000);
    expect(backoff(1, 'retry-after', new Error('no Retry-After'))).toBe(2_000);
  });
});
