import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { readFollowStatus, writeFollowStatus } from '../src/core/cache/follow-status.js';
import { RedisTime } from '../src/core/redis-time.js';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { FOLLOW, PARENT, watched } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';

/**
 * Trust windows on one clock (docs/design.md, "Freshness"): what a worker writes (a scan's
 * `fetchedAt`, the stream's `epoch` and `healthyUntil`) is compared with what an API process reads
 * on Redis's clock, never on two machines' own; and a scan counts from when it began.
 */

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
});
afterAll(() => redis.disconnect());

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

const SKEW_MS = 30_000;

describe('one clock', () => {
  it("reads Redis's clock from processes whose own clocks are 30 s apart", async () => {
    const ahead = new RedisTime(redis, () => Date.now() + SKEW_MS);
    const behind = new RedisTime(redis, () => Date.now() - SKEW_MS);
    await Promise.all([ahead.sync(), behind.sync()]);
    expect(Math.abs(ahead.now() - behind.now())).toBeLessThan(250);
    expect(ahead.offsetMs).toBeLessThan(-SKEW_MS + 250);
    expect(behind.offsetMs).toBeGreaterThan(SKEW_MS - 250);
  });

  it('stops trusting a dead worker whose clock runs 30 s ahead within the status window', async () => {
    gw = await startGateway({
      env: { ...FOLLOW, CACHE_FRESH_SECONDS: '2' },
      clocks: { worker: () => Date.now() + SKEW_MS },
    });
    const g = gw;
    await watched(g, g.sim);
    await waitFor(
      async () => (await g.get(`/subdomains/${PARENT}`)).headers.get('x-cache') === 'HIT',
    );
    // The worker dies: its last status vouches for 3 s of Redis's clock, not of its own.
    await g.worker?.close();
    const died = Date.now();
    await waitFor(
      async () => (await g.get(`/subdomains/${PARENT}`)).headers.get('x-cache') !== 'HIT',
      15_000,
    );
    expect(Date.now() - died).toBeLessThan(10_000);
  });

  it('counts a scan from when it began: a change missed while it ran is not vouched for', async () => {
    gw = await startGateway({ env: { ...FOLLOW, CACHE_FRESH_SECONDS: '2' } });
    const g = gw;
    const { config, sim } = g;
    await waitFor(async () => {
      const status = await readFollowStatus(g.redis, config.QUEUE_PREFIX);
      return status?.mode === 'program' && status.healthyUntil > Date.now();
    }, 15_000);
    // The scan takes 3 s; the stream misses a change (a new epoch) while it runs, 1.5 s after the
    // job is seen active (so after the scan began, even on a loaded machine).
    sim.setFaults([{ kind: 'delay', ms: 3_000, method: 'getProgramAccounts' }]);
    const asked = g.get(`/subdomains/${PARENT}`);
    const active = `${config.QUEUE_PREFIX}:${REFRESH_QUEUE}:active`;
    await waitFor(async () => (await g.redis.llen(active)) > 0);
    const status = await readFollowStatus(g.redis, config.QUEUE_PREFIX);
    await writeFollowStatus(g.redis, config.QUEUE_PREFIX, {
      epoch: Date.now() + 1_500,
      healthyUntil: status?.healthyUntil ?? 0,
      mode: 'program',
    });
    expect((await asked).headers.get('x-cache')).toBe('MISS');
    sim.setFaults([]);
    // Read before the epoch: fresh by its window only (2 s from its start), never by following.
    await waitFor(
      async () => (await g.get(`/subdomains/${PARENT}`)).headers.get('x-cache') !== 'HIT',
      8_000,
    );
  });
});
