import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  SubdomainCache,
  SWEEP_GRACE_MS,
  type CacheEntry,
} from '../src/core/cache/subdomain-cache.js';
import { PUT_CHUNK_MEMBERS, SplitEntries } from '../src/core/cache/split-entries.js';
import { packMembers } from '../src/core/cache/packed-members.js';
import { redisUrlDatabase } from '../src/core/config.js';
import { followedFresh } from '../src/core/cache/follow-status.js';
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
import { LuaScript, replyNumber } from '../src/core/lua-script.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../src/core/sns/pda.js';
import { elapse, waitFor } from './support/wait.js';
import { withAccounts, withReverses } from './support/entry-accounts.js';

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
    expect(await cache.put('e', 'order', ...withAccounts('order', entry(2_000)))).toBe('written');
    expect(await cache.put('e', 'order', ...withAccounts('order', entry(1_000)))).toBe('kept');
    expect(await stored('order')).toEqual(entry(2_000));
    await cache.put('e', 'order', ...withAccounts('order', entry(3_000)));
    expect(await stored('order')).toEqual(entry(3_000));
    const ttl = await redis.pttl(cache.key('e', 'order'));
    expect(ttl).toBeGreaterThan(3_500_000 + SWEEP_GRACE_MS);
    expect(ttl).toBeLessThanOrEqual(3_600_000 + SWEEP_GRACE_MS);
  });

  it('never goes back to an older slot, even from a later refresh (a lagging node)', async () => {
    await cache.put('e', 'slots', ...withAccounts('slots', entry(1_000, 'new', 200)));
    expect(
      await cache.put('e', 'slots', ...withAccounts('slots', entry(9_000, 'behind', 150))),
    ).toBe('kept');
    expect(await stored('slots')).toEqual(entry(1_000, 'new', 200));
    expect(await cache.put('e', 'slots', ...withAccounts('slots', entry(500, 'ahead', 201)))).toBe(
      'written',
    );
    expect(await stored('slots')).toEqual(entry(500, 'ahead', 201));
    // Without a slot on either side, fetchedAt decides.
    expect(
      await cache.put('e', 'slots', ...withAccounts('slots', { labels: ['x'], fetchedAt: 400 })),
    ).toBe('kept');
    expect(
      await cache.put('e', 'slots', ...withAccounts('slots', { labels: ['y'], fetchedAt: 600 })),
    ).toBe('written');
    expect((await stored('slots'))?.labels).toEqual(['y']);
  });

  it('ends with the latest of many concurrent writes', async () => {
    const times = Array.from({ length: 40 }, (_, i) => 10_000 + ((i * 7919) % 40));
    await Promise.all(
      times.map((t) => cache.put('e', 'race', ...withAccounts('race', entry(t, 'l', t)))),
    );
    expect((await cache.get(cache.key('e', 'race')))?.fetchedAt).toBe(Math.max(...times));
  });

  it("reads the head of an override's entry stored in another field order", async () => {
    const key = cache.overrideKey('o', 'legacy');
    await redis.set(key, JSON.stringify({ labels: ['kept'], fetchedAt: 5_000, slot: 7 }));
    await cache.putOverride('o', 'legacy', entry(4_000));
    expect((await cache.get(key))?.labels).toEqual(['kept']);
    await cache.putOverride('o', 'legacy', entry(6_000));
    expect((await cache.get(key))?.labels).toEqual(['at6000']);
  });

  it("never reads the configured endpoint's entry in the layout of the releases before (a miss)", async () => {
    const old = redisKeys(prefix).subdomainEntry('e', 'olden');
    await redis.set(old, JSON.stringify({ slot: 7, rev: 1, fetchedAt: 5_000, labels: ['old'] }));
    expect(await cache.get(cache.key('e', 'olden'))).toBeNull();
    expect(await cache.getWithAccounts('e', 'olden')).toBeNull();
    await cache.put('e', 'olden', ...withAccounts('olden', entry(1_000)));
    expect(await stored('olden')).toEqual(entry(1_000));
  });

  it('replaces an unreadable value', async () => {
    await redis.set(cache.key('e', 'garbage'), 'not json');
    await cache.put('e', 'garbage', ...withAccounts('garbage', entry(1)));
    expect(await stored('garbage')).toEqual(entry(1));
  });

  it('keeps the accounts beside the entry, replaced by the next write, and none when one is unreadable', async () => {
    await cache.put(
      'e',
      'accounts',
      ...withReverses('accounts', entry(1, 'a'), { Acc1: ['a', 'Owner1'] }),
    );
    const read = await cache.getWithAccounts('e', 'accounts');
    expect(read?.entry.labels).toEqual(['a']);
    expect(read?.accounts).toEqual({ Acc1: ['a', 'Owner1'] });
    await cache.put(
      'e',
      'accounts',
      ...withReverses('accounts', entry(2, 'b'), { Acc2: ['b', 'Owner2'] }),
    );
    expect((await cache.getWithAccounts('e', 'accounts'))?.accounts).toEqual({
      Acc2: ['b', 'Owner2'],
    });
    await redis.hset(redisKeys(prefix).entryMembers('e', 'accounts'), 'Acc2', 'not json');
    expect((await cache.getWithAccounts('e', 'accounts'))?.accounts).toBeNull();
  });

  const NOT_SLOTS = [Infinity, NaN, -1, 1.5, 2 ** 63, Number.MAX_SAFE_INTEGER + 1];

  it('never stores a slot that is not a non-negative safe integer, whoever writes it', async () => {
    for (const slot of NOT_SLOTS) {
      await expect(
        cache.put('e', 'unsafe', ...withAccounts('unsafe', entry(1, 'x', slot))),
      ).rejects.toThrow(TypeError);
      const scan = { ...entry(1, 'x'), scanSlot: slot };
      await expect(cache.put('e', 'unsafe', ...withAccounts('unsafe', scan))).rejects.toThrow(
        TypeError,
      );
      await expect(cache.putOverride('e', 'unsafe', entry(1, 'x', slot))).rejects.toThrow();
    }
    await cache.put('e', 'unsafe', ...withAccounts('unsafe', entry(1, 'x', 5)));
    const change = { account: 'A', reverse: 'RA', member: ['y', 'o'] } as const;
    for (const slot of NOT_SLOTS) {
      await expect(cache.applyChanges('e', 'unsafe', [change], slot)).rejects.toThrow(TypeError);
      const check = { fetchedAt: 2, epoch: 0, slot, gone: [] };
      await expect(cache.markChecked('e', 'unsafe', check)).rejects.toThrow(TypeError);
    }
    for (const epoch of [-1, 1.5, Number.NaN]) {
      const check = { fetchedAt: 2, epoch, slot: 5, gone: [] };
      await expect(cache.markChecked('e', 'unsafe', check)).rejects.toThrow(TypeError);
    }
    // The scripts refuse them too, as the text a caller that skipped the check would send.
    const putSplit = new LuaScript(
      new URL('../src/core/lua/put-split-entry.lua', import.meta.url),
      replyNumber,
    );
    const k = redisKeys(prefix);
    const keys = [
      k.entryMeta('e', 'unsafe'),
      k.entryLabels('e', 'unsafe'),
      k.entryMembers('e', 'unsafe'),
      k.memberParents('e'),
      k.followedParents('e'),
    ];
    for (const slot of ['Infinity', 'inf', 'nan', '-1', '1.5', '9223372036854775808', '1e3']) {
      await expect(
        putSplit.run(redis, keys, [slot, '9', '', '', '60000', '', '9', 'unsafe', 'l']),
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
      expect(await cache.put('e', 'frozen', ...withAccounts('frozen', entry(1, 'now', 7)))).toBe(
        'written',
      );
      expect(await stored('frozen')).toEqual(entry(1, 'now', 7));
    }
    // A safe slot far ahead is honoured without a ceiling, and replaced past one.
    await redis.set(key, head('4503599627370496'));
    expect(await cache.put('e', 'frozen', ...withAccounts('frozen', entry(2, 'now', 7)))).toBe(
      'kept',
    );
    expect(
      await cache.put(
        'e',
        'frozen',
        ...withAccounts('frozen', entry(2, 'now', 7)),
        4503599627370495,
      ),
    ).toBe('written');
    // Within the ceiling it is honoured as ever.
    expect(
      await cache.put('e', 'frozen', ...withAccounts('frozen', entry(3, 'behind', 6)), 1_000),
    ).toBe('kept');
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
      await cache.put('e', 'p', ...withAccounts('p', { labels: ['old'], fetchedAt: Date.now() }));

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
      await cache.put(
        'e',
        'p',
        ...withAccounts('p', { labels: ['new'], fetchedAt: Date.now() + 1 }),
      );
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
    const keys = Array.from({ length: 6 }, (_, i) => cache.overrideKey('override', `p${i}`));
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
    await cache.put('default', 'own', ...withAccounts('own', big(99)));
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
    // Past the entries' ttlMs: an expiry is what is tested.
    await elapse(80);
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
        ...withReverses(
          'p',
          { labels: ['bullish'], fetchedAt: 1, slot: 1 },
          { A: ['bullish', 'o'] },
        ),
      );
      expect((await cache.getWithAccounts('e', 'p'))?.accounts).toEqual({ A: ['bullish', 'o'] });
      const members = redisKeys(prefix).entryMembers('e', 'p');
      for (const value of ['"bullish"', '["bullish",7,1]', '["bullish","o"]', 'not json']) {
        await redis.hset(members, 'A', value);
        expect((await cache.getWithAccounts('e', 'p'))?.accounts).toBeNull();
        expect(await cache.member('e', 'p', 'A')).toBeNull();
      }
    } finally {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  });
});

describe('SubdomainCache split layout (configured endpoint)', () => {
  const prefix = uniquePrefix();
  let redis: Redis;
  let cache: SubdomainCache;
  const keys = redisKeys(prefix);
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  const scan = (slot: number, fetchedAt = 1_000): CacheEntry => ({
    labels: [],
    fetchedAt,
    slot,
    scanSlot: slot,
    scannedAt: fetchedAt - 10,
  });
  const index = () => redis.hgetall(keys.memberParents('e'));
  const reverseOf = (parent: string, account: string) =>
    toBase58(reverseKeyFromDomainKey(account, domainKey(parent)));

  it('reads a large entry a run of labels at a time as one revision, begun again after a change', async () => {
    const labels = ['dup', 'dup', 'a', 'a\0b', '\ue000', '😀', 'ß', 'z'];
    labels.push(...Array.from({ length: 60 }, (_, i) => `r${i}`));
    const put = { ...scan(5), labels: [...labels].sort() };
    await cache.put('runs-e', 'runs', ...withAccounts('runs', put));
    const whole = await cache.get(cache.key('runs-e', 'runs'));
    expect(whole?.labels).toEqual(put.labels);
    // The real Redis, with a real change landing after the runs `changeAfter` picks: a new
    // label `<tag><n>`, at the next slot.
    let slot = 5;
    const racing = (tag: string, changeAfter: (run: number) => boolean) => {
      const seen = { runs: 0, changes: 0 };
      const client = Object.create(redis) as Redis;
      client.multi = ((...args: Parameters<Redis['multi']>) => {
        const transaction = redis.multi(...args);
        const exec = transaction.exec.bind(transaction);
        transaction.exec = async () => {
          const replies = await exec();
          if (changeAfter(++seen.runs)) {
            const label = `${tag}${++seen.changes}`;
            const change = { account: label, reverse: `R${label}`, member: [label, 'O'] as const };
            await cache.applyChanges('runs-e', 'runs', [change], ++slot);
          }
          return replies;
        };
        return transaction;
      }) as Redis['multi'];
      return { seen, entries: new SplitEntries(client, keys, 3_600_000, 7) };
    };
    const once = racing('once', (run) => run === 2);
    const got = await once.entries.get('runs-e', 'runs');
    // 68 labels, then 69: the first try stopped at its third run, the second read ten.
    expect(once.seen.runs).toBe(13);
    expect(got?.labels).toEqual([...put.labels, 'once1'].sort());
    expect(got?.slot).toBe(6);
    expect(await once.entries.get('runs-e', 'runs')).toEqual(got);
    // A whole number of runs (70 labels) costs as many, no run past the end.
    const quiet = racing('quiet', () => false);
    const change = { account: 'seventy', reverse: 'Rseventy', member: ['seventy', 'O'] as const };
    await cache.applyChanges('runs-e', 'runs', [change], ++slot);
    expect((await quiet.entries.get('runs-e', 'runs'))?.labels).toHaveLength(70);
    expect(quiet.seen.runs).toBe(10);
    // A change after every run: three tries of two runs, then the entry read in one step.
    const moving = racing('moving', () => true);
    const last = await moving.entries.get('runs-e', 'runs');
    expect(moving.seen.runs).toBe(7);
    const sixMore = [1, 2, 3, 4, 5, 6].map((i) => `moving${i}`);
    expect(last?.labels).toEqual([...put.labels, 'once1', 'seventy', ...sixMore].sort());
    expect(last?.slot).toBe(slot - 1);
  });

  it("reads an entry's labels a run at a time as they were stored, or throws Redis's error", async () => {
    // Labels past U+D7FF and holding NULs on both sides of a run's boundary, a run of exactly
    // the run's size, and an entry without labels.
    const labels = ['\0', 'a\0', 'a\0\0b', 'a', '\uffff', '\u{10ffff}', '\ud7ff', 'z', 'b\0a'];
    const entries = new SplitEntries(redis, keys, 3_600_000, 3);
    for (const count of [labels.length, 3, 1, 0]) {
      const put = { ...scan(5), labels: labels.slice(0, count) };
      await cache.put('runs-e', `runs-${count}`, ...withAccounts(`runs-${count}`, put));
      const got = await entries.get('runs-e', `runs-${count}`);
      expect(got?.labels).toEqual([...put.labels].sort());
      expect(got).toEqual(await cache.get(cache.key('runs-e', `runs-${count}`)));
    }
    expect(await entries.get('runs-e', 'none')).toBeNull();
    await redis.set(keys.entryMeta('runs-e', 'not-json'), 'not JSON');
    expect(await entries.get('runs-e', 'not-json')).toBeNull();
    await redis.set(keys.entryMeta('runs-e', 'wrong'), JSON.stringify({ fetchedAt: 1 }));
    await redis.set(keys.entryLabels('runs-e', 'wrong'), 'a string');
    await expect(entries.get('runs-e', 'wrong')).rejects.toThrow(/WRONGTYPE/);
  });

  it('indexes the reverse records a scan found as given, and refuses a put without one', async () => {
    // A scan names each member's reverse record: it is written as given, not derived again.
    const given = new Map([
      ['K1', 'GivenReverse1'],
      ['K2', 'GivenReverse2'],
    ]);
    const accounts = { K1: ['k', 'o'], K2: ['l', 'o'] } as const;
    // An endpoint of its own: the tests below read the whole index of theirs.
    await cache.put('g', 'given', scan(10), accounts, given, undefined, 1);
    expect(await cache.parentOfMember('g', 'GivenReverse1')).toEqual({
      parent: 'given',
      subdomain: 'K1',
    });
    expect(await cache.parentOfMember('g', 'GivenReverse2')).toEqual({
      parent: 'given',
      subdomain: 'K2',
    });
    expect(await cache.parentOfMember('g', reverseOf('given', 'K1'))).toBeNull();
    // A member without its reverse record is a caller's mistake: nothing is written.
    await expect(
      cache.put('g', 'given', scan(11), { ...accounts, K3: ['m', 'o'] }, given),
    ).rejects.toThrow(TypeError);
    expect((await cache.head('g', 'given'))?.slot).toBe(10);
    expect(await cache.parentOfMember('g', 'K3')).toBeNull();
  });

  it('puts a scan as head, labels and members, indexes every account, and registers the parent', async () => {
    const accounts = { B1: ['beta', 'o1'], A1: ['alpha', 'o2'], Z1: ['alpha', 'o3'] } as const;
    expect(
      await cache.put('e', 'split', ...withReverses('split', scan(10), accounts), undefined, 123),
    ).toBe('written');
    const entry = await cache.get(cache.key('e', 'split'));
    expect(entry).toEqual({ ...scan(10), rev: 1, labels: ['alpha', 'alpha', 'beta'] });
    const read = await cache.getWithAccounts('e', 'split');
    expect(read?.accounts).toEqual(accounts);
    expect(read?.entry.labels).toEqual(['alpha', 'alpha', 'beta']);
    expect(await cache.member('e', 'split', 'A1')).toEqual({
      label: 'alpha',
      owner: 'o2',
      slot: 10,
    });
    expect(await cache.member('e', 'split', 'nope')).toBeNull();
    expect(await cache.head('e', 'split')).toEqual({
      fetchedAt: 1_000,
      slot: 10,
      scanSlot: 10,
      scannedAt: 990,
      rev: 1,
    });
    expect(await cache.head('e', 'nothing')).toBeNull();
    expect(await cache.parentOfMember('e', 'B1')).toEqual({ parent: 'split', subdomain: 'B1' });
    expect(await cache.parentOfMember('e', reverseOf('split', 'B1'))).toEqual({
      parent: 'split',
      subdomain: 'B1',
    });
    expect(await cache.followedParents('e')).toContainEqual({ parent: 'split', usedAt: 123 });
    // A rescan that no longer lists B1 drops its index fields, and only its own.
    await cache.put('e', 'other', ...withReverses('other', scan(10), { O1: ['x', 'o'] }));
    await cache.put(
      'e',
      'split',
      ...withReverses('split', scan(11), { A1: ['alpha', 'o2'], C1: ['gamma', 'o'] }),
    );
    expect(await cache.parentOfMember('e', 'B1')).toBeNull();
    expect(await cache.parentOfMember('e', reverseOf('split', 'B1'))).toBeNull();
    expect(await cache.parentOfMember('e', 'Z1')).toBeNull();
    expect(await cache.parentOfMember('e', 'C1')).toEqual({ parent: 'split', subdomain: 'C1' });
    expect(await cache.parentOfMember('e', 'O1')).toEqual({ parent: 'other', subdomain: 'O1' });
    // The Deletes of one transaction are looked up in one HMGET, in their order.
    expect(await cache.parentsOfMembers('e', ['O1', 'Z1', reverseOf('split', 'C1'), 'C1'])).toEqual(
      [
        { parent: 'other', subdomain: 'O1' },
        null,
        { parent: 'split', subdomain: 'C1' },
        { parent: 'split', subdomain: 'C1' },
      ],
    );
    expect((await cache.get(cache.key('e', 'split')))?.labels).toEqual(['alpha', 'gamma']);
    expect(Object.keys(await index()).sort()).toEqual(
      [
        'A1',
        'C1',
        'O1',
        reverseOf('split', 'A1'),
        reverseOf('split', 'C1'),
        reverseOf('other', 'O1'),
      ].sort(),
    );
  });

  it('indexes and forgets the accounts of a parent holding whitespace (any name the API takes)', async () => {
    const parent = 'a b\tc';
    await cache.put(
      'e',
      parent,
      ...withReverses(parent, scan(10), { W1: ['w', 'o'], W2: ['v', 'o'] }),
    );
    expect(await cache.parentOfMember('e', 'W1')).toEqual({ parent, subdomain: 'W1' });
    expect(await cache.parentOfMember('e', reverseOf(parent, 'W1'))).toEqual({
      parent,
      subdomain: 'W1',
    });
    await cache.put('e', parent, ...withReverses(parent, scan(11), { W2: ['v', 'o'] }));
    expect(await cache.parentOfMember('e', 'W1')).toBeNull();
    expect(await cache.parentOfMember('e', reverseOf(parent, 'W1'))).toBeNull();
    const reverse = reverseOf(parent, 'W2');
    await cache.applyChanges('e', parent, [{ account: 'W2', reverse, member: null }], 12);
    expect(await cache.parentOfMember('e', 'W2')).toBeNull();
    expect(await cache.parentOfMember('e', reverse)).toBeNull();
  });

  it('lists labels in the order answers use (JS string order), whatever Redis sorts by', async () => {
    const labels = ['b', 'a', 'ab', '\u{1f600}', '\uff21', 'a-b', 'A'];
    await cache.put('e', 'order', ...withAccounts('order', { labels, fetchedAt: 1 }));
    expect((await cache.get(cache.key('e', 'order')))?.labels).toEqual([...labels].sort());
    const accounts = Object.fromEntries(labels.map((l, i) => [`K${i}`, [l, 'o'] as const]));
    await cache.put('e', 'order', ...withReverses('order', { labels: [], fetchedAt: 2 }, accounts));
    expect((await cache.get(cache.key('e', 'order')))?.labels).toEqual([...labels].sort());
  });

  it('lists labels holding the separator (NUL) in answer order too', async () => {
    // Sorted-set members 'a\0c1' and 'a\0b\0X1': Redis orders them by the byte after 'a\0'.
    await cache.put(
      'e',
      'nul',
      ...withReverses('nul', { labels: [], fetchedAt: 1 }, { X1: ['a\0b', 'o'], c1: ['a', 'o'] }),
    );
    expect((await cache.get(cache.key('e', 'nul')))?.labels).toEqual(['a', 'a\0b']);
    await cache.put('e', 'nul', ...withAccounts('nul', { labels: ['a\0!', 'a'], fetchedAt: 2 }));
    expect((await cache.get(cache.key('e', 'nul')))?.labels).toEqual(['a', 'a\0!']);
  });

  it('never lists again, from a change older than the last scan, an account that scan did not list', async () => {
    await cache.put('e', 'late', ...withReverses('late', scan(100), { A: ['a', 'o'] }));
    // X created at 90 and deleted at 95, its creation arriving after the scan at 100.
    const late = { account: 'X', reverse: 'RX', member: ['x', 'o'] as const };
    expect(await cache.applyChanges('e', 'late', [late], 90)).toEqual({
      outcome: 'unchanged',
      rev: 1,
    });
    expect((await cache.get(cache.key('e', 'late')))?.labels).toEqual(['a']);
    expect(await cache.parentOfMember('e', 'X')).toBeNull();
    // One seen after the scan lands.
    expect((await cache.applyChanges('e', 'late', [late], 101)).outcome).toBe('written');
    expect((await cache.get(cache.key('e', 'late')))?.labels).toEqual(['a', 'x']);
  });

  it('judges no change against an entry whose scan slot is past the ceiling: unsound, untouched', async () => {
    await cache.put('e', 'ahead', ...withReverses('ahead', scan(1_000_000), { A: ['a', 'o'] }));
    const added = { account: 'X', reverse: 'RX', member: ['x', 'o'] as const };
    // A ceiling of 500: the stored scan at 1,000,000 is a slot no chain has reached.
    expect(await cache.applyChanges('e', 'ahead', [added], 400, 500)).toEqual({
      outcome: 'unsound',
      rev: 1,
    });
    expect((await cache.get(cache.key('e', 'ahead')))?.labels).toEqual(['a']);
    // Under a ceiling past it, the stored scan is believed: the older change is ignored as before.
    expect((await cache.applyChanges('e', 'ahead', [added], 400, 2_000_000)).outcome).toBe(
      'unchanged',
    );
  });

  it('applies changes to the accounts they name only, raising the slot and the revision when something changed', async () => {
    await cache.put(
      'e',
      'apply',
      ...withReverses('apply', scan(100), { A: ['a', 'o1'], B: ['b', 'o1'] }),
    );
    const change = (account: string, member: readonly [string, string] | null) => ({
      account,
      reverse: `R${account}`,
      member,
    });
    // An addition and a transfer in one step.
    expect(
      await cache.applyChanges(
        'e',
        'apply',
        [change('C', ['c', 'o2']), change('A', ['a', 'o3'])],
        105,
      ),
    ).toEqual({ outcome: 'written', rev: 2 });
    let read = await cache.getWithAccounts('e', 'apply');
    expect(read?.accounts).toEqual({ A: ['a', 'o3'], B: ['b', 'o1'], C: ['c', 'o2'] });
    expect(read?.entry).toMatchObject({ slot: 105, rev: 2, scanSlot: 100, fetchedAt: 1_000 });
    expect(await cache.parentOfMember('e', 'RC')).toEqual({ parent: 'apply', subdomain: 'C' });
    // The same again: nothing changed, the revision and slot stay.
    expect(await cache.applyChanges('e', 'apply', [change('C', ['c', 'o2'])], 106)).toEqual({
      outcome: 'unchanged',
      rev: 2,
    });
    // Older than the member: ignored (a late notification), though newer than other members.
    expect(await cache.applyChanges('e', 'apply', [change('C', ['c', 'o9'])], 104)).toEqual({
      outcome: 'unchanged',
      rev: 2,
    });
    // ... and the no-op at 106 raised C's slot, so a change at 105 is older too.
    expect((await cache.applyChanges('e', 'apply', [change('C', null)], 105)).outcome).toBe(
      'unchanged',
    );
    // A rename moves the label; a removal drops the member, its label and its index fields.
    expect(await cache.applyChanges('e', 'apply', [change('B', ['z', 'o1'])], 107)).toEqual({
      outcome: 'written',
      rev: 3,
    });
    expect(
      await cache.applyChanges('e', 'apply', [change('C', null), change('X', null)], 108),
    ).toEqual({
      outcome: 'written',
      rev: 4,
    });
    read = await cache.getWithAccounts('e', 'apply');
    expect(read?.accounts).toEqual({ A: ['a', 'o3'], B: ['z', 'o1'] });
    expect((await cache.get(cache.key('e', 'apply')))?.labels).toEqual(['a', 'z']);
    expect(await cache.parentOfMember('e', 'C')).toBeNull();
    expect(await cache.parentOfMember('e', 'RC')).toBeNull();
    expect(JSON.parse((await redis.get(cache.key('e', 'apply'))) ?? '{}')).toMatchObject({
      count: 2,
      slot: 108,
    });
    // A scan older than the changes is refused; one at their slot or later replaces them.
    expect(
      await cache.put('e', 'apply', ...withReverses('apply', scan(104, 9_000), { A: ['a', 'o1'] })),
    ).toBe('kept');
    expect(
      await cache.put('e', 'apply', ...withReverses('apply', scan(108, 9_000), { A: ['a', 'o1'] })),
    ).toBe('written');
    expect(await cache.parentOfMember('e', 'B')).toBeNull();
  });

  it("says 'missing' without an entry, and touches nothing", async () => {
    const change = { account: 'NA', reverse: 'RNA', member: ['a', 'o'] } as const;
    expect(await cache.applyChanges('e', 'none', [change], 5)).toEqual({
      outcome: 'missing',
      rev: 0,
    });
    expect(await redis.exists(keys.entryMembers('e', 'none'), keys.entryLabels('e', 'none'))).toBe(
      0,
    );
    expect(await cache.parentOfMember('e', 'RNA')).toBeNull();
    // An entry whose head is unreadable cannot be patched: only a scan writes it anew.
    await redis.set(keys.entryMeta('e', 'bare'), '{"slot":1,"rev":1,"fetchedAt":"x","count":0}');
    expect(await cache.applyChanges('e', 'bare', [change], 5)).toEqual({
      outcome: 'missing',
      rev: 1,
    });
    expect(
      await cache.markChecked('e', 'none', { fetchedAt: 5, epoch: 0, slot: 5, gone: ['NA'] }),
    ).toEqual({
      outcome: 'missing',
      rev: 0,
      dropped: 0,
    });
  });

  it('ignores an addition the scan it patches already read past (a late or replayed notification)', async () => {
    // Scanned at 110: the name created at 100 and deleted at 105 is not listed. Its creation's
    // notifications, kept for replay while the parent was not followed, come after the scan.
    await cache.put(
      'e',
      'replayed',
      ...withReverses('replayed', { ...scan(110), scanSlot: 110 }, { A: ['a', 'o1'] }),
    );
    const add = { account: 'GONE', reverse: 'RGONE', member: ['gone', 'o1'] } as const;
    expect((await cache.applyChanges('e', 'replayed', [add], 100)).outcome).toBe('unchanged');
    expect((await cache.get(cache.key('e', 'replayed')))?.labels).toEqual(['a']);
    expect(await cache.parentOfMember('e', 'RGONE')).toBeNull();
    // After the scan's slot it is new; a listed member still follows changes of any later slot.
    expect((await cache.applyChanges('e', 'replayed', [add], 111)).outcome).toBe('written');
    expect(
      (
        await cache.applyChanges(
          'e',
          'replayed',
          [{ ...add, account: 'A', member: ['a', 'o2'] }],
          108,
        )
      ).outcome,
    ).toBe('unchanged');
  });

  it('gives keys a change creates the life of the entry', async () => {
    await cache.put('e', 'empty', ...withReverses('empty', scan(1), {}));
    expect(await redis.exists(keys.entryMembers('e', 'empty'))).toBe(0);
    await cache.applyChanges(
      'e',
      'empty',
      [{ account: 'NA', reverse: 'RNA', member: ['a', 'o'] }],
      2,
    );
    for (const key of [keys.entryMembers('e', 'empty'), keys.entryLabels('e', 'empty')]) {
      expect(await redis.pttl(key)).toBeGreaterThan(3_500_000);
    }
  });

  it('marks an existence check: drops the accounts gone unless written since, raises fetchedAt and slot', async () => {
    await cache.put(
      'e',
      'check',
      ...withReverses('check', scan(50), { NA: ['a', 'o'], NB: ['b', 'o'], NC: ['c', 'o'] }),
    );
    await cache.applyChanges(
      'e',
      'check',
      [{ account: 'NC', reverse: 'RNC', member: ['c', 'p'] }],
      60,
    );
    const checked = await cache.markChecked('e', 'check', {
      fetchedAt: 5_000,
      epoch: 1_000,
      slot: 55,
      gone: ['NA', 'NC', 'nobody'],
    });
    expect(checked).toEqual({ outcome: 'written', rev: 3, dropped: 1 });
    const read = await cache.getWithAccounts('e', 'check');
    expect(read?.accounts).toEqual({ NB: ['b', 'o'], NC: ['c', 'p'] });
    expect(read?.entry).toMatchObject({ fetchedAt: 5_000, slot: 60 });
    expect(await cache.parentOfMember('e', 'NA')).toBeNull();
    // An older check never moves fetchedAt back.
    await cache.markChecked('e', 'check', { fetchedAt: 4_000, epoch: 1_000, gone: [] });
    expect((await cache.get(cache.key('e', 'check')))?.fetchedAt).toBe(5_000);
    // Under an epoch past the entry's fetch (a gap the stream could not heal), a check still drops
    // what is gone and raises the slot, but the entry is no newer: a name created in the gap may
    // be missing, and a check cannot see it.
    await cache.markChecked('e', 'check', {
      fetchedAt: 9_000,
      epoch: 6_000,
      slot: 70,
      gone: ['NB'],
    });
    const given = await cache.getWithAccounts('e', 'check');
    expect(given?.accounts).toEqual({ NC: ['c', 'p'] });
    expect(given?.entry).toMatchObject({ fetchedAt: 5_000, slot: 70 });
  });

  it('marks a re-read owed: not fresh by following until a scan that far is stored', async () => {
    await cache.put('e', 'owing', ...withReverses('owing', scan(50), { NA: ['a', 'o'] }));
    const status = { epoch: 0, healthyUntil: 1e15, mode: 'program' as const };
    const head = async () => (await cache.get(cache.key('e', 'owing'))) as CacheEntry;
    expect(followedFresh(await head(), status, 10_000)).toBe(true);
    expect(await cache.markOwed('e', 'owing', 70)).toBe('written');
    expect(await cache.markOwed('e', 'absent', 70)).toBe('missing');
    expect(await head()).toMatchObject({ owes: 70 });
    expect(followedFresh(await head(), status, 10_000)).toBe(false);
    // A change applied, a check, a scan short of the slot: still owed.
    await cache.applyChanges(
      'e',
      'owing',
      [{ account: 'NB', reverse: 'RNB', member: ['b', 'o'] }],
      60,
    );
    await cache.markChecked('e', 'owing', { fetchedAt: 2_000, epoch: 0, slot: 61, gone: [] });
    // Nor is it any newer by the window: the check cannot see the change it owes.
    expect((await head()).fetchedAt).toBe(1_000);
    await cache.put('e', 'owing', ...withReverses('owing', scan(65, 3_000), { NA: ['a', 'o'] }));
    expect(await head()).toMatchObject({ owes: 70 });
    // A scan that far settles it.
    await cache.put('e', 'owing', ...withReverses('owing', scan(70, 4_000), { NA: ['a', 'o'] }));
    expect((await head()).owes).toBeUndefined();
    expect(followedFresh(await head(), status, 10_000)).toBe(true);
  });

  it('touch slides the expiry and the registry score; the sweep removes idle parents with their index fields', async () => {
    const local = new SubdomainCache(redis, `${prefix}:sweep`, 60_000, 10_000);
    const k = redisKeys(`${prefix}:sweep`);
    await local.put(
      'e',
      'idle',
      ...withReverses('idle', scan(1), { I1: ['i', 'o'] }),
      undefined,
      1_000,
    );
    await local.put(
      'e',
      'used',
      ...withReverses('used', scan(1), { U1: ['u', 'o'] }),
      undefined,
      1_000,
    );
    expect(await local.touch('e', 'used', 8_000)).toBe(true);
    expect(await local.touch('e', 'absent', 8_000)).toBe(false);
    expect(await local.followedParents('e')).toEqual([
      { parent: 'idle', usedAt: 1_000 },
      { parent: 'used', usedAt: 8_000 },
    ]);
    expect(await local.sweep('e', 11_000)).toEqual({ removed: 0, more: false });
    expect(await local.sweep('e', 12_000)).toEqual({ removed: 1, more: false });
    expect(await local.followedParents('e')).toEqual([{ parent: 'used', usedAt: 8_000 }]);
    expect(await local.get(local.key('e', 'idle'))).toBeNull();
    expect(await redis.exists(k.entryLabels('e', 'idle'), k.entryMembers('e', 'idle'))).toBe(0);
    expect(await local.parentOfMember('e', 'I1')).toBeNull();
    expect(await local.parentOfMember('e', reverseOf('idle', 'I1'))).toBeNull();
    expect(await local.parentOfMember('e', 'U1')).toEqual({ parent: 'used', subdomain: 'U1' });
    expect(await redis.hlen(k.memberParents('e'))).toBe(2);
  });

  it('drops the index fields of parents whose keys expired before the sweep reached them', async () => {
    // A sweep that falls behind (a worker down, a burst of idle parents) finds an idle parent's
    // keys expired, and no members left to name its index fields by. Redis expires a key by
    // deleting it: the test deletes 'gone''s keys and dates the uses, rather than racing real
    // expiry against the sweep's clock.
    const local = new SubdomainCache(redis, `${prefix}:orphans`, 60_000, 3_600_000);
    const now = Date.now();
    await local.put(
      'e',
      'gone',
      ...withReverses('gone', scan(1), { G1: ['g', 'o'] }),
      undefined,
      now - 7_200_000,
    );
    await local.put(
      'e',
      'live',
      ...withReverses('live', scan(1), { L1: ['l', 'o'] }),
      undefined,
      now,
    );
    const k = redisKeys(`${prefix}:orphans`);
    const goneKeys = [
      k.entryMeta('e', 'gone'),
      k.entryLabels('e', 'gone'),
      k.entryMembers('e', 'gone'),
    ];
    expect(await redis.del(...goneKeys)).toBe(3);
    expect(await local.parentOfMember('e', 'G1')).toEqual({ parent: 'gone', subdomain: 'G1' });
    for (let more = true; more;) more = (await local.sweep('e', now)).more;
    expect((await local.followedParents('e')).map((p) => p.parent)).toEqual(['live']);
    for (let done = false; !done;) done = (await local.sweepIndex('e')).done;
    expect(await local.parentOfMember('e', 'G1')).toBeNull();
    expect(await local.parentOfMember('e', reverseOf('gone', 'G1'))).toBeNull();
    expect(await local.parentOfMember('e', 'L1')).toEqual({ parent: 'live', subdomain: 'L1' });
    expect(await local.parentOfMember('e', reverseOf('live', 'L1'))).toEqual({
      parent: 'live',
      subdomain: 'L1',
    });
  });

  it('sweeps in bounded batches', async () => {
    const local = new SubdomainCache(redis, `${prefix}:batches`, 60_000, 10_000);
    for (let i = 0; i < 450; i++)
      await local.put('e', `p${i}`, ...withReverses(`p${i}`, scan(1), {}), undefined, 1);
    const first = await local.sweep('e', 1_000_000);
    expect(first).toEqual({ removed: 200, more: true });
    let removed = first.removed;
    for (let more = true; more;) {
      const next = await local.sweep('e', 1_000_000);
      removed += next.removed;
      more = next.more;
    }
    expect(removed).toBe(450);
    expect(await local.followedParents('e')).toEqual([]);
  });

  it('writes a scan past one chunk in chunks, whole, and drops what a refused one staged', async () => {
    const local = new SubdomainCache(redis, `${prefix}:staged`, 60_000, 3_600_000);
    const localKeys = redisKeys(`${prefix}:staged`);
    const many = (n: number, tag: string) =>
      Object.fromEntries(
        Array.from({ length: n }, (_, i) => [`S${tag}${i}`, [`l${i}`, 'o'] as const]),
      );
    const first = many(2 * PUT_CHUNK_MEMBERS + 1, 'a');
    expect(await local.put('e', 'staged', ...withReverses('staged', scan(10), first))).toBe(
      'written',
    );
    const read = await local.getWithAccounts('e', 'staged');
    expect(read?.accounts).toEqual(first);
    expect((await local.get(local.key('e', 'staged')))?.labels).toHaveLength(
      2 * PUT_CHUNK_MEMBERS + 1,
    );
    const index = () => redis.hgetall(localKeys.memberParents('e'));
    expect(Object.keys(await index())).toHaveLength(2 * (2 * PUT_CHUNK_MEMBERS + 1));
    // A rescan listing other accounts: those gone lose their index fields.
    const second = many(PUT_CHUNK_MEMBERS + 5, 'b');
    expect(await local.put('e', 'staged', ...withReverses('staged', scan(11), second))).toBe(
      'written',
    );
    expect((await local.getWithAccounts('e', 'staged'))?.accounts).toEqual(second);
    const fields = await index();
    expect(Object.keys(fields)).toHaveLength(2 * (PUT_CHUNK_MEMBERS + 5));
    expect(fields.Sa0).toBeUndefined();
    // An older scan is refused: the entry stays, and nothing it staged is left behind.
    expect(
      await local.put(
        'e',
        'staged',
        ...withReverses('staged', scan(9), many(PUT_CHUNK_MEMBERS + 3, 'c')),
      ),
    ).toBe('kept');
    expect((await local.getWithAccounts('e', 'staged'))?.accounts).toEqual(second);
    expect(await index()).toEqual(fields);
    expect(await redis.keys(`${prefix}:staged:entry-staging:*`)).toEqual([]);
  });

  it('writes a scan fed in parts as a put of its members writes it, chunks staged as they fill', async () => {
    const local = new SubdomainCache(redis, `${prefix}:fed`, 60_000, 3_600_000);
    const localKeys = redisKeys(`${prefix}:fed`);
    const members = Array.from(
      { length: 2 * PUT_CHUNK_MEMBERS + 7 },
      (_, i) => [`l${i}`, `F${i}`, `o${i % 3}`, `R${i}`] as const,
    );
    const write = local.scanWrite('e', 'fed', 12);
    write.add(members.slice(0, PUT_CHUNK_MEMBERS - 1));
    // Short of a chunk: nothing staged yet.
    expect(await redis.keys(`${prefix}:fed:entry-staging:*`)).toEqual([]);
    write.add(members.slice(PUT_CHUNK_MEMBERS - 1, PUT_CHUNK_MEMBERS + 3));
    // One chunk filled: staged while the scan goes on, before the commit.
    await waitFor(
      async () => (await redis.keys(`${prefix}:fed:entry-staging:*`)).length === 2,
      10_000,
      'the first chunk staged',
    );
    write.add(members.slice(PUT_CHUNK_MEMBERS + 3, 2 * PUT_CHUNK_MEMBERS + 2));
    // Short of a second chunk; flushed (the scan has listed its members), staged all the same.
    const stagedMembers = async () => {
      for (const key of await redis.keys(`${prefix}:fed:entry-staging:*`)) {
        if ((await redis.type(key)) === 'hash') return redis.hlen(key);
      }
      return 0;
    };
    write.flush();
    await waitFor(
      async () => (await stagedMembers()) === 2 * PUT_CHUNK_MEMBERS + 2,
      10_000,
      'the members flushed staged',
    );
    write.add(members.slice(2 * PUT_CHUNK_MEMBERS + 2));
    expect(await write.commit(scan(12))).toBe('written');
    const accounts = Object.fromEntries(members.map(([l, a, o]) => [a, [l, o] as const]));
    expect((await local.getWithAccounts('e', 'fed'))?.accounts).toEqual(accounts);
    expect(await local.member('e', 'fed', 'F5')).toEqual({ label: 'l5', owner: 'o2', slot: 12 });
    expect(await redis.hget(localKeys.memberParents('e'), 'R9')).toBe('fed F9');
    expect(await redis.keys(`${prefix}:fed:entry-staging:*`)).toEqual([]);
    // A write short of one chunk stays one script: a flush stages nothing.
    const small = local.scanWrite('e', 'fed-small', 12);
    small.add(members.slice(0, 3));
    small.flush();
    expect(await redis.keys(`${prefix}:fed:entry-staging:*`)).toEqual([]);
    expect(await small.commit(scan(12))).toBe('written');
    expect((await local.get(local.key('e', 'fed-small')))?.labels).toEqual(['l0', 'l1', 'l2']);
    // The entry's slot is the members': anything else is refused before anything is written.
    await expect(local.scanWrite('e', 'fed', 13).commit(scan(14))).rejects.toThrow(TypeError);
    // A write given up drops what its chunks staged.
    const dropped = local.scanWrite('e', 'fed', 15);
    dropped.add(members.slice(0, PUT_CHUNK_MEMBERS));
    await dropped.abandon();
    expect(await redis.keys(`${prefix}:fed:entry-staging:*`)).toEqual([]);
    expect((await local.getWithAccounts('e', 'fed'))?.entry.slot).toBe(12);
  });

  it('fed eagerly, sends a part at once and what is pending whenever no chunk is under way', async () => {
    // A large scan's parts start small (worker/sns/scan-classify.ts): Redis starts on the first
    // few members rather than a whole chunk later.
    const local = new SubdomainCache(redis, `${prefix}:eager`, 60_000, 3_600_000);
    const members = Array.from(
      { length: 40 },
      (_, i) => [`e${i}`, `E${i}`, `o${i % 3}`, `Q${i}`] as const,
    );
    const stagedMembers = async () => {
      for (const key of await redis.keys(`${prefix}:eager:entry-staging:*`)) {
        if ((await redis.type(key)) === 'hash') return redis.hlen(key);
      }
      return 0;
    };
    const write = local.scanWrite('e', 'eager', 7);
    write.addPacked(packMembers(members.slice(0, 3)), true);
    // Far short of a chunk, and no flush: staged all the same.
    await waitFor(async () => (await stagedMembers()) === 3, 10_000, 'the first part staged');
    // Redis is free again: the next part goes at once too, and so do the parts after it.
    write.addPacked(packMembers(members.slice(3, 8)), true);
    await waitFor(async () => (await stagedMembers()) === 8, 10_000, 'the second part staged');
    write.addPacked(packMembers(members.slice(8, 20)), true);
    write.addPacked(packMembers(members.slice(20)), true);
    expect(await write.commit(scan(7))).toBe('written');
    const accounts = Object.fromEntries(members.map(([l, a, o]) => [a, [l, o] as const]));
    expect((await local.getWithAccounts('e', 'eager'))?.accounts).toEqual(accounts);
    expect(await redis.keys(`${prefix}:eager:entry-staging:*`)).toEqual([]);
  });

  it('writes any label byte for byte, in one step and in chunks', async () => {
    // What a member's argument (`account reverse [label,owner,slot]\nlabel`) must carry through:
    // its own separators, text that reads as its JSON, NULs, lone surrogates, several bytes a
    // character, an empty label and a long one.
    const awkward = [
      'a b',
      '12 34',
      'x\ny',
      '\n',
      ' ',
      '',
      'a\0b',
      '\0',
      '\ud800',
      'z\udfffz',
      'ß😀\ue000',
      '9'.repeat(300),
      '[1,"o",2]\nq',
    ];
    for (const [parent, size] of [
      ['awkward-one', awkward.length],
      ['awkward-chunks', PUT_CHUNK_MEMBERS + awkward.length],
    ] as const) {
      const members = Array.from({ length: size }, (_, i) => {
        const label = awkward[i % awkward.length] as string;
        return [`${label}${i < awkward.length ? '' : i}`, `W${i}`, `o ${i % 2}`, `V${i}`] as const;
      });
      const write = cache.scanWrite('e', parent, 3);
      write.add(members);
      expect(await write.commit(scan(3))).toBe('written');
      // A member's JSON keeps a lone surrogate escaped; the labels' sorted set holds UTF-8, where
      // it is U+FFFD.
      const utf8 = (s: string) => Buffer.from(s).toString();
      const accounts = Object.fromEntries(members.map(([l, a, o]) => [a, [l, o] as const]));
      expect((await cache.getWithAccounts('e', parent))?.accounts).toEqual(accounts);
      const labels = (await cache.get(cache.key('e', parent)))?.labels;
      expect(labels).toEqual(members.map(([l]) => utf8(l)).sort());
      expect(await redis.hget(keys.memberParents('e'), 'V7')).toBe(`${parent} W7`);
    }
  });

  it('costs a change in proportion to the accounts it touches: one change under 100,000 members', async () => {
    const local = new SubdomainCache(redis, `${prefix}:big`, 60_000, 3_600_000);
    const accounts: Record<string, readonly [string, string]> = {};
    for (let i = 0; i < 100_000; i++) accounts[`Acc${i}`] = [`label${i}`, 'owner'];
    let started = performance.now();
    await local.put('e', 'big', ...withReverses('big', scan(10), accounts));
    const putMs = performance.now() - started;
    const change = {
      account: 'Acc77',
      reverse: reverseOf('big', 'Acc77'),
      member: ['label77', 'new'],
    } as const;
    const times: number[] = [];
    for (let slot = 11; slot < 31; slot++) {
      started = performance.now();
      const done = await local.applyChanges(
        'e',
        'big',
        [{ ...change, member: ['label77', `o${slot}`] }],
        slot,
      );
      times.push(performance.now() - started);
      expect(done.outcome).toBe('written');
    }
    const applyMs = times.sort((a, b) => a - b)[times.length >> 1] as number;
    console.log(
      `100,000 members: put ${putMs.toFixed(0)} ms, applyChanges (median of 20) ${applyMs.toFixed(2)} ms`,
    );
    expect(applyMs * 50).toBeLessThan(putMs);
    expect(await local.member('e', 'big', 'Acc77')).toEqual({
      label: 'label77',
      owner: 'o30',
      slot: 30,
    });
  }, 60_000);
});
