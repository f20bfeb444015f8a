import type { SubdomainCache } from '../../src/core/cache/subdomain-cache.js';
import type { RedisClient } from '../../src/core/redis.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { redisKeys } from '../../src/core/redis-keys.js';
import type { FollowStore, Reread } from './types.js';

/**
 * The follower's store over the subdomain cache's split layout of the configured endpoint
 * (docs/design.md, "The subdomain cache"): every write is one of its Lua scripts, each member
 * change slot-guarded there, against an entry whose slots `slots` believes. A change that meets
 * an entry holding a slot past the ceiling ('unsound') is turned here into a re-read of its
 * parent by `reread`, at the change's slot: the one place that does, so no caller can forget it.
 */
export function cacheStore(
  cache: SubdomainCache,
  redis: RedisClient,
  prefix: string,
  endpointId: string,
  slots: Pick<SlotClock, 'ceiling'>,
  reread: Reread,
): FollowStore {
  const registry = redisKeys(prefix).followedParents(endpointId);
  return {
    async applyChanges(parent, changes, slot) {
      const { outcome } = await cache.applyChanges(
        endpointId,
        parent,
        changes,
        slot,
        slots.ceiling(),
      );
      // Judged against a slot no chain has reached, the change would be dropped as older: only a
      // scan (which such an entry does not hold back) corrects the entry.
      if (outcome === 'unsound') reread(parent, slot);
      return outcome;
    },
    async member(parent, account) {
      return (await cache.member(endpointId, parent, account)) ?? undefined;
    },
    async members(parent) {
      const read = await cache.getWithAccounts(endpointId, parent);
      return read?.accounts ? new Map(Object.entries(read.accounts)) : undefined;
    },
    async parentOfMember(account) {
      return (await cache.parentOfMember(endpointId, account)) ?? undefined;
    },
    async parentsOfMembers(accounts) {
      const found = await cache.parentsOfMembers(endpointId, accounts);
      return found.map((f) => f ?? undefined);
    },
    async followedParents(sinceMs) {
      // One range read: the registry's scores are the parents' last use (Unix ms).
      return sinceMs === undefined
        ? redis.zrange(registry, 0, -1)
        : redis.zrangebyscore(registry, Math.max(0, Math.floor(sinceMs)), '+inf');
    },
    async markOwed(parent, slot) {
      return (await cache.markOwed(endpointId, parent, slot)) === 'written';
    },
    async markChecked(parent, checkedAt, slot, gone, epoch) {
      const { dropped } = await cache.markChecked(endpointId, parent, {
        fetchedAt: checkedAt,
        epoch,
        slot,
        gone,
      });
      return dropped;
    },
  };
}
