import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SubdomainCache, type CacheEntry } from '../src/cache/subdomain-cache.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { publishRefreshEvent, RefreshListener } from '../src/queue/refresh-events.js';
import { createRefreshQueue } from '../src/queue/refresh-queue.js';
import { SubdomainLookup } from '../src/subdomains/lookup.js';
import { deletePrefix, uniquePrefix } from './support/gateway.js';

describe('SubdomainCache.put', () => {
  const prefix = uniquePrefix();
  let redis: Redis;
  let cache: SubdomainCache;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  const entry = (fetchedAt: number, label = `at${fetchedAt}`): CacheEntry => ({
    labels: [label],
    fetchedAt,
    slot: 7,
  });

  it('keeps the later fetchedAt, whichever order the writes come in, with the stale expiry', async () => {
    const key = cache.key('e', 'order');
    await cache.put(key, entry(2_000));
    await cache.put(key, entry(1_000));
    expect(await cache.get(key)).toEqual(entry(2_000));
    await cache.put(key, entry(3_000));
    expect(await cache.get(key)).toEqual(entry(3_000));
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(3_500_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000);
  });

  it('ends with the latest of many concurrent writes', async () => {
    const key = cache.key('e', 'race');
    const times = Array.from({ length: 40 }, (_, i) => 10_000 + ((i * 7919) % 40));
    await Promise.all(times.map((t) => cache.put(key, entry(t))));
    expect((await cache.get(key))?.fetchedAt).toBe(Math.max(...times));
  });

  it('reads fetchedAt of an entry stored in another field order', async () => {
    const key = cache.key('e', 'legacy');
    await redis.set(key, JSON.stringify({ labels: ['kept'], fetchedAt: 5_000 }));
    await cache.put(key, entry(4_000));
    expect((await cache.get(key))?.labels).toEqual(['kept']);
    await cache.put(key, entry(6_000));
    expect((await cache.get(key))?.labels).toEqual(['at6000']);
  });

  it('replaces an unreadable value', async () => {
    const key = cache.key('e', 'garbage');
    await redis.set(key, 'not json');
    await cache.put(key, entry(1));
    expect(await cache.get(key)).toEqual(entry(1));
  });
});

describe("SubdomainLookup's in-process copy", () => {
  it('does not keep an entry whose read began before a refresh event replaced it', async () => {
    const prefix = uniquePrefix();
    const url = inject('redisUrl');
    const redis = new Redis(url, { maxRetriesPerRequest: 1 });
    const subscriber = new Redis(url, { maxRetriesPerRequest: 1 });
    const queueConnection = new Redis(url, { maxRetriesPerRequest: null });
    const listener = new RefreshListener(subscriber, prefix);
    const queue = createRefreshQueue(queueConnection, {
      QUEUE_PREFIX: prefix,
      JOB_ATTEMPTS: 1,
      JOB_BACKOFF_MS: 100,
    });
    try {
      await listener.start();
      const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
      const lookup = new SubdomainLookup({
        cache,
        queue,
        listener,
        metrics: createMetrics(new Registry(), { defaultMetrics: false }),
        logger: pino({ level: 'silent' }),
        waitMs: 1_000,
        maxWaiting: 10,
        localCacheBytes: 1_000_000,
        localEndpointId: 'e',
      });
      const endpoint = { kind: 'default', url: 'http://rpc.test/', id: 'e' } as const;
      const key = cache.key('e', 'p');
      await cache.put(key, { labels: ['old'], fetchedAt: Date.now() });

      // The read of the old entry returns, but reaches the lookup only after the new entry's
      // refresh event has arrived (on the subscriber connection).
      let release = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      const realGet = cache.get.bind(cache);
      cache.get = async (k) => {
        const entry = await realGet(k);
        await gate;
        return entry;
      };
      const pending = lookup.lookup('p', endpoint);
      const arrived = new Promise<void>((resolve) => listener.onRefreshed(() => resolve()));
      await cache.put(key, { labels: ['new'], fetchedAt: Date.now() + 1 });
      await publishRefreshEvent(redis, prefix, { key, ok: true });
      await arrived;
      release();
      expect((await pending).entry.labels).toEqual(['old']);
      cache.get = realGet;

      // Not kept: the next lookups read Redis and get the new entry, which is then kept.
      expect(lookup.peek('p', endpoint)).toBeUndefined();
      expect((await lookup.lookup('p', endpoint)).entry.labels).toEqual(['new']);
      expect(lookup.peek('p', endpoint)?.entry.labels).toEqual(['new']);
    } finally {
      await listener.close();
      await queue.close();
      await deletePrefix(redis, prefix);
      for (const connection of [redis, subscriber, queueConnection]) connection.disconnect();
    }
  });
});
