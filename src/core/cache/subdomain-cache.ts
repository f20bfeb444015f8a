import type { RedisClient } from '../redis.js';
import { redisKeys, type RedisKeys } from '../redis-keys.js';
import type { RpcEndpoint } from '../rpc/endpoint.js';
import type { CacheEntry, EntryAccounts, Freshness } from './entry.js';
import { getEarlyAnswer, putEarlyAnswer, type EarlyAnswer } from './early-answers.js';
import { followedFresh, type FollowStatus } from './follow-status.js';
import { MemberIndex, type MemberParent } from './member-index.js';
import { OverrideEntries, type OverrideBudget } from './override-entries.js';
import {
  SplitEntries,
  type ApplyOutcome,
  type ScanWrite,
  type CheckOutcome,
  type FollowedParent,
  type MemberChange,
  type StoredMember,
} from './split-entries.js';

export type { CacheEntry, EntryAccounts, Freshness, Member } from './entry.js';
export type { EarlyAnswer } from './early-answers.js';
export { labelsOf } from './entry.js';
export type { MemberParent } from './member-index.js';
export type { OverrideBudget } from './override-entries.js';
export type {
  ApplyOutcome,
  ApplyVerdict,
  CheckOutcome,
  FollowedParent,
  MemberChange,
  StoredMember,
} from './split-entries.js';
export { SWEEP_GRACE_MS } from './split-entries.js';
export type { ScannedMember, ScanWrite } from './split-entries.js';

/**
 * The Redis cache of subdomain lists (docs/design.md, "The subdomain cache"), one door to its
 * three stores: the configured endpoint's split entries ({@link SplitEntries}), the `?rpc=`
 * overrides' entries ({@link OverrideEntries}) and the member-parents index ({@link MemberIndex}).
 * It names keys by endpoint kind and decides freshness; each method below is the store's of the
 * same name. Entries live `CACHE_STALE_SECONDS` from their last use in Redis. No write takes an
 * entry back to an older slot.
 */
export class SubdomainCache {
  private readonly keys: RedisKeys;
  readonly entries: SplitEntries;
  readonly overrideEntries: OverrideEntries;
  readonly memberIndex: MemberIndex;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly freshMs: number,
    staleMs: number,
    overrides: OverrideBudget = { ttlMs: staleMs, maxBytes: 32 * 1024 * 1024 },
    /**
     * The deployment's one clock, Unix ms (src/core/redis-time.ts): what freshness compares a
     * `fetchedAt` written by a worker with. `Date.now` when absent.
     */
    readonly now: () => number = Date.now,
  ) {
    this.keys = redisKeys(prefix);
    this.memberIndex = new MemberIndex(redis, this.keys);
    this.entries = new SplitEntries(redis, this.keys, staleMs);
    this.overrideEntries = new OverrideEntries(redis, this.keys, overrides);
  }

  /** Expiry of a configured endpoint's keys after a write or a use, in milliseconds. */
  get entryTtlMs(): number {
    return this.entries.entryTtlMs;
  }

  /**
   * The key of the configured endpoint's entry of `parent` (its head):
   * `<prefix>:entry:<endpoint id>:<parent>`. What {@link get} reads and refresh jobs deduplicate on.
   */
  key(endpointId: string, parent: string): string {
    return this.entries.key(endpointId, parent);
  }

  /** The key of a `?rpc=` override's entry: `<prefix>:subdomains:<endpoint id>:<parent>`. */
  overrideKey(endpointId: string, parent: string): string {
    return this.overrideEntries.key(endpointId, parent);
  }

  /** {@link key} or {@link overrideKey}, by the endpoint's kind. */
  keyOf(endpoint: RpcEndpoint, parent: string): string {
    return endpoint.kind === 'override'
      ? this.overrideKey(endpoint.id, parent)
      : this.key(endpoint.id, parent);
  }

  /**
   * The entry at `key` ({@link key} or {@link overrideKey}), labels in answer order.
   * @returns null when absent or unreadable (treated as a miss).
   */
  async get(key: string): Promise<CacheEntry | null> {
    const split = this.keys.entryOfMeta(key);
    return split ? this.entries.get(split.endpointId, split.parent) : this.overrideEntries.get(key);
  }

  /** {@link SplitEntries.head}. */
  head(endpointId: string, parent: string): Promise<Omit<CacheEntry, 'labels'> | null> {
    return this.entries.head(endpointId, parent);
  }

  /** {@link SplitEntries.getWithAccounts}. */
  getWithAccounts(
    endpointId: string,
    parent: string,
  ): Promise<{ entry: CacheEntry; accounts: EntryAccounts | null } | null> {
    return this.entries.getWithAccounts(endpointId, parent);
  }

  /** {@link SplitEntries.rowsOf}. */
  rowsOf(
    endpointId: string,
    parent: string,
    labels: readonly string[],
  ): ReturnType<SplitEntries['rowsOf']> {
    return this.entries.rowsOf(endpointId, parent, labels);
  }

  /** {@link SplitEntries.membersRun}. */
  membersRun(
    endpointId: string,
    parent: string,
    start: number,
    count: number,
  ): ReturnType<SplitEntries['membersRun']> {
    return this.entries.membersRun(endpointId, parent, start, count);
  }

  /** {@link SplitEntries.member}. */
  member(endpointId: string, parent: string, account: string): Promise<StoredMember | null> {
    return this.entries.member(endpointId, parent, account);
  }

  /** {@link MemberIndex.parentOf}. */
  parentOfMember(endpointId: string, account: string): Promise<MemberParent | null> {
    return this.memberIndex.parentOf(endpointId, account);
  }

  /** {@link MemberIndex.parentsOf}. */
  parentsOfMembers(
    endpointId: string,
    accounts: readonly string[],
  ): Promise<Array<MemberParent | null>> {
    return this.memberIndex.parentsOf(endpointId, accounts);
  }

  /** {@link SplitEntries.followedParents}. */
  followedParents(endpointId: string): Promise<FollowedParent[]> {
    return this.entries.followedParents(endpointId);
  }

  /** {@link SplitEntries.put}. */
  put(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    accounts: EntryAccounts,
    reverses: ReadonlyMap<string, string>,
    ceiling?: number,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    return this.entries.put(endpointId, parent, entry, accounts, reverses, ceiling, now);
  }

  /** {@link SplitEntries.scanWrite}. */
  scanWrite(endpointId: string, parent: string, memberSlot: number): ScanWrite {
    return this.entries.scanWrite(endpointId, parent, memberSlot);
  }

  /** {@link SplitEntries.applyChanges}. */
  applyChanges(
    endpointId: string,
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
    ceiling?: number,
  ): Promise<ApplyOutcome> {
    return this.entries.applyChanges(endpointId, parent, changes, slot, ceiling);
  }

  /** {@link SplitEntries.markChecked}. */
  markChecked(
    endpointId: string,
    parent: string,
    check: { fetchedAt: number; epoch: number; slot?: number; gone: readonly string[] },
  ): Promise<CheckOutcome> {
    return this.entries.markChecked(endpointId, parent, check);
  }

  /** {@link SplitEntries.markOwed}. */
  markOwed(endpointId: string, parent: string, slot: number): Promise<'written' | 'missing'> {
    return this.entries.markOwed(endpointId, parent, slot);
  }

  /** {@link SplitEntries.touch}. */
  touch(endpointId: string, parent: string, now = Date.now()): Promise<boolean> {
    return this.entries.touch(endpointId, parent, now);
  }

  /** {@link SplitEntries.sweep}. */
  sweep(endpointId: string, now = Date.now()): Promise<{ removed: number; more: boolean }> {
    return this.entries.sweep(endpointId, now);
  }

  /** {@link MemberIndex.sweep}. */
  sweepIndex(endpointId: string, count = 1_000): Promise<{ dropped: number; done: boolean }> {
    return this.memberIndex.sweep(endpointId, count);
  }

  /** {@link OverrideEntries.put}. */
  putOverride(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    return this.overrideEntries.put(endpointId, parent, entry, now);
  }

  /** ./early-answers.ts `putEarlyAnswer`: a large scan's answer, before its write. */
  putEarlyAnswer(endpointId: string, parent: string, answer: EarlyAnswer): Promise<void> {
    return putEarlyAnswer(this.redis, this.keys, endpointId, parent, answer);
  }

  /** ./early-answers.ts `getEarlyAnswer`: the early answer of (endpoint, parent), or null. */
  earlyAnswer(endpointId: string, parent: string): Promise<EarlyAnswer | null> {
    return getEarlyAnswer(this.redis, this.keys, endpointId, parent);
  }

  /**
   * Fresh or stale (docs/design.md, "Freshness"): fresh within `CACHE_FRESH_SECONDS` of
   * `fetchedAt`, or while the chain is followed and nothing was missed since the entry was fetched
   * ({@link followedFresh}; pass `status` for the configured endpoint's entries only).
   */
  freshness(entry: CacheEntry, now = this.now(), status?: FollowStatus | null): Freshness {
    return this.freshMsLeft(entry, now, status) > 0 ? 'fresh' : 'stale';
  }

  /**
   * Milliseconds of freshness left (0 once stale): the window's, or while the entry is fresh by
   * following the chain, until the status's `healthyUntil` if that is later.
   */
  freshMsLeft(entry: CacheEntry, now = this.now(), status?: FollowStatus | null): number {
    const windowLeft = Math.max(0, entry.fetchedAt + this.freshMs - now);
    if (!status || !followedFresh(entry, status, now)) return windowLeft;
    return Math.max(windowLeft, status.healthyUntil - now);
  }
}
