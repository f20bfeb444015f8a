import { Redlock, type Lock } from '@sesamecare-oss/redlock';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { EntryAccounts, SubdomainCache } from '../../src/cache/subdomain-cache.js';
import type { Metrics } from '../../src/metrics/metrics.js';
import { publishRefreshEvent } from '../../src/queue/refresh-events.js';
import { addRefreshJob, type RefreshJobData } from '../../src/queue/refresh-queue.js';
import type { RedisClient } from '../../src/redis.js';
import { redisKeys } from '../../src/redis-keys.js';
import type { CostTable } from '../../src/rpc/client.js';
import type { RpcEndpoint } from '../../src/rpc/endpoint.js';
import { classifyChange, type Change } from '../../src/sns/change.js';
import { DecodeThread } from '../../src/sns/discovery-runner.js';
import type { DiscoveryLane } from '../../src/sns/subdomain-discovery.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../src/sns/pda.js';
import { topHotParents } from '../../src/subdomains/hot-parents.js';
import { hotParentScanIntervalMs } from '../hot-parent-scan.js';
import { ProgramSubscriber, type AccountNotification } from './program-subscriber.js';

const MULTIPLE_ACCOUNTS_BATCH = 100;
/**
 * How long a reverse record's notification waits for its subdomain name account's (they are
 * written in one transaction, so both come within a slot or two), before the parent is re-read.
 */
const PAIRING_MS = 1_500;
/** Tries of an optimistic patch that lost the race to another write, before a re-read. */
const PATCH_TRIES = 5;

export type ParentWatcherDeps = {
  redis: RedisClient;
  cache: SubdomainCache;
  queue: Queue<RefreshJobData>;
  /** The configured endpoint's lane: existence checks run through its client and thread. */
  lane: DiscoveryLane;
  endpoint: RpcEndpoint;
  metrics: Metrics;
  logger: Logger;
  prefix: string;
  /** `CACHE_FRESH_SECONDS` in milliseconds. */
  freshMs: number;
  /** How many of the most requested parents are watched (`HOT_KEYS_TOP_N`). */
  topN: number;
  /** `WATCH_LEASE_MS`. */
  leaseMs: number;
  costs: CostTable;
  /** `RPC_WS_URL`. */
  wsUrl: string;
  /** `RPC_WS_PING_MS`. */
  pingMs: number;
};

type Watched = {
  parentKey: Buffer;
  /** When the subscription was last confirmed; undefined while there is none (a gap). */
  subscribedAt?: number;
  /** Notifications of one parent are applied one after another. */
  chain: Promise<void>;
  /** Reverse records notified before their subdomain name account: account -> label, slot. */
  pendingReverses: Map<string, { label: string; slot: number; timer: NodeJS.Timeout }>;
  /** Subdomain name accounts notified without a reverse record yet: account -> slot. */
  seen: Map<string, number>;
};

/**
 * Keeps the hot parents' entries following the chain instead of the clock (docs/design.md,
 * "Freshness"):
 *
 * - **Leases.** Each of the `topN` most requested parents is watched by one worker: the one that
 *   holds its lease in Redis (redlock, renewed every third of `WATCH_LEASE_MS`). A worker that
 *   dies stops renewing, and another takes the parent over once the lease lapses.
 * - **Additions.** A `programSubscribe` per watched parent. A notification that proves a new
 *   subdomain (its reverse record, derived from the label, and its name account) is patched into
 *   the entry; anything else queues a re-read at the notification's slot (`minContextSlot`).
 * - **Deletions.** The name program's delete sends no notification: about once per freshness
 *   window every watched parent's subdomain and reverse-record accounts are checked with
 *   `getMultipleAccounts` (`dataSlice` of length 0, batched across parents), the labels whose
 *   accounts are gone are dropped, and the entry is fresh again; a parent whose check would cost
 *   more than a scan is scanned instead.
 * - **Gaps.** Until a parent's subscription is confirmed and a read made after that is stored, its
 *   entry is left to the clock (hot-parent refreshes), and after every reconnect it is read again.
 */
export class ParentWatcher {
  private readonly subscriber: ProgramSubscriber;
  private readonly redlock: Redlock;
  private readonly leases = new Map<string, Lock>();
  private readonly watched = new Map<string, Watched>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private checking: Promise<void> | undefined;
  private closed = false;
  /** How often deletion checks run: as often as the hot-parent scans. */
  private readonly checkMs: number;

  constructor(private readonly deps: ParentWatcherDeps) {
    this.checkMs = hotParentScanIntervalMs(deps.freshMs);
    this.redlock = new Redlock([deps.redis], { retryCount: 0 });
    // Redlock reports failed extensions of `using` as events; a missing listener would throw.
    this.redlock.on('error', () => undefined);
    this.subscriber = new ProgramSubscriber({
      url: deps.wsUrl,
      metrics: deps.metrics,
      logger: deps.logger,
      costs: deps.costs,
      pingMs: deps.pingMs,
      onNotification: (note) => this.notified(note),
      onSubscribed: (parent) => this.subscribed(parent),
      onDisconnected: () => this.disconnected(),
    });
  }

  /** Whether the websocket is open. */
  get connected(): boolean {
    return this.subscriber.connected;
  }

  /** Parents this worker watches now. */
  get parents(): string[] {
    return [...this.watched.keys()];
  }

  /** Opens the websocket and starts taking leases and checking deletions. */
  start(): void {
    this.subscriber.start();
    const tick = () => {
      this.ticking ??= this.renewLeases()
        .catch((err: unknown) => this.deps.logger.warn({ err: String(err) }, 'watch leases'))
        .finally(() => (this.ticking = undefined));
    };
    const check = () => {
      this.checking ??= this.checkDeletions()
        .catch((err: unknown) => this.deps.logger.warn({ err: String(err) }, 'deletion check'))
        .finally(() => (this.checking = undefined));
    };
    tick();
    this.leaseTimer = setInterval(tick, Math.max(100, Math.floor(this.deps.leaseMs / 3)));
    this.checkTimer = setInterval(check, this.checkMs);
  }

  /** Stops, closes the websocket and releases every lease, so another worker takes over at once. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.leaseTimer);
    clearInterval(this.checkTimer);
    await Promise.allSettled([this.ticking, this.checking]);
    await Promise.allSettled([this.releaseAll(), this.subscriber.close()]);
  }

  /**
   * Renews the leases held, lets go of parents no longer hot, and takes the free hot ones. Only
   * while the websocket is open: a worker that cannot follow the chain holds no parent, so another
   * worker can, and the hot-parent scans refresh the rest by the clock.
   */
  private async renewLeases(): Promise<void> {
    const { deps } = this;
    if (!this.subscriber.connected) {
      await this.releaseAll();
      return;
    }
    const hot = new Set(await topHotParents(deps.redis, deps.prefix, deps.freshMs, deps.topN));
    await Promise.all(
      [...this.leases].map(async ([parent, lock]) => {
        if (!hot.has(parent)) {
          this.drop(parent);
          await lock.release().catch(() => undefined);
          return;
        }
        try {
          this.leases.set(parent, await lock.extend(deps.leaseMs));
        } catch {
          // Lapsed (a stall longer than the lease): another worker may hold it now.
          this.drop(parent);
        }
      }),
    );
    const keys = redisKeys(deps.prefix);
    await Promise.all(
      [...hot]
        .filter((parent) => !this.leases.has(parent))
        .map(async (parent) => {
          try {
            const lock = await this.redlock.acquire([keys.watchLease(parent)], deps.leaseMs);
            if (this.closed || !this.subscriber.connected) {
              await lock.release().catch(() => undefined);
              return;
            }
            this.leases.set(parent, lock);
            this.watch(parent);
          } catch {
            // Held by another worker.
          }
        }),
    );
    deps.metrics.watchedParents.set(this.leases.size);
  }

  /** Lets go of every parent and its lease. */
  private async releaseAll(): Promise<void> {
    const locks = [...this.leases.values()];
    for (const parent of [...this.leases.keys()]) this.drop(parent);
    this.deps.metrics.watchedParents.set(0);
    await Promise.allSettled(locks.map((lock) => lock.release()));
  }

  private watch(parent: string): void {
    this.watched.set(parent, {
      parentKey: domainKey(parent),
      chain: Promise.resolve(),
      pendingReverses: new Map(),
      seen: new Map(),
    });
    this.subscriber.watch(parent);
  }

  private drop(parent: string): void {
    this.leases.delete(parent);
    this.forget(parent);
  }

  private forget(parent: string): void {
    const state = this.watched.get(parent);
    if (!state) return;
    for (const pending of state.pendingReverses.values()) clearTimeout(pending.timer);
    this.watched.delete(parent);
    this.subscriber.unwatch(parent);
  }

  /** A subscription is (again) confirmed: what changed before it is unknown, so read again. */
  private subscribed(parent: string): void {
    const state = this.watched.get(parent);
    if (!state) return;
    state.subscribedAt = Date.now();
    void this.reread(parent);
  }

  /** Every subscription is gone: give the parents back, to a worker that can follow them. */
  private disconnected(): void {
    void this.releaseAll();
  }

  private notified(note: AccountNotification): void {
    const state = this.watched.get(note.parent);
    if (!state || state.subscribedAt === undefined) return;
    const change = classifyChange(note.pubkey, note.slice, state.parentKey);
    state.chain = state.chain
      .then(() => this.apply(note, state, change))
      .catch((err: unknown) => {
        this.deps.logger.warn({ err: String(err), parent: note.parent }, 'notification');
      });
  }

  private async apply(note: AccountNotification, state: Watched, change: Change): Promise<void> {
    const { metrics } = this.deps;
    const count = (outcome: 'patched' | 'reread' | 'ignored') =>
      metrics.wsNotifications.inc({ outcome });
    const { parent, slot } = note;
    switch (change.kind) {
      case 'empty':
        return count('ignored');
      case 'unproven':
        count('reread');
        return this.reread(parent, slot);
      case 'subdomain': {
        const pending = state.pendingReverses.get(change.subdomain);
        if (!pending) {
          state.seen.set(change.subdomain, slot);
          return count('ignored');
        }
        clearTimeout(pending.timer);
        state.pendingReverses.delete(change.subdomain);
        count('patched');
        return this.add(parent, change.subdomain, pending.label, Math.max(slot, pending.slot));
      }
      case 'reverse': {
        const seenAt = state.seen.get(change.subdomain);
        if (seenAt !== undefined) {
          state.seen.delete(change.subdomain);
          count('patched');
          return this.add(parent, change.subdomain, change.label, Math.max(slot, seenAt));
        }
        // A reverse record of a subdomain already listed (its name account is not new), or one
        // whose name account is still to come.
        const read = await this.deps.cache.getWithAccounts(this.deps.endpoint.id, parent);
        if (read?.accounts?.[change.subdomain] !== undefined) {
          count('patched');
          return this.add(parent, change.subdomain, change.label, slot);
        }
        const timer = setTimeout(() => {
          if (state.pendingReverses.get(change.subdomain)?.timer !== timer) return;
          state.pendingReverses.delete(change.subdomain);
          count('reread');
          void this.reread(parent, slot);
        }, PAIRING_MS);
        timer.unref();
        state.pendingReverses.set(change.subdomain, { label: change.label, slot, timer });
        return;
      }
    }
  }

  /**
   * Patches `label` (of the subdomain name account `subdomain`) into the parent's entry, raising its
   * slot to `slot`: read, change, compare-and-set on the revision read, again when another write
   * came in between. An entry that is not cached stays so (the next request reads the chain).
   */
  private async add(parent: string, subdomain: string, label: string, slot: number) {
    const { cache, endpoint } = this.deps;
    for (let i = 0; i < PATCH_TRIES; i++) {
      const read = await cache.getWithAccounts(endpoint.id, parent);
      if (!read) return;
      if (!read.accounts) return this.reread(parent, slot);
      if (read.accounts[subdomain] === label && (read.entry.slot ?? 0) >= slot) return;
      const accounts: EntryAccounts = { ...read.accounts, [subdomain]: label };
      const outcome = await cache.patch(
        endpoint.id,
        parent,
        read.entry.rev ?? 0,
        {
          labels: Object.values(accounts).sort(),
          fetchedAt: read.entry.fetchedAt,
          slot: Math.max(read.entry.slot ?? 0, slot),
        },
        accounts,
      );
      if (outcome === 'missing') return;
      if (outcome === 'written') return this.announce(parent);
    }
    return this.reread(parent, slot);
  }

  /**
   * One round of deletion checks: every watched parent read since its subscription whose entry
   * would go stale within one and a half rounds gets its accounts checked, all parents' keys batched
   * 100 to a call, and is fresh again (the subscription covers additions).
   */
  private async checkDeletions(): Promise<void> {
    const { deps } = this;
    const { cache, endpoint, metrics } = deps;
    const startedAt = Date.now();
    const gmaCost = deps.costs['getMultipleAccounts'] ?? deps.costs['*'] ?? 1;
    const scanCost = deps.costs['getProgramAccounts'] ?? deps.costs['*'] ?? 1;
    type Due = {
      parent: string;
      rev: number;
      slot: number;
      accounts: EntryAccounts;
      keys: Array<[subdomain: string, reverse: string]>;
    };
    const due: Due[] = [];
    for (const [parent, state] of this.watched) {
      if (state.subscribedAt === undefined) continue;
      const read = await cache.getWithAccounts(endpoint.id, parent);
      if (!read || read.entry.fetchedAt < state.subscribedAt) {
        // Not yet read since the subscription: until it is, the clock keeps it fresh.
        void this.reread(parent);
        continue;
      }
      // Checked when it would go stale within one and a half rounds (a round late is still in
      // time): about once per window. Leased, it is left alone by the hot-parent scans.
      if (startedAt - read.entry.fetchedAt < deps.freshMs - 1.5 * this.checkMs) continue;
      if (!read.accounts) {
        void this.reread(parent);
        continue;
      }
      const subdomains = Object.keys(read.accounts);
      if (Math.ceil((2 * subdomains.length) / MULTIPLE_ACCOUNTS_BATCH) * gmaCost > scanCost) {
        metrics.deletionChecks.inc({ outcome: 'scanned' });
        void this.reread(parent);
        continue;
      }
      due.push({
        parent,
        rev: read.entry.rev ?? 0,
        slot: read.entry.slot ?? 0,
        accounts: read.accounts,
        keys: subdomains.map((s) => [s, toBase58(reverseKeyFromDomainKey(s, state.parentKey))]),
      });
    }
    if (due.length === 0) return;
    const keys = due.flatMap((d) => d.keys.flat());
    const { exists, slot } = await this.existence(keys);
    for (const d of due) {
      const accounts: Record<string, string> = {};
      for (const [subdomain, reverse] of d.keys) {
        if (exists.get(subdomain) && exists.get(reverse)) {
          accounts[subdomain] = d.accounts[subdomain] as string;
        }
      }
      const dropped = Object.keys(accounts).length < d.keys.length;
      const outcome = await cache.patch(
        endpoint.id,
        d.parent,
        d.rev,
        {
          labels: Object.values(accounts).sort(),
          fetchedAt: startedAt,
          slot: Math.max(d.slot, slot ?? 0),
        },
        accounts,
      );
      // A conflict (a patch or a refresh came in between) is checked at the next round.
      if (outcome !== 'written') continue;
      metrics.deletionChecks.inc({ outcome: dropped ? 'dropped' : 'unchanged' });
      if (dropped) await this.announce(d.parent);
    }
  }

  /**
   * Which of `keys` still have an account, by `getMultipleAccounts` with a `dataSlice` of length 0
   * (no data, 1 call per 100 keys), and the lowest slot the calls read at.
   *
   * @throws RpcCallError when a call fails: the round touches nothing then.
   */
  private async existence(
    keys: string[],
  ): Promise<{ exists: Map<string, boolean>; slot: number | undefined }> {
    const { lane, endpoint } = this.deps;
    const exists = new Map<string, boolean>();
    let slot: number | undefined;
    for (let start = 0; start < keys.length; start += MULTIPLE_ACCOUNTS_BATCH) {
      const batch = keys.slice(start, start + MULTIPLE_ACCOUNTS_BATCH);
      const found = await lane.rpc.call(
        endpoint,
        'getMultipleAccounts',
        [
          batch,
          { encoding: 'base64', commitment: 'confirmed', dataSlice: { offset: 0, length: 0 } },
        ],
        {
          decode: (body, { method, id }) =>
            lane.thread.run({
              kind: 'existence',
              method,
              id,
              body: DecodeThread.transferable(body),
              count: batch.length,
            }),
        },
      );
      batch.forEach((key, i) => exists.set(key, found.exists[i] === true));
      if (found.slot !== undefined) slot = Math.min(slot ?? found.slot, found.slot);
    }
    return { exists, slot };
  }

  /** Queues a re-read of `parent`, at `minContextSlot` or later when a notification caused it. */
  private async reread(parent: string, minContextSlot?: number): Promise<void> {
    const { cache, endpoint, queue, logger } = this.deps;
    await addRefreshJob(
      queue,
      {
        cacheKey: cache.key(endpoint.id, parent),
        parent,
        endpoint: { kind: 'default' },
        ...(minContextSlot === undefined ? {} : { minContextSlot }),
      },
      'change',
    ).catch((err: unknown) =>
      logger.warn({ err: String(err), parent }, 'could not queue a re-read'),
    );
  }

  /** Tells every API process the entry changed (their in-process copies drop it). */
  private async announce(parent: string): Promise<void> {
    await publishRefreshEvent(this.deps.redis, this.deps.prefix, {
      endpointId: this.deps.endpoint.id,
      parent,
      ok: true,
    });
  }
}
