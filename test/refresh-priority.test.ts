/**
 * Refresh priorities (src/queue/refresh-queue.ts, REFRESH_PRIORITY): a cold miss, which has a
 * request waiting, starts before refreshes queued ahead of expiry, so a burst of those (every
 * parent asked for in the last windows) cannot hold a user's request behind the rate limiter.
 */
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { addRefreshJob, REFRESH_QUEUE, type RefreshJobData } from '../src/queue/refresh-queue.js';
import { endpointId } from '../src/rpc/endpoint.js';
import { startGateway } from './support/gateway.js';

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
            cacheKey: `${gw.config.QUEUE_PREFIX}:subdomains:${id}:${parent}`,
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
