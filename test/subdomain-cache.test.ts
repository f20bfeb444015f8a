import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SubdomainCache, type CacheEntry } from '../src/core/cache/subdomain-cache.js';
import { redisUrlDatabase } from '../src/core/config.js';
import { createMetrics } from '../src/core/metrics.js';
import {
  parseRefreshEvent,
  publishRefreshEvent,
  refreshChannel,
  RefreshListener,
} from '../src/core/queue/refresh-events.js';
import { createRefreshQueue } from '../src/core/queue/refresh-queue.js';
import { databaseOf } from '../src/core/redis.js';
import { SubdomainLookup } from '../src/api/subdomains/lookup.js';
import { deletePrefix, uniquePrefix } from './support/gateway.js';
import { redisKeys } from '../src/core/redis-keys.js';

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

  const entry = (fetchedAt: number, label = `at${fetchedAt}`, slot = 7): CacheEntry => ({
    labels: [label],
    fetchedAt,
    slot,
  });
  const stored = async (parent: string) => {
    const found = await cache.get(cache.key('e', parent));
    if (!found) return found;
    return { labels: found.labels, fetchedAt: found.fetchedAt, slot: found.slot };
  };

  it('keeps the later fetchedAt at one slot, whichever order the writes come in, with the stale expiry', async () => {
    expect(await cache.put('e', 'order', entry(2_000))).toBe('written');
    expect(await cache.put('e', 'order', entry(1_000))).toBe('kept');
    expect(await stored('order')).toEqual(entry(2_000));
    await cache.put('e', 'order', entry(3_000));
    expect(await stored('order')).toEqual(entry(3_000));
    const ttl = await redis.pttl(cache.key('e', 'order'));
    expect(ttl).toBeGreaterThan(3_500_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000);
  });

  it('never goes back to an older slot, even from a later refresh (a lagging node)', async () => {
    await cache.put('e', 'slots', entry(1_000, 'new', 200));
    expect(await cache.put('e', 'slots', entry(9_000, 'behind', 150))).toBe('kept');
    expect(await stored('slots')).toEqual(entry(1_000, 'new', 200));
    expect(await cache.put('e', 'slots', entry(500, 'ahead', 201))).toBe('written');
    expect(await stored('slots')).toEqual(entry(500, 'ahead', 201));
    // Without a slot on either side, fetchedAt decides.
    expect(await cache.put('e', 'slots', { labels: ['x'], fetchedAt: 400 })).toBe('kept');
    expect(await cache.put('e', 'slots', { labels: ['y'], fetchedAt: 600 })).toBe('written');
    expect((await stored('slots'))?.labels).toEqual(['y']);
  });

  it('ends with the latest of many concurrent writes', async () => {
    const times = Array.from({ length: 40 }, (_, i) => 10_000 + ((i * 7919) % 40));
    await Promise.all(times.map((t) => cache.put('e', 'race', entry(t, 'l', t))));
    expect((await cache.get(cache.key('e', 'race')))?.fetchedAt).toBe(Math.max(...times));
  });

  it('reads the head of an entry stored in another field order', async () => {
    const key = cache.key('e', 'legacy');
    await redis.set(key, JSON.stringify({ labels: ['kept'], fetchedAt: 5_000, slot: 7 }));
    await cache.put('e', 'legacy', entry(4_000));
    expect((await cache.get(key))?.labels).toEqual(['kept']);
    await cache.put('e', 'legacy', entry(6_000));
    expect((await cache.get(key))?.labels).toEqual(['at6000']);
  });

  it('replaces an unreadable value', async () => {
    await redis.set(cache.key('e', 'garbage'), 'not json');
    await cache.put('e', 'garbage', entry(1));
    expect(await stored('garbage')).toEqual(entry(1));
  });

  it('keeps the accounts beside the entry, and drops them with a write that has none', async () => {
    await cache.put('e', 'accounts', entry(1, 'a'), { Acc1: ['a', 'Owner1'] });
    const read = await cache.getWithAccounts('e', 'accounts');
    expect(read?.entry.labels).toEqual(['a']);
    expect(read?.accounts).toEqual({ Acc1: ['a', 'Owner1'] });
    await cache.put('e', 'accounts', entry(2, 'b'));
    expect((await cache.getWithAccounts('e', 'accounts'))?.accounts).toBeNull();
  });

  it('patches only the revision it read: a write in between is a conflict, a missing entry is missing', async () => {
    await cache.put('e', 'patch', entry(1, 'a', 10), { A: ['a', 'o'] });
    const read = await cache.getWithAccounts('e', 'patch');
    const rev = read?.entry.rev ?? -1;
    expect(rev).toBeGreaterThan(0);
    const next = { labels: ['a', 'b'], fetchedAt: 1, slot: 12 };
    const accounts = { A: ['a', 'o'], B: ['b', 'o'] } as const;
    expect(await cache.patch('e', 'patch', rev, next, accounts)).toBe('written');
    // A second patch computed from the same read lost the race.
    const other = { C: ['c', 'o'] } as const;
    expect(await cache.patch('e', 'patch', rev, entry(1, 'c', 13), other)).toBe('conflict');
    expect((await cache.getWithAccounts('e', 'patch'))?.accounts).toEqual(accounts);
    expect(await stored('patch')).toEqual(next);
    expect(await cache.patch('e', 'absent', 1, next, {})).toBe('missing');
    expect(await redis.exists(cache.key('e', 'absent'))).toBe(0);
  });

  const NOT_SLOTS = [Infinity, NaN, -1, 1.5, 2 ** 63, Number.MAX_SAFE_INTEGER + 1];

  it('never stores a slot that is not a non-negative safe integer, whoever writes it', async () => {
    for (const slot of NOT_SLOTS) {
      await expect(cache.put('e', 'unsafe', entry(1, 'x', slot))).rejects.toThrow(TypeError);
      const scan = { ...entry(1, 'x'), scanSlot: slot };
      await expect(cache.put('e', 'unsafe', scan)).rejects.toThrow(TypeError);
      await expect(cache.putOverride('e', 'unsafe', entry(1, 'x', slot))).rejects.toThrow();
    }
    await cache.put('e', 'unsafe', entry(1, 'x', 5), {});
    const rev = (await cache.get(cache.key('e', 'unsafe')))?.rev ?? 0;
    for (const slot of NOT_SLOTS) {
      await expect(cache.patch('e', 'unsafe', rev, entry(2, 'y', slot), {})).rejects.toThrow();
    }
    // The scripts refuse them too, as the text a caller that skipped the check would send.
    const script = redis as unknown as { snsPutEntry(...args: string[]): Promise<number> };
    const keys = [cache.key('e', 'unsafe'), cache.accountsKey('e', 'unsafe')];
    for (const slot of ['Infinity', 'inf', 'nan', '-1', '1.5', '9223372036854775808', '1e3']) {
      await expect(
        script.snsPutEntry(...keys, slot, '9', '"labels":[]}', '60000', ''),
      ).rejects.toThrow(/not a safe integer/);
    }
    expect(await stored('unsafe')).toEqual(entry(1, 'x', 5));
  });

  it('replaces a stored entry whose slot no chain has: not a slot, or past the ceiling given', async () => {
    const key = cache.key('e', 'frozen');
    const head = (slot: string) => `{"slot":${slot},"rev":3,"fetchedAt":1,"labels":["frozen"]}`;
    for (const slot of ['Infinity', '-Infinity', 'NaN', '9223372036854776000', '1.5', '-3']) {
      await redis.set(key, head(slot));
      // JSON.parse refuses Infinity and NaN (a miss); a float past 2^53 reads as no slot.
      expect((await cache.get(key))?.slot).toBeUndefined();
      expect(await cache.put('e', 'frozen', entry(1, 'now', 7))).toBe('written');
      expect(await stored('frozen')).toEqual(entry(1, 'now', 7));
    }
    // A safe slot far ahead is honoured without a ceiling, and replaced past one.
    await redis.set(key, head('4503599627370496'));
    expect(await cache.put('e', 'frozen', entry(2, 'now', 7))).toBe('kept');
    expect(await cache.put('e', 'frozen', entry(2, 'now', 7), undefined, 4503599627370495)).toBe(
      'written',
    );
    // Within the ceiling it is honoured as ever.
    expect(await cache.put('e', 'frozen', entry(3, 'behind', 6), undefined, 1_000)).toBe('kept');
    expect(await stored('frozen')).toEqual(entry(2, 'now', 7));
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
        queues: { default: queue, override: queue },
        listener,
        metrics: createMetrics(new Registry(), { defaultMetrics: false }),
        logger: pino({ level: 'silent' }),
        waitMs: 1_000,
        maxWaiting: 10,
        localCacheBytes: 1_000_000,
        localEndpointId: 'e',
      });
      const endpoint = { kind: 'default', url: 'http://rpc.test/', id: 'e' } as const;
      const requester = { client: '127.0.0.1', charge: async () => undefined };
      await cache.put('e', 'p', { labels: ['old'], fetchedAt: Date.now() });

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
      const pending = lookup.lookup('p', endpoint, requester);
      const arrived = new Promise<void>((resolve) => listener.onRefreshed(() => resolve()));
      await cache.put('e', 'p', { labels: ['new'], fetchedAt: Date.now() + 1 });
      await publishRefreshEvent(redis, prefix, { endpointId: 'e', parent: 'p', ok: true });
      await arrived;
      release();
      expect((await pending).entry.labels).toEqual(['old']);
      cache.get = realGet;

      // Not kept: the next lookups read Redis and get the new entry, which is then kept.
      expect(lookup.peek('p', endpoint, requester.client)).toBeUndefined();
      expect((await lookup.lookup('p', endpoint, requester)).entry.labels).toEqual(['new']);
      expect(lookup.peek('p', endpoint, requester.client)?.entry.labels).toEqual(['new']);
    } finally {
      await listener.close();
      await queue.close();
      await deletePrefix(redis, prefix);
      for (const connection of [redis, subscriber, queueConnection]) connection.disconnect();
    }
  });
});

describe('SubdomainCache.putOverride', () => {
  const prefix = uniquePrefix();
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('gives override entries their own short expiry and keeps them all within their byte budget', async () => {
    const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000, {
      ttlMs: 5_000,
      maxBytes: 2_500,
    });
    const big = (i: number): CacheEntry => ({ labels: ['x'.repeat(900)], fetchedAt: 1_000 + i });
    const keys = Array.from({ length: 6 }, (_, i) => cache.key('override', `p${i}`));
    for (let i = 0; i < keys.length; i++) {
      await cache.putOverride('override', `p${i}`, big(i), Date.now() + i);
    }
    // About 1 KB each against a 2,500-byte budget: the two newest are kept, older ones deleted.
    const kept = await Promise.all(keys.map((k) => redis.exists(k)));
    expect(kept.slice(-2)).toEqual([1, 1]);
    expect(kept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(2);
    expect(Number(await redis.get(redisKeys(prefix).overrideEntries.bytes))).toBeLessThanOrEqual(
      2_500,
    );
    const ttl = await redis.pttl(keys[5] as string);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5_000);
    // The configured endpoint's entries are outside the budget and keep the stale window.
    const own = cache.key('default', 'own');
    await cache.put('default', 'own', big(99));
    await cache.putOverride('override', 'later', big(100));
    expect(await redis.exists(own)).toBe(1);
    expect(await redis.pttl(own)).toBeGreaterThan(3_000_000);
  });

  it('forgets entries past their expiry before counting the budget', async () => {
    const cache = new SubdomainCache(redis, `${prefix}:b`, 60_000, 3_600_000, {
      ttlMs: 50,
      maxBytes: 2_500,
    });
    const entry = (i: number): CacheEntry => ({ labels: ['y'.repeat(900)], fetchedAt: i });
    await cache.putOverride('o', 'a', entry(1));
    await cache.putOverride('o', 'b', entry(2));
    await new Promise((resolve) => setTimeout(resolve, 80));
    await cache.putOverride('o', 'c', entry(3));
    expect(await redis.zcard(redisKeys(`${prefix}:b`).overrideEntries.byExpiry)).toBe(1);
    expect(Number(await redis.get(redisKeys(`${prefix}:b`).overrideEntries.bytes))).toBeLessThan(
      1_000,
    );
  });
});

describe('refresh events', () => {
  /** The next message on `channel`, through a subscriber of its own on the test Redis. */
  async function nextMessage(channel: string, publish: () => Promise<void>): Promise<unknown> {
    const subscriber = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    try {
      await subscriber.subscribe(channel);
      const message = new Promise<string>((resolve) =>
        subscriber.once('message', (_channel: string, text: string) => resolve(text)),
      );
      await publish();
      return JSON.parse(await message);
    } finally {
      subscriber.disconnect();
    }
  }

  it("go on the channel of the connection's database, naming their deployment", async () => {
    const prefix = uniquePrefix();
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    try {
      const db = databaseOf(redis);
      // The suite's database (9 unless REDIS_URL names one), as the URL names it.
      expect(db).toBe(redisUrlDatabase(inject('redisUrl')));
      expect(refreshChannel(redis, prefix)).toBe(`${prefix}:db${db}:refresh-events`);
      const message = await nextMessage(refreshChannel(redis, prefix), () =>
        publishRefreshEvent(redis, prefix, { endpointId: 'e', parent: 'p', ok: true }),
      );
      expect(message).toEqual({ endpointId: 'e', parent: 'p', ok: true, prefix, db });
    } finally {
      redis.disconnect();
    }
  });

  it("go on the former channel too, with the entry's cache key, which API processes of the previous release read", async () => {
    const prefix = uniquePrefix();
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    try {
      const message = await nextMessage(redisKeys(prefix).legacyRefreshEvents, () =>
        publishRefreshEvent(redis, prefix, { endpointId: 'e', parent: 'p', ok: true }),
      );
      expect(message).toEqual({
        endpointId: 'e',
        parent: 'p',
        ok: true,
        key: redisKeys(prefix).subdomainEntry('e', 'p'),
      });
    } finally {
      redis.disconnect();
    }
  });

  it('reach a waiter only when they are events of its own deployment', async () => {
    const prefix = uniquePrefix();
    const url = inject('redisUrl');
    const redis = new Redis(url, { maxRetriesPerRequest: 1 });
    const subscriber = new Redis(url, { maxRetriesPerRequest: 1 });
    const listener = new RefreshListener(subscriber, prefix);
    try {
      await listener.start();
      const db = databaseOf(redis);
      const wait = listener.next('e', 'p', 5_000);
      const channel = refreshChannel(redis, prefix);
      const ours = { endpointId: 'e', parent: 'p', prefix, db };
      for (const foreign of [
        { ...ours, ok: true, db: db + 1 },
        { ...ours, ok: true, prefix: `${prefix}x` },
        { endpointId: 'e', parent: 'p', ok: true },
        { ...ours, ok: 'yes' },
        { ...ours, ok: true, parent: 7 },
      ]) {
        await redis.publish(channel, JSON.stringify(foreign));
      }
      await redis.publish(channel, '{not json');
      await redis.publish(channel, JSON.stringify({ ...ours, ok: false, reason: 'rpc' }));
      expect(await wait.event).toEqual({ endpointId: 'e', parent: 'p', ok: false, reason: 'rpc' });
    } finally {
      await listener.close();
      redis.disconnect();
      subscriber.disconnect();
    }
  });

  it('count a failure of a reason this release does not know as internal', () => {
    const message = JSON.stringify({ endpointId: 'e', parent: 'p', ok: false, reason: 'new' });
    expect(parseRefreshEvent(message, 'x', 3)).toBeNull();
    const own = JSON.stringify({ ...JSON.parse(message), prefix: 'x', db: 3 });
    expect(parseRefreshEvent(own, 'x', 3)).toEqual({
      endpointId: 'e',
      parent: 'p',
      ok: false,
      reason: 'internal',
    });
  });
});

describe('SubdomainCache accounts of another shape', () => {
  it('reads accounts of another shape (another release, a hand edit) as none, never as labels', async () => {
    const prefix = uniquePrefix();
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
    try {
      await cache.put(
        'e',
        'p',
        { labels: ['bullish'], fetchedAt: 1, slot: 1 },
        { A: ['bullish', 'o'] },
      );
      // The shape of an earlier build: account -> label.
      await redis.set(cache.accountsKey('e', 'p'), JSON.stringify({ A: 'bullish' }));
      expect((await cache.getWithAccounts('e', 'p'))?.accounts).toBeNull();
      await redis.set(cache.accountsKey('e', 'p'), JSON.stringify({ A: ['bullish', 7] }));
      expect((await cache.getWithAccounts('e', 'p'))?.accounts).toBeNull();
    } finally {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  });
});
