import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  awaitsHeal,
  followedFresh,
  HEAL_GRACE_MS,
  FollowStatusReader,
  readFollowStatus,
  writeFollowStatus,
  type FollowStatus,
} from '../src/core/cache/follow-status.js';
import { RegistryIndex } from '../src/core/cache/registry-index.js';
import { healDated, registryServing } from '../src/core/cache/registry-serving.js';
import { RegistrySource } from '../src/api/subdomains/registry-source.js';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { ParentTouches } from '../src/api/subdomains/parent-touches.js';
import { deletePrefix, uniquePrefix } from './support/gateway.js';

describe('follow status', () => {
  const prefix = uniquePrefix();
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('is written and read back, and its epoch never moves back', async () => {
    expect(await readFollowStatus(redis, prefix)).toBeNull();
    const status: FollowStatus = { epoch: 5_000, healthyUntil: 9_000, mode: 'program' };
    expect(await writeFollowStatus(redis, prefix, status)).toEqual(status);
    expect(await readFollowStatus(redis, prefix)).toEqual(status);
    const behind = { epoch: 4_000, healthyUntil: 10_000, mode: 'parents' } as const;
    expect(await writeFollowStatus(redis, prefix, behind)).toEqual({ ...behind, epoch: 5_000 });
    expect(await readFollowStatus(redis, prefix)).toEqual({ ...behind, epoch: 5_000 });
    await expect(
      writeFollowStatus(redis, prefix, { ...status, epoch: Number.NaN }),
    ).rejects.toThrow(TypeError);
    await expect(
      writeFollowStatus(redis, prefix, { ...status, mode: 'all' as 'off' }),
    ).rejects.toThrow(TypeError);
    // A Delete waiting for its read is kept, and dropped once none waits.
    const waiting = { ...status, epoch: 6_000, deletesSince: 7_000 };
    expect(await writeFollowStatus(redis, prefix, waiting)).toEqual(waiting);
    expect(await readFollowStatus(redis, prefix)).toEqual(waiting);
    expect(await writeFollowStatus(redis, prefix, { ...status, epoch: 6_000 })).toEqual({
      ...status,
      epoch: 6_000,
    });
    await expect(writeFollowStatus(redis, prefix, { ...status, deletesSince: -1 })).rejects.toThrow(
      TypeError,
    );
    // A heal under way is kept while it is written, and dropped once it is not.
    const healing = { ...status, epoch: 6_000, healthyUntil: 0, healingSince: 8_000 };
    expect(await writeFollowStatus(redis, prefix, healing)).toEqual(healing);
    expect(await readFollowStatus(redis, prefix)).toEqual(healing);
    expect(await writeFollowStatus(redis, prefix, { ...status, epoch: 6_000 })).toEqual({
      ...status,
      epoch: 6_000,
    });
    await expect(
      writeFollowStatus(redis, prefix, { ...status, healingSince: 1.5 }),
    ).rejects.toThrow(TypeError);
    // So is the stream's last vouch, beside it.
    const unvouched = { ...healing, vouchedAt: 7_500 };
    expect(await writeFollowStatus(redis, prefix, unvouched)).toEqual(unvouched);
    expect(await readFollowStatus(redis, prefix)).toEqual(unvouched);
    expect(await writeFollowStatus(redis, prefix, { ...status, epoch: 6_000 })).toEqual({
      ...status,
      epoch: 6_000,
    });
    for (const vouchedAt of [1.5, -1, Number.NaN]) {
      await expect(writeFollowStatus(redis, prefix, { ...healing, vouchedAt })).rejects.toThrow(
        TypeError,
      );
    }
    await redis.set(redisKeys(prefix).followStatus, '{"epoch":"x"}');
    expect(await readFollowStatus(redis, prefix)).toBeNull();
    // A waiting Delete whose time is not a number still waits: never read as none.
    await redis.set(
      redisKeys(prefix).followStatus,
      '{"epoch":1,"healthyUntil":2,"mode":"program","deletesSince":"x"}',
    );
    expect((await readFollowStatus(redis, prefix))?.deletesSince).toBe(0);
    // A heal whose start is not a time is none: its entries are refreshed as without one.
    await redis.set(
      redisKeys(prefix).followStatus,
      '{"epoch":1,"healthyUntil":0,"mode":"program","healingSince":"x"}',
    );
    expect(await readFollowStatus(redis, prefix)).toEqual({
      epoch: 1,
      healthyUntil: 0,
      mode: 'program',
    });
    // A last vouch that is not a time is unknown: nothing is dated by it.
    await redis.set(
      redisKeys(prefix).followStatus,
      '{"epoch":1,"healthyUntil":0,"mode":"program","healingSince":5,"vouchedAt":"x"}',
    );
    expect(await readFollowStatus(redis, prefix)).toEqual({
      epoch: 1,
      healthyUntil: 0,
      mode: 'program',
      healingSince: 5,
    });
  });

  it('is read at most every interval, one read shared by concurrent callers', async () => {
    const own = `${prefix}:reader`;
    let now = 1_000_000;
    let reads = 0;
    const counting = new Proxy(redis, {
      get(target, name, receiver) {
        if (name === 'get') {
          return (key: string) => {
            reads++;
            return target.get(key);
          };
        }
        return Reflect.get(target, name, receiver) as unknown;
      },
    });
    const reader = new FollowStatusReader(counting, own, { now: () => now });
    // Nothing read yet: null at once, and a read begins in the background, which read() joins.
    expect(reader.current()).toBeNull();
    expect(await reader.read()).toBeNull();
    expect(reads).toBe(1);
    const status: FollowStatus = { epoch: 1, healthyUntil: 2, mode: 'program' };
    await writeFollowStatus(redis, own, status);
    expect(await reader.read()).toBeNull();
    now += 500;
    const all = await Promise.all([reader.read(), reader.read(), reader.read()]);
    expect(all).toEqual([status, status, status]);
    expect(reads).toBe(2);
    now += 499;
    await writeFollowStatus(redis, own, { ...status, healthyUntil: 3 });
    expect(await reader.read()).toEqual(status);
    expect(reader.current()).toEqual(status);
    expect(reads).toBe(2);
    now += 1;
    expect(await reader.read()).toEqual({ ...status, healthyUntil: 3 });
    expect(reads).toBe(3);
  });

  it('makes an entry fresh past its window only while the whole program is followed, healthy, since before its fetch', () => {
    const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
    const now = 10_000_000;
    const entry = { labels: [], fetchedAt: now - 120_000 };
    const healthy: FollowStatus = {
      epoch: now - 200_000,
      healthyUntil: now + 3_000,
      mode: 'program',
    };
    expect(cache.freshness(entry, now)).toBe('stale');
    expect(cache.freshness(entry, now, healthy)).toBe('fresh');
    expect(cache.freshMsLeft(entry, now, healthy)).toBe(3_000);
    expect(followedFresh(entry, healthy, now)).toBe(true);
    for (const status of [
      { ...healthy, healthyUntil: now },
      { ...healthy, epoch: entry.fetchedAt + 1 },
      { ...healthy, mode: 'parents' as const },
      { ...healthy, mode: 'off' as const },
      // A Delete waits for its read: which entries it changes is unknown until then.
      { ...healthy, deletesSince: now - 5_000 },
      null,
    ]) {
      expect(cache.freshness(entry, now, status)).toBe('stale');
      expect(cache.freshMsLeft(entry, now, status)).toBe(0);
    }
    // The window still counts on its own, and the later of the two ends wins.
    const young = { labels: [], fetchedAt: now - 1_000 };
    expect(cache.freshMsLeft(young, now, healthy)).toBe(59_000);
    expect(cache.freshMsLeft(young, now, { ...healthy, mode: 'off' })).toBe(59_000);
  });

  it('lets a stale entry wait for a heal under way only while the heal would vouch for it, within the bound', () => {
    const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
    const now = 10_000_000;
    const entry = { labels: [], fetchedAt: now - 120_000 };
    const healing: FollowStatus = {
      epoch: now - 200_000,
      healthyUntil: 0,
      mode: 'program',
      healingSince: now - 1_000,
    };
    expect(awaitsHeal(entry, healing, now)).toBe(true);
    // Still stale: waiting for the heal never makes an answer fresh.
    expect(cache.freshness(entry, now, healing)).toBe('stale');
    expect(cache.freshMsLeft(entry, now, healing)).toBe(0);
    expect(awaitsHeal(entry, healing, now - 1_000 + HEAL_GRACE_MS - 1)).toBe(true);
    for (const [status, at] of [
      // The bound has passed: the heal is stuck, the entry is refreshed as without a stream.
      [healing, now - 1_000 + HEAL_GRACE_MS],
      // The heal would not vouch for this entry: fetched before the epoch, a Delete waiting.
      [{ ...healing, epoch: entry.fetchedAt + 1 }, now],
      [{ ...healing, deletesSince: now - 5_000 }, now],
      // Not the whole program followed, no heal said, a start ahead of the clock, no status.
      [{ ...healing, mode: 'parents' as const }, now],
      [{ epoch: healing.epoch, healthyUntil: 0, mode: 'program' as const }, now],
      [{ ...healing, healingSince: now + 1 }, now],
      [null, now],
    ] as const) {
      expect(awaitsHeal(entry, status, at)).toBe(false);
    }
    // An entry that owes a re-read is not vouched for by any heal.
    expect(awaitsHeal({ ...entry, owes: 5 }, healing, now)).toBe(false);
  });

  it('lets the registry index answer through a heal, dated from the last vouch, only while it would serve but for the heal, within the window', () => {
    const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
    const now = 10_000_000;
    const since = now - 1_000;
    // The vouching stopped before the heal began (a refused probe, then the socket closed).
    const vouched = since - 20_000;
    const built = { status: 'complete' as const, startedAt: now - 100_000 };
    const healing: FollowStatus = {
      epoch: now - 200_000,
      healthyUntil: 0,
      mode: 'program',
      healingSince: since,
      vouchedAt: vouched,
    };
    /** The rule with the cache's window (no status), the clock at `at`. */
    const dated = (state: Parameters<typeof healDated>[0], status: FollowStatus | null, at = now) =>
      healDated(
        state,
        status,
        at,
        (fetchedAt) => cache.freshness({ labels: [], fetchedAt }, at) === 'fresh',
      );
    // Dated from the last vouch, not from the heal's start.
    expect(dated(built, healing)).toBe(vouched);
    expect(dated(built, { ...healing, vouchedAt: since })).toBe(since);
    // Not a state of its own: the index is `unfollowed` to readiness and the gauge meanwhile.
    expect(registryServing(built, healing, now)).toBe('unfollowed');
    // From the heal's start to the last moment an answer dated at the last vouch is fresh by the
    // window: the window counts from the vouch.
    expect(dated(built, healing, since)).toBe(vouched);
    expect(dated(built, healing, vouched + 60_000 - 1)).toBe(vouched);
    // A Delete waiting for its read since before the last vouch dates the answers earlier; since
    // after it, the vouch does.
    expect(dated(built, { ...healing, deletesSince: vouched - 5_000 })).toBe(vouched - 5_000);
    expect(dated(built, { ...healing, deletesSince: vouched + 500 })).toBe(vouched);
    const unknownVouch: FollowStatus = {
      epoch: healing.epoch,
      healthyUntil: 0,
      mode: 'program',
      healingSince: since,
    };
    for (const [state, status, at] of [
      // The window has passed since the last vouch, though not since the heal's start.
      [built, healing, vouched + 60_000],
      // When the stream last vouched is not known: no date can be given, the per-parent path.
      [built, unknownVouch, now],
      // No complete build: none, building, behind (the rebuild answers per parent meanwhile).
      [null, healing, now],
      [{ ...built, status: 'none' as const }, healing, now],
      [{ ...built, status: 'building' as const }, healing, now],
      [{ ...built, status: 'behind' as const }, healing, now],
      // A gap not healed since the build began: the epoch is past its start.
      [built, { ...healing, epoch: built.startedAt + 1 }, now],
      // Not the whole program followed, no heal said (a refused probe alone: the socket is open
      // and nothing heals), a time ahead of the clock, no status.
      [built, { ...healing, mode: 'parents' as const }, now],
      [built, { ...healing, mode: 'off' as const }, now],
      [built, { epoch: healing.epoch, healthyUntil: 0, mode: 'program' as const }, now],
      [
        built,
        { epoch: healing.epoch, healthyUntil: 0, mode: 'program' as const, vouchedAt: vouched },
        now,
      ],
      [built, { ...healing, healingSince: now + 1 }, now],
      [built, { ...healing, vouchedAt: now + 1 }, now],
      [built, null, now],
    ] as const) {
      expect(dated(state, status, at)).toBeUndefined();
    }
  });

  it("dates the registry index's answer by the last vouch when its hash was read, though the heal ends before the read does", async () => {
    const now = 10_000_000;
    const vouched = now - 5_000;
    const epoch = now - 200_000;
    const healing: FollowStatus = {
      epoch,
      healthyUntil: 0,
      mode: 'program',
      healingSince: now - 2_000,
      vouchedAt: vouched,
    };
    const healed: FollowStatus = { epoch, healthyUntil: now + 3_000, mode: 'program' };
    const waiting: FollowStatus = { ...healed, deletesSince: vouched };
    const index = new RegistryIndex(redis, prefix);
    for (const [during, after] of [
      [healing, healed],
      [waiting, healed],
      [healed, healing],
    ] as const) {
      let status = during;
      const source = new RegistrySource({
        // The API's status read lands while the hash is read (one connection, replies in order,
        // another request's read sent after it): the hash was read under the first status.
        index: {
          state: () => index.state(),
          listed: (parentKey) => {
            const read = index.listed(parentKey);
            status = after;
            return read;
          },
        },
        status: () => status,
        window: new SubdomainCache(redis, prefix, 60_000, 3_600_000),
        now: () => now,
      });
      const { entry } = await source.read('alpha');
      // What the hash held is current only up to the last vouch or the waiting Delete's report.
      expect(entry.fetchedAt).toBe(vouched);
    }
  });
});

describe('ParentTouches', () => {
  it('touches a parent at most once a minute per process, and again once forgotten or failed', async () => {
    const calls: Array<[string, string, number]> = [];
    let fail = false;
    const cache = {
      touch: async (endpointId: string, parent: string, now: number) => {
        calls.push([endpointId, parent, now]);
        if (fail) throw new Error('redis down');
        return true;
      },
    } as unknown as SubdomainCache;
    const errors: string[] = [];
    const touches = new ParentTouches({
      cache,
      onError: (_err, parent) => errors.push(parent),
      max: 2,
    });
    for (let i = 0; i < 5; i++) touches.used('e', 'a', 1_000 + i);
    expect(calls).toEqual([['e', 'a', 1_000]]);
    touches.used('e', 'b', 2_000);
    touches.used('other', 'a', 2_000);
    expect(calls).toHaveLength(3);
    // Bounded memory: 'a' of 'e' was the oldest of three, forgotten, so touched again (early).
    touches.used('e', 'a', 3_000);
    expect(calls).toHaveLength(4);
    fail = true;
    touches.used('e', 'c', 4_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual(['c']);
    fail = false;
    touches.used('e', 'c', 4_001);
    expect(calls.at(-1)).toEqual(['e', 'c', 4_001]);
  });
});
