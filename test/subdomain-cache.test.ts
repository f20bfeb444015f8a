import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SubdomainCache, type CacheEntry } from '../src/cache/subdomain-cache.js';
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
