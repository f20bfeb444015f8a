import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { REFRESH_QUEUE, type RefreshJobData } from '../src/core/queue/refresh-queue.js';
import { redisKeys } from '../src/core/redis-keys.js';
import {
  HOT_PARENT_CLIENT_CAP,
  HotParentCounter,
  hotParentsWindowKey,
  topHotParents,
} from '../src/core/cache/hot-parents.js';
import { runHotParentScan } from '../worker/hot-parent-scan.js';
import { writeFollowStatus } from '../src/core/cache/follow-status.js';
import { deletePrefix, startGateway, uniquePrefix, type Gateway } from './support/gateway.js';
import { elapse } from './support/wait.js';
import { withReverses } from './support/entry-accounts.js';

describe('hot parents refreshed ahead of expiry', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      env: {
        // Hot parents are refreshed ahead a scan interval (a sixth of the window) or two before
        // their expiry: that is the slack a refresh has to end in, 2 s here, room on a loaded
        // machine (a 2 s window left 0.5 s, and its refreshes ended late under load).
        CACHE_FRESH_SECONDS: '12',
        CACHE_STALE_SECONDS: '12',
        HOT_KEYS_TOP_N: '1',
        // The test is the one client: one is enough to make a parent hot.
        HOT_KEYS_MIN_CLIENTS: '1',
      },
    });
  });
  afterAll(() => gw.close());

  it('keeps a key under steady traffic fresh for several windows while an unrequested one expires', async () => {
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('MISS'); // asked once, then never
    expect((await gw.get('/subdomains/demo')).headers.get('x-cache')).toBe('MISS');
    const states: string[] = [];
    const until = Date.now() + 26_000; // over two freshness windows, past the stale window
    while (Date.now() < until) {
      const res = await gw.get('/subdomains/demo');
      expect(res.status).toBe(200);
      states.push(res.headers.get('x-cache') ?? '?');
      await elapse(150);
    }
    expect(states.length).toBeGreaterThan(30);
    expect(states.filter((s) => s !== 'HIT')).toEqual([]);
    // More than one refresh happened in the background, none of them waited for.
    expect(gw.sim.callCount('getProgramAccounts')).toBeGreaterThanOrEqual(4);
    // The key asked for once was not kept fresh: it expired with its stale window.
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('MISS');
  }, 60_000);
});

describe('HotParentCounter', () => {
  const windowMs = 60_000;
  // The middle of a window, so a test never straddles two by accident.
  const t0 = (Math.floor(Date.now() / windowMs) + 0.5) * windowMs;
  let redis: Redis;
  let prefix: string;
  beforeEach(() => {
    prefix = uniquePrefix();
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterEach(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  const score = async (parent: string, now = t0) =>
    Number((await redis.zscore(hotParentsWindowKey(prefix, windowMs, now), parent)) ?? 0);

  it('counts distinct clients per parent, not requests', async () => {
    const counter = new HotParentCounter(redis, prefix, windowMs, 1000);
    for (let i = 0; i < 50; i++) counter.hit('busy', '10.0.0.1', t0);
    counter.hit('busy', '10.0.0.2', t0);
    counter.hit('other', '10.0.0.1', t0);
    await counter.flush();
    expect(await score('busy')).toBe(2);
    expect(await score('other')).toBe(1);
    // Seen again after a flush, in the same window: not counted again.
    counter.hit('busy', '10.0.0.1', t0 + 1);
    await counter.flush();
    expect(await score('busy')).toBe(2);
  });

  it('counts a client once per window across API processes', async () => {
    const a = new HotParentCounter(redis, prefix, windowMs, 1000);
    const b = new HotParentCounter(redis, prefix, windowMs, 1000);
    a.hit('shared', '10.0.0.1', t0);
    b.hit('shared', '10.0.0.1', t0);
    b.hit('shared', '10.0.0.3', t0);
    await Promise.all([a.flush(), b.flush()]);
    expect(await score('shared')).toBe(2);
  });

  it('counts the client again in the next window, in that window', async () => {
    const counter = new HotParentCounter(redis, prefix, windowMs, 1000);
    counter.hit('p', '10.0.0.1', t0);
    counter.hit('p', '10.0.0.1', t0 + windowMs);
    counter.hit('p', '10.0.0.1', t0 + windowMs + 1);
    await counter.flush();
    expect(await score('p', t0)).toBe(1);
    expect(await score('p', t0 + windowMs)).toBe(1);
    expect(await redis.pttl(hotParentsWindowKey(prefix, windowMs, t0))).toBeGreaterThan(windowMs);
    expect(
      await redis.pttl(redisKeys(prefix).hotParentClients(Math.floor(t0 / windowMs))),
    ).toBeGreaterThan(windowMs);
  });

  it('counts at most HOT_PARENT_CLIENT_CAP clients per parent and maxTracked parents a window, in process and in Redis', async () => {
    const counter = new HotParentCounter(redis, prefix, windowMs, 20);
    // One address asking many parents: they replace each other, never more than 20 kept.
    for (let i = 0; i < 50; i++) counter.hit(`many${i}`, '10.0.0.1', t0);
    for (let i = 0; i < 300; i++) counter.hit('popular', `10.1.${i >> 8}.${i & 255}`, t0);
    await counter.flush();
    const window = Math.floor(t0 / windowMs);
    expect(await score('popular')).toBe(HOT_PARENT_CLIENT_CAP);
    expect(await redis.zcard(hotParentsWindowKey(prefix, windowMs, t0))).toBe(20);
    expect(await redis.hlen(redisKeys(prefix).hotParentClients(window))).toBe(20);
    const clients = await redis.hget(redisKeys(prefix).hotParentClients(window), 'popular');
    expect(clients?.split(' ')).toHaveLength(HOT_PARENT_CLIENT_CAP);
  });

  it('still ranks a parent 20 real clients ask for after 100 addresses filled the table with parents of their own and two shared ones', async () => {
    const maxTracked = 200;
    const counter = new HotParentCounter(redis, prefix, windowMs, maxTracked);
    for (let i = 1; i <= 100; i++) {
      for (const own of ['a', 'b']) counter.hit(`own${i}${own}`, `10.9.0.${i}`, t0);
      counter.hit('attack1', `10.9.0.${i}`, t0);
      counter.hit('attack2', `10.9.0.${i}`, t0);
    }
    for (let i = 1; i <= 20; i++) counter.hit('real', `192.0.2.${i}`, t0 + 1_000);
    await counter.flush();
    // As many clients as counted for any parent: ranked with the most asked.
    expect(await score('real')).toBe(HOT_PARENT_CLIENT_CAP);
    const top = await topHotParents(redis, prefix, windowMs, 3, 2, t0 + 2_000);
    expect(top.sort()).toEqual(['attack1', 'attack2', 'real']);
    expect(await redis.zcard(hotParentsWindowKey(prefix, windowMs, t0))).toBe(maxTracked);
  });

  it('lets a new parent replace the oldest of those with the fewest clients in process, and one with the fewest in Redis', async () => {
    const counter = new HotParentCounter(redis, prefix, windowMs, 3);
    counter.hit('shared', '10.0.0.1', t0);
    counter.hit('shared', '10.0.0.2', t0);
    counter.hit('lone1', '10.0.0.3', t0);
    counter.hit('lone2', '10.0.0.4', t0);
    // Replaces lone1 in process (the oldest with one client); in Redis one with one client.
    counter.hit('lone3', '10.0.0.5', t0);
    // lone1 again, forgotten in process: sent again, and counted once in Redis all the same.
    counter.hit('lone1', '10.0.0.3', t0);
    counter.hit('shared', '10.0.0.6', t0);
    await counter.flush();
    expect(await score('shared')).toBe(3);
    const kept = await redis.zrange(hotParentsWindowKey(prefix, windowMs, t0), 0, -1);
    expect(kept).toHaveLength(3);
    expect(kept).toContain('shared');
    for (const lone of kept.filter((p) => p !== 'shared')) expect(await score(lone)).toBe(1);
  });

  it('refreshes ahead at most HOT_KEYS_TOP_N distinct parents per window, however the ranking turns within it', async () => {
    const connection = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
    const queue = new Queue<RefreshJobData>(REFRESH_QUEUE, { connection, prefix });
    try {
      const deps = {
        redis,
        cache: new SubdomainCache(redis, prefix, windowMs, 10 * windowMs),
        queue,
        prefix,
        freshMs: windowMs,
        topN: 2,
        minClients: 2,
        defaultEndpointId: 'default',
      };
      const counter = new HotParentCounter(redis, prefix, windowMs, 1000);
      for (const c of ['10.0.0.1', '10.0.0.2'])
        for (const p of ['first1', 'first2']) counter.hit(p, c, t0);
      await counter.flush();
      expect(await runHotParentScan(deps, () => t0)).toEqual({ scanned: 2, queued: 2 });
      // Two other parents overtake them within the window (colluding addresses could rotate so).
      for (const c of ['10.0.0.1', '10.0.0.2', '10.0.0.3'])
        for (const p of ['then1', 'then2']) counter.hit(p, c, t0 + 1);
      await counter.flush();
      expect((await topHotParents(redis, prefix, windowMs, 2, 2, t0 + 2)).sort()).toEqual([
        'then1',
        'then2',
      ]);
      expect(await runHotParentScan(deps, () => t0 + 2)).toEqual({ scanned: 2, queued: 0 });
      // The next window has its own allowance.
      expect(await runHotParentScan(deps, () => t0 + windowMs)).toEqual({ scanned: 2, queued: 2 });
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });

  /**
   * A refresh queue and the scan's dependencies, with `parent` hot (one client at t0) and its entry
   * fetched two windows ago, the clock alone due to refresh it; closed once `body` is done.
   */
  const withDueHotParent = async (
    parent: string,
    body: (
      deps: Parameters<typeof runHotParentScan>[0],
      queue: Queue<RefreshJobData>,
      fetchedAt: number,
    ) => Promise<void>,
  ) => {
    const connection = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
    const queue = new Queue<RefreshJobData>(REFRESH_QUEUE, { connection, prefix });
    try {
      const cache = new SubdomainCache(redis, prefix, windowMs, 10 * windowMs);
      const deps = {
        redis,
        cache,
        queue,
        prefix,
        freshMs: windowMs,
        topN: 2,
        minClients: 1,
        defaultEndpointId: 'default',
      };
      const counter = new HotParentCounter(redis, prefix, windowMs, 1000);
      counter.hit(parent, '10.0.0.1', t0);
      await counter.flush();
      const fetchedAt = t0 - 2 * windowMs;
      await cache.put(
        'default',
        parent,
        ...withReverses(parent, { labels: [], fetchedAt, slot: 1 }, {}),
      );
      await body(deps, queue, fetchedAt);
    } finally {
      await queue.close();
      connection.disconnect();
    }
  };

  it('refreshes ahead no parent the chain keeps fresh (the whole program followed, healthy, since before its fetch)', async () => {
    await withDueHotParent('followed', async (deps, _queue, fetchedAt) => {
      const healthy = { epoch: fetchedAt - 1, healthyUntil: t0 + 3_000, mode: 'program' } as const;
      await writeFollowStatus(redis, prefix, healthy);
      expect(await runHotParentScan(deps, () => t0)).toEqual({ scanned: 1, queued: 0 });
      // Past healthyUntil the clock decides again.
      expect(await runHotParentScan(deps, () => t0 + 3_000)).toEqual({ scanned: 1, queued: 1 });
    });
  });

  it('refreshes ahead no parent whose heal began after the scan did, once it reads that heal', async () => {
    await withDueHotParent('healing', async (deps, queue, fetchedAt) => {
      // The scan begins at t0 while the stream vouches; the socket is lost before it reads the
      // status, which says a heal began at t0 + 5. Its clock read again after the status is past
      // that.
      const healing = {
        epoch: fetchedAt - 1,
        healthyUntil: 0,
        mode: 'program',
        healingSince: t0 + 5,
      } as const;
      await writeFollowStatus(redis, prefix, healing);
      const readings = [t0, t0 + 10];
      const clock = () => readings.shift() ?? t0 + 10;
      expect(await runHotParentScan(deps, clock)).toEqual({ scanned: 1, queued: 0 });
      expect(await queue.count()).toBe(0);
    });
  });

  it('ranks only parents that HOT_KEYS_MIN_CLIENTS clients asked for in one window', async () => {
    const counter = new HotParentCounter(redis, prefix, windowMs, 1000);
    // One client in both windows: 2 over the two, but never 2 in one.
    counter.hit('alone', '10.0.0.1', t0 - windowMs);
    counter.hit('alone', '10.0.0.1', t0);
    counter.hit('pair', '10.0.0.1', t0);
    counter.hit('pair', '10.0.0.2', t0);
    for (const c of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) counter.hit('crowd', c, t0 - windowMs);
    counter.hit('crowd', '10.0.0.4', t0);
    await counter.flush();
    expect(await topHotParents(redis, prefix, windowMs, 10, 2, t0)).toEqual(['crowd', 'pair']);
    expect(await topHotParents(redis, prefix, windowMs, 10, 1, t0)).toEqual([
      'crowd',
      'pair',
      'alone',
    ]);
    expect(await topHotParents(redis, prefix, windowMs, 1, 2, t0)).toEqual(['crowd']);
  });
});
