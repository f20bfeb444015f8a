import { Redlock, type Lock } from '@sesamecare-oss/redlock';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { occasionalWarning } from '../../core/logger.js';
import {
  type CacheEntry,
  type EntryAccounts,
  type SubdomainCache,
} from '../../core/cache/subdomain-cache.js';
import {
  DELETION_CHECK_OUTCOME,
  WS_NOTIFICATION_OUTCOME,
  type Metrics,
  type WsNotificationOutcome,
} from '../../core/metrics.js';
import { publishRefreshEvent } from '../../core/queue/refresh-events.js';
import { addRefreshJob, type RefreshJobData } from '../../core/queue/refresh-queue.js';
import { databaseOf, type RedisClient } from '../../core/redis.js';
import { redisKeys } from '../../core/redis-keys.js';
import { costOf, type CostTable } from '../rpc/client.js';
import type { CreditMeter } from '../rpc/credits.js';
import type { CreditBudget } from '../../core/rpc/budget.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { SlotClock } from '../../core/rpc/slot.js';
import { classifyChange, type Change } from '../sns/change.js';
import { DecodeThread } from '../sns/decode-thread.js';
import {
  accountsInBatches,
  MULTIPLE_ACCOUNTS_BATCH,
  type DiscoveryLane,
} from '../sns/subdomain-discovery.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../core/sns/pda.js';
import { topHotParents } from '../../core/cache/hot-parents.js';
import { hotParentScanIntervalMs } from '../hot-parent-scan.js';
import { ProgramSubscriber, type AccountNotification } from './program-subscriber.js';

/**
 * How long a reverse record's notification waits for its subdomain name account's (they are
 * written in one transaction, so both come within a slot or two), before the parent is re-read.
 */
const PAIRING_MS = 1_500;
/**
 * Watched parents are scanned in full once per this many windows whatever happens: providers drop
 * notifications under load, and a missed one would otherwise stay missed while the parent is
 * hot. At 10 credits a scan this is half a credit per parent per window.
 */
const RESCAN_WINDOWS = 20;
/**
 * A parent that stops being among the `topN` hottest is let go only once it falls below this
 * many times `topN`: at the edge of the ranking, counts that tie or a window that rolls over
 * would otherwise drop and take it again every tick, a scan each time.
 */
const KEEP_RANK_FACTOR = 1.25;
/**
 * How long after a subscription is confirmed the read that covers the gap begins. HTTP reads may
 * reach a node behind the websocket's (providers balance them apart); a scan begun at once could
 * answer from before a change made just before the subscription, which no notification will
 * bring. Nodes behind the load balancer lag by a second or two.
 */
const GAP_READ_DELAY_MS = 2_000;
/**
 * Accounts with a notification waiting to be applied, per watched parent: a newer notification of
 * an account replaces its waiting one (only the newest state matters), and past this bound the
 * parent's waiting notifications are dropped for one re-read at the newest of their slots, which
 * covers them all. The same bound holds the subdomains and reverse records waiting for their other
 * half. A burst this large is cheaper to scan than to patch, and a flood cannot grow the heap.
 */
export const MAX_PENDING_PER_PARENT = 256;
/** {@link MAX_PENDING_PER_PARENT} over every watched parent together. */
export const MAX_PENDING = 10_000;

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
  /** Distinct clients a parent needs in a window to be watched (`HOT_KEYS_MIN_CLIENTS`). */
  minClients: number;
  /** `WATCH_LEASE_MS`. */
  leaseMs: number;
  costs: CostTable;
  /** Where the websocket's credits are counted (the daily budget's counter too). */
  credits?: CreditMeter;
  /**
   * The daily credit budget: past its soft threshold the checks and periodic re-reads that keep
   * entries fresh ahead stop; once exhausted, so do the re-reads of gaps (docs/design.md, "Budget").
   */
  budget?: CreditBudget;
  /** `RPC_WS_URL`. */
  wsUrl: string;
  /** `RPC_WS_PING_MS`. */
  pingMs: number;
  /**
   * The worker's slot clock (the refreshes of the configured endpoint observe it too): existence
   * checks' replies are observed, never an entry's stored slot; a notification's slot past its
   * ceiling is not believed, nor is an entry's.
   */
  slots: SlotClock;
};

type Watched = {
  parentKey: Buffer;
  /** When the subscription was last confirmed; undefined while there is none (a gap). */
  subscribedAt?: number;
  /** The read that covers the gap, {@link GAP_READ_DELAY_MS} after the subscription. */
  gapRead?: NodeJS.Timeout;
  /**
   * Notifications waiting to be applied, by account: the newest of each (at one slot, the last
   * received). One loop applies them one after another ({@link ParentWatcher.drain}).
   */
  pending: Map<string, AccountNotification>;
  /**
   * A re-read the loop owes the parent, at this slot or later (`slot` undefined: at whatever the
   * RPC has): for notifications dropped past {@link MAX_PENDING_PER_PARENT}, or that proved nothing.
   */
  owed?: { slot: number | undefined };
  /** The loop applying `pending`, while it runs. */
  draining?: Promise<void>;
  /** Reverse records notified before their subdomain name account: account -> label, slot. */
  pendingReverses: Map<string, { label: string; slot: number; timer: NodeJS.Timeout }>;
  /**
   * Subdomain name accounts notified but not listed, waiting {@link PAIRING_MS} for their reverse
   * record: account -> slot. Each expires with its timer.
   */
  seen: Map<string, { slot: number; owner: string; timer: NodeJS.Timeout }>;
  /**
   * The slot a full scan must reflect for the entry to hold every change notified so far: set by
   * a change only a scan can settle, cleared once the stored entry's `scanSlot` reaches it.
   */
  wantSlot?: number;
};

/**
 * Keeps the hot parents' entries following the chain instead of the clock (docs/design.md,
 * "Freshness"):
 *
 * - **Leases.** Each of the `topN` most requested parents (by distinct clients, among those at
 *   least `minClients` clients asked for) is watched by one worker: the one that holds its lease
 *   in Redis (redlock, renewed every third of `WATCH_LEASE_MS`). A worker that dies stops
 *   renewing, and another takes the parent over once the lease lapses.
 * - **Additions.** A `programSubscribe` per watched parent. A notification that proves a new
 *   subdomain (its reverse record, derived from the label, and its name account) is patched into
 *   the entry; anything else queues a re-read at the notification's slot (`minContextSlot`).
 * - **Deletions.** The name program's delete sends no notification: about once per freshness
 *   window every watched parent's subdomain and reverse-record accounts are checked with
 *   `getMultipleAccounts` (`dataSlice` of length 0, batched across parents), the labels whose
 *   accounts are gone are dropped, and the entry is fresh again; a parent whose check would cost
 *   more than a scan is scanned instead.
 * - **Gaps.** A parent is read again after every (re)subscription, until a scan begun after it is
 *   stored; a change only a scan settles is re-read at its slot until a scan that far is stored;
 *   and every {@link RESCAN_WINDOWS} windows each parent is scanned anyway (notifications can be
 *   lost). A parent whose subscription is refused is given back to the clock for a window.
 */
export class ParentWatcher {
  private readonly subscriber: ProgramSubscriber;
  private readonly redlock: Redlock;
  private readonly leases = new Map<string, Lock>();
  private readonly watched = new Map<string, Watched>();
  /** Parents whose subscription was refused, not taken again before this time. */
  private readonly refusedUntil = new Map<string, number>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private checking: Promise<void> | undefined;
  private closed = false;
  /** How often deletion checks run: as often as the hot-parent scans. */
  private readonly checkMs: number;
  /** Notifications waiting over every parent (see {@link MAX_PENDING}). */
  private pendingTotal = 0;
  private readonly warnFailed: ReturnType<typeof occasionalWarning>;
  private readonly warnAhead: ReturnType<typeof occasionalWarning>;

  constructor(private readonly deps: ParentWatcherDeps) {
    this.checkMs = hotParentScanIntervalMs(deps.freshMs);
    this.warnFailed = occasionalWarning(deps.logger);
    this.warnAhead = occasionalWarning(deps.logger);
    // Redlock's scripts SELECT its `db` setting (default 0) before touching the lease: give it
    // the connection's database, so leases stay in the deployment's own (docs/design.md, "Redis
    // isolation"). It takes 0 to 15 only; the configuration refuses any other database.
    this.redlock = new Redlock([deps.redis], { retryCount: 0, db: databaseOf(deps.redis) });
    // Redlock reports failed extensions of `using` as events; a missing listener would throw.
    this.redlock.on('error', () => undefined);
    this.subscriber = new ProgramSubscriber({
      url: deps.wsUrl,
      metrics: deps.metrics,
      logger: deps.logger,
      costs: deps.costs,
      credits: deps.credits,
      pingMs: deps.pingMs,
      onNotification: (note) => this.notified(note),
      onSubscribed: (parent) => this.subscribed(parent),
      onDisconnected: () => this.disconnected(),
      onRefused: (parent) => this.refused(parent),
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
    const ranked = await topHotParents(
      deps.redis,
      deps.prefix,
      deps.freshMs,
      Math.ceil(deps.topN * KEEP_RANK_FACTOR),
      deps.minClients,
    );
    const keep = new Set(ranked);
    const hot = new Set(ranked.slice(0, deps.topN));
    const now = Date.now();
    for (const [parent, until] of this.refusedUntil) {
      if (until <= now) this.refusedUntil.delete(parent);
      else hot.delete(parent);
    }
    await Promise.all(
      [...this.leases].map(async ([parent, lock]) => {
        if (!keep.has(parent)) {
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
      pending: new Map(),
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
    for (const seen of state.seen.values()) clearTimeout(seen.timer);
    clearTimeout(state.gapRead);
    this.pendingTotal -= state.pending.size;
    state.pending.clear();
    this.watched.delete(parent);
    this.subscriber.unwatch(parent);
  }

  /** A subscription is (again) confirmed: what changed before it is unknown, so read again. */
  private subscribed(parent: string): void {
    const state = this.watched.get(parent);
    if (!state) return;
    state.subscribedAt = Date.now();
    clearTimeout(state.gapRead);
    state.gapRead = setTimeout(() => void this.reread(parent), GAP_READ_DELAY_MS);
    state.gapRead.unref();
  }

  /**
   * The RPC refused the parent's subscription (a cap on subscriptions per socket, say): give the
   * lease back so the clock keeps the entry fresh, and leave the parent alone for a window.
   */
  private refused(parent: string): void {
    const lock = this.leases.get(parent);
    this.drop(parent);
    this.refusedUntil.set(parent, Date.now() + this.deps.freshMs);
    void lock?.release().catch(() => undefined);
    this.deps.metrics.watchedParents.set(this.leases.size);
  }

  /** Every subscription is gone: give the parents back, to a worker that can follow them. */
  private disconnected(): void {
    void this.releaseAll();
  }

  /**
   * Queues a notification for its parent's loop: it replaces a waiting one of the same account
   * (newest slot wins; at one slot, the last received), and past {@link MAX_PENDING_PER_PARENT}
   * or {@link MAX_PENDING} the parent's waiting ones are dropped for one re-read. Synchronous and
   * bounded: nothing piles up however fast notifications come.
   */
  private notified(note: AccountNotification): void {
    const state = this.watched.get(note.parent);
    if (!state || state.subscribedAt === undefined) return;
    const coalesced = (n: number) =>
      this.deps.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.coalesced }, n);
    const waiting = state.pending.get(note.pubkey);
    if (waiting) {
      coalesced(1);
      if (waiting.slot <= note.slot) state.pending.set(note.pubkey, note);
    } else if (state.pending.size >= MAX_PENDING_PER_PARENT || this.pendingTotal >= MAX_PENDING) {
      coalesced(state.pending.size + 1);
      this.owe(state, [...[...state.pending.values()].map((n) => n.slot), note.slot]);
      this.pendingTotal -= state.pending.size;
      state.pending.clear();
    } else {
      state.pending.set(note.pubkey, note);
      this.pendingTotal++;
    }
    this.drain(note.parent, state);
  }

  /**
   * Owes the parent one re-read, at the highest of `slots` believed (a slot past the clock's
   * ceiling counts as the newest the RPC has shown), raising one already owed.
   */
  private owe(state: Watched, slots: number[]): void {
    const { slots: clock } = this.deps;
    let slot = state.owed?.slot;
    for (const s of slots) {
      const at = clock.trusts(s) ? s : clock.newest;
      if (at !== undefined) slot = Math.max(slot ?? at, at);
    }
    state.owed = { slot };
  }

  /**
   * Runs the parent's loop unless it runs already: the owed re-read first, then the waiting
   * notifications one after another, oldest account first, until none is left.
   */
  private drain(parent: string, state: Watched): void {
    if (state.draining) return;
    const current = () => this.watched.get(parent) === state;
    state.draining = (async () => {
      while (current()) {
        if (state.owed) {
          const { slot } = state.owed;
          state.owed = undefined;
          await this.reread(parent, slot);
          continue;
        }
        const next = state.pending.values().next();
        if (next.done) return;
        const note = next.value;
        state.pending.delete(note.pubkey);
        this.pendingTotal--;
        try {
          await this.apply(note, state);
        } catch (err) {
          // The change is known only by this notification: a scan at its slot settles it.
          if (this.deps.slots.trusts(note.slot)) this.want(state, note.slot);
          this.warnFailed({ err: String(err), parent }, 'notification could not be applied');
        }
      }
    })()
      .catch((err: unknown) => this.warnFailed({ err: String(err), parent }, 'notification loop'))
      .finally(() => {
        state.draining = undefined;
        if (current() && (state.owed || state.pending.size > 0)) this.drain(parent, state);
      });
  }

  private async apply(note: AccountNotification, state: Watched): Promise<void> {
    const { cache, endpoint, metrics, slots } = this.deps;
    const count = (outcome: WsNotificationOutcome) => metrics.wsNotifications.inc({ outcome });
    const { parent, slot } = note;
    if (!slots.trusts(slot)) {
      // A slot no chain has reached yet would hold every later scan back: believe only that
      // something changed, and read again at what the RPC has shown.
      const ceiling = slots.ceiling();
      if (ceiling !== undefined) {
        this.warnAhead(
          { parent, slot, ceiling },
          'notification slot ahead of any the RPC has shown: re-read instead',
        );
      }
      count(WS_NOTIFICATION_OUTCOME.reread);
      return this.reread(parent, slots.newest);
    }
    const change: Change = note.slice
      ? classifyChange(note.pubkey, note.slice, state.parentKey)
      : { kind: 'unproven' };
    switch (change.kind) {
      case 'unproven':
      case 'empty':
        // A cut text, a record made by hand, or a text emptied (the SDK drops empty texts): only
        // a scan tells what the parent lists now.
        count(WS_NOTIFICATION_OUTCOME.reread);
        return this.reread(parent, slot);
      case 'subdomain': {
        const pending = state.pendingReverses.get(change.subdomain);
        const { subdomain, owner } = change;
        if (pending) {
          clearTimeout(pending.timer);
          state.pendingReverses.delete(subdomain);
          const label = pending.label;
          return count(
            await this.update(parent, subdomain, { label, owner }, Math.max(slot, pending.slot)),
          );
        }
        // A listed subdomain's own header changed: a transfer (a new owner), or nothing listed.
        if ((await cache.member(endpoint.id, parent, subdomain)) !== null) {
          return count(await this.update(parent, subdomain, { owner }, slot));
        }
        // A new name account: listed once its reverse record comes (usually in the same
        // transaction). If none comes, it may have one already (re-created under a record that
        // stayed) or none at all; only a scan tells.
        clearTimeout(state.seen.get(change.subdomain)?.timer);
        state.seen.delete(change.subdomain);
        this.boundPairs(parent, state, state.seen);
        const timer = setTimeout(() => {
          if (state.seen.get(change.subdomain)?.timer !== timer) return;
          state.seen.delete(change.subdomain);
          count(WS_NOTIFICATION_OUTCOME.reread);
          this.owe(state, [slot]);
          this.drain(parent, state);
        }, PAIRING_MS);
        timer.unref();
        state.seen.set(change.subdomain, { slot, owner, timer });
        return;
      }
      case 'reverse': {
        const seen = state.seen.get(change.subdomain);
        if (seen) {
          clearTimeout(seen.timer);
          state.seen.delete(change.subdomain);
          return count(
            await this.update(
              parent,
              change.subdomain,
              { label: change.label, owner: seen.owner },
              Math.max(slot, seen.slot),
            ),
          );
        }
        // A reverse record of a subdomain already listed (its name account is not new), or one
        // whose name account is still to come.
        if ((await cache.member(endpoint.id, parent, change.subdomain)) !== null) {
          return count(await this.update(parent, change.subdomain, { label: change.label }, slot));
        }
        clearTimeout(state.pendingReverses.get(change.subdomain)?.timer);
        state.pendingReverses.delete(change.subdomain);
        this.boundPairs(parent, state, state.pendingReverses);
        const timer = setTimeout(() => {
          if (state.pendingReverses.get(change.subdomain)?.timer !== timer) return;
          state.pendingReverses.delete(change.subdomain);
          count(WS_NOTIFICATION_OUTCOME.reread);
          this.owe(state, [slot]);
          this.drain(parent, state);
        }, PAIRING_MS);
        timer.unref();
        state.pendingReverses.set(change.subdomain, { label: change.label, slot, timer });
        return;
      }
    }
  }

  /**
   * Patches what a notification proved of the subdomain name account `subdomain` (its label, its
   * owner, or both) into the parent's entry, raising the entry's slot to `slot`: the stored member
   * fills in what the notification did not say, then `applyChanges` writes that one account (a
   * member written at a later slot meanwhile wins). An entry that is not cached stays so (the next
   * request reads the chain); one cached without its members is re-read.
   */
  private async update(
    parent: string,
    subdomain: string,
    change: { label?: string; owner?: string },
    slot: number,
  ): Promise<(typeof WS_NOTIFICATION_OUTCOME)['patched' | 'reread' | 'ignored']> {
    const { cache, endpoint } = this.deps;
    const state = this.watched.get(parent);
    const current = await cache.member(endpoint.id, parent, subdomain);
    const label = change.label ?? current?.label;
    const owner = change.owner ?? current?.owner;
    if (label !== undefined && owner !== undefined && state) {
      const reverse = toBase58(reverseKeyFromDomainKey(subdomain, state.parentKey));
      // One script touching this account only; a notification older than the member is ignored.
      const applied = await cache.applyChanges(
        endpoint.id,
        parent,
        [{ account: subdomain, reverse, member: [label, owner] }],
        slot,
      );
      if (applied.outcome === 'written') {
        await this.announce(parent);
        return WS_NOTIFICATION_OUTCOME.patched;
      }
      if (applied.outcome === 'unchanged') return WS_NOTIFICATION_OUTCOME.ignored;
      // Not cached: nothing to patch (the next request reads the chain). Cached without its
      // members: only a scan can tell.
      if (applied.rev === 0) return WS_NOTIFICATION_OUTCOME.ignored;
    }
    await this.reread(parent, slot);
    return WS_NOTIFICATION_OUTCOME.reread;
  }

  /**
   * One round over the watched parents. A parent whose entry lacks a scan it needs (one begun
   * after its subscription, one at the slot of a change only a scan settles, or the periodic one
   * every {@link RESCAN_WINDOWS} windows) gets a re-read. The others whose entry would go stale
   * within one and a half rounds get their accounts checked, all parents' keys batched 100 to a
   * call at the highest slot among them (`minContextSlot`: a lagging node must not drop a
   * subdomain a notification added), and are fresh again (the subscription covers additions).
   */
  private async checkDeletions(): Promise<void> {
    const { deps } = this;
    const { cache, endpoint, metrics } = deps;
    const startedAt = Date.now();
    const budget = deps.budget?.state(startedAt) ?? 'normal';
    // An exhausted budget refuses every read: asking for them would only fail them.
    if (budget === 'exhausted') return;
    const gmaCost = costOf(deps.costs, 'getMultipleAccounts');
    const scanCost = costOf(deps.costs, 'getProgramAccounts');
    type Due = {
      parent: string;
      entry: CacheEntry;
      accounts: EntryAccounts;
      keys: Array<[subdomain: string, reverse: string]>;
    };
    const due: Due[] = [];
    for (const [parent, state] of this.watched) {
      if (state.subscribedAt === undefined) continue;
      const read = await cache.getWithAccounts(endpoint.id, parent);
      const entry = read?.entry;
      if (state.wantSlot !== undefined && (entry?.scanSlot ?? -1) >= state.wantSlot) {
        state.wantSlot = undefined;
      }
      const scanned = entry?.scannedAt ?? 0;
      const gapReadAt = state.subscribedAt + GAP_READ_DELAY_MS;
      if (scanned < gapReadAt) {
        // The gap is not covered yet: its read is due (again, if it joined an earlier one).
        if (startedAt >= gapReadAt) void this.reread(parent, state.wantSlot);
        continue;
      }
      if (!read?.accounts || state.wantSlot !== undefined) {
        void this.reread(parent, state.wantSlot);
        continue;
      }
      // Past the budget's soft threshold nothing is refreshed ahead: entries go stale, and stale
      // hits refresh them on the stretched window (docs/design.md, "Budget").
      if (budget !== 'normal') continue;
      if (startedAt - scanned > RESCAN_WINDOWS * deps.freshMs) {
        void this.reread(parent);
        continue;
      }
      if (startedAt - read.entry.fetchedAt < deps.freshMs - 1.5 * this.checkMs) continue;
      const subdomains = Object.keys(read.accounts);
      if (Math.ceil((2 * subdomains.length) / MULTIPLE_ACCOUNTS_BATCH) * gmaCost > scanCost) {
        metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.scanned });
        void this.reread(parent);
        continue;
      }
      due.push({
        parent,
        entry: read.entry,
        accounts: read.accounts,
        keys: subdomains.map((s) => [s, toBase58(reverseKeyFromDomainKey(s, state.parentKey))]),
      });
    }
    if (due.length === 0) return;
    const keys = due.flatMap((d) => d.keys.flat());
    const atLeast = Math.max(...due.map((d) => this.honoured(d.entry.slot) ?? 0));
    const { exists, slot } = await this.existence(keys, atLeast > 0 ? atLeast : undefined);
    for (const d of due) {
      const gone = d.keys
        .filter(([subdomain, reverse]) => !exists.get(subdomain) || !exists.get(reverse))
        .map(([subdomain]) => subdomain);
      // Drops only the gone accounts, unless written past the check's slot (added since); a check
      // without a believed slot leaves the entry's slot as it was.
      const checked = await cache.markChecked(endpoint.id, d.parent, {
        fetchedAt: startedAt,
        slot,
        gone,
      });
      if (checked.outcome !== 'written') continue;
      const dropped = checked.dropped > 0;
      metrics.deletionChecks.inc({
        outcome: dropped ? DELETION_CHECK_OUTCOME.dropped : DELETION_CHECK_OUTCOME.unchanged,
      });
      if (dropped) await this.announce(d.parent);
    }
  }

  /**
   * Which of `keys` still have an account, by `getMultipleAccounts` with a `dataSlice` of length 0
   * (no data, 1 call per 100 keys) at `minContextSlot` or later, and the lowest slot the calls
   * read at (undefined when one reply's slot is missing or not believed by the clock).
   *
   * @throws RpcCallError when a call fails: the round touches nothing then.
   */
  private async existence(
    keys: string[],
    minContextSlot: number | undefined,
  ): Promise<{ exists: Map<string, boolean>; slot: number | undefined }> {
    const { lane, endpoint } = this.deps;
    const exists = new Map<string, boolean>();
    let slot: number | undefined;
    const batches = await accountsInBatches(lane, endpoint, keys, {
      dataSlice: { offset: 0, length: 0 },
      minContextSlot,
      decode:
        (count) =>
        (body, { method, id }) =>
          lane.thread.run({
            kind: 'existence',
            method,
            id,
            body: DecodeThread.transferable(body),
            count,
          }),
    });
    let unknown = false;
    for (const { batch, result } of batches) {
      batch.forEach((key, i) => exists.set(key, result.exists[i] === true));
      const verdict = this.deps.slots.observe(result.slot);
      if (verdict === 'ahead') {
        this.warnAhead(
          { slot: result.slot, ceiling: this.deps.slots.ceiling() },
          'existence check reply slot past any the RPC can have reached: ignored',
        );
      }
      // A slot not believed raises no entry's slot: the check says what exists, not since when.
      if (verdict !== 'trusted' || result.slot === undefined) unknown = true;
      else slot = Math.min(slot ?? result.slot, result.slot);
    }
    return { exists, slot: unknown ? undefined : slot };
  }

  /**
   * An entry's slot when the clock believes it, else undefined: a slot past the ceiling (stored
   * from a bad notification by an earlier release) neither holds a patch back nor sets the
   * `minContextSlot` of a check, which no node would ever answer.
   */
  private honoured(slot: number | undefined): number | undefined {
    return slot !== undefined && this.deps.slots.trusts(slot) ? slot : undefined;
  }

  /**
   * Past {@link MAX_PENDING_PER_PARENT}, a parent's halves waiting for their pair are dropped for
   * one re-read at the newest of their slots (the loop makes it).
   */
  private boundPairs(
    parent: string,
    state: Watched,
    pairs: Map<string, { slot: number; timer: NodeJS.Timeout }>,
  ): void {
    if (pairs.size < MAX_PENDING_PER_PARENT) return;
    const slots: number[] = [];
    for (const pair of pairs.values()) {
      clearTimeout(pair.timer);
      slots.push(pair.slot);
    }
    this.deps.metrics.wsNotifications.inc(
      { outcome: WS_NOTIFICATION_OUTCOME.coalesced },
      pairs.size,
    );
    pairs.clear();
    this.owe(state, slots);
    this.drain(parent, state);
  }

  /** Records that a full scan at `slot` or later is needed (see `Watched.wantSlot`). */
  private want(state: Watched, slot: number): void {
    state.wantSlot = Math.max(state.wantSlot ?? slot, slot);
  }

  /**
   * Queues a re-read of `parent`, at `minContextSlot` or later when a change caused it. The need
   * is remembered until a scan that far is stored: a re-read that joins a refresh already under
   * way (BullMQ deduplication) gets that refresh, which may have read too early, and the next
   * round queues it again.
   */
  private async reread(parent: string, minContextSlot?: number): Promise<void> {
    const { cache, endpoint, queue, logger } = this.deps;
    const state = this.watched.get(parent);
    if (state && minContextSlot !== undefined) this.want(state, minContextSlot);
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
