import type { Logger } from 'pino';
import { occasionalWarning } from '../../src/core/logger.js';
import type { Metrics } from '../../src/core/metrics.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import { CreditBudgetRefusal } from '../rpc/credits.js';
import type { FollowRpc } from './rpc.js';
import type { LogsNote } from './notifications.js';
import { RecentSignatures } from './recent.js';
import { logsDelete, nameWrites } from './transaction.js';
import type { Clock, FollowStore, Reread } from './types.js';

/** Tries of one `getTransaction` (null from a lagging node, or a failed call) before giving up. */
export const TRANSACTION_TRIES = 6;
/** First wait between tries, doubled each time: 0.25 + 0.5 + 1 + 2 + 4 s, about 8 s in all. */
const TRANSACTION_BACKOFF_MS = 250;
/** Transactions waiting to be read at most; past it a Delete is lost (the caller heals that). */
const MAX_QUEUED = 1_000;
/** Transactions read at once. */
const CONCURRENCY = 4;
/**
 * `getTransaction` calls for Deletes per minute at most, tries included: Deletes are a few
 * percent of the name program's transactions (a few hundred a day), so this is far above a real
 * chain's rate, and a stream forging "Instruction: Delete Name" lines (or a chain flooded with
 * Deletes) costs at most this many credits a minute. An allowance that refills continuously (a
 * token bucket holding a minute's worth): a burst spends it at once, and it comes back a read at a
 * time, so a Delete soon after a burst waits a second or so rather than for a new minute.
 */
export const MAX_READS_PER_MINUTE = 60;
/**
 * How long after it was reported a Delete may wait for the allowance (and its tries) before it is
 * given up as lost: one new epoch then covers all of them, rather than a credit each. A lost
 * Delete costs more than its read (a new epoch; with the registry index, a rebuild), so an honest
 * burst waits; a flood of forged lines still ends in that bound.
 */
const MAX_READ_WAIT_MS = 60_000;
/**
 * How long a reported Delete may wait for its read before the follow status says so
 * (`deletesSince`, src/core/cache/follow-status.ts) and stops vouching: a read on a node a little
 * behind the websocket takes a try or two, and the stream's patches are "within seconds" anyway.
 * A fact the registry feed holds unwritten gets the same grace (worker/registry/feed.ts).
 */
export const DELETE_READ_GRACE_MS = 2_000;
/**
 * The earlier of two times (Unix ms) either of which may be absent; undefined when both are: what
 * the follow status says of a waiting Delete and a registry feed's waiting fact (`deletesSince`).
 */
export const earlier = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b);
/** Signatures read (or given up) remembered, so one reported again is not read again. */
const RECENT_MAX = 4_096;

export type DeletionsDeps = {
  rpc: Pick<FollowRpc, 'transaction'>;
  store: Pick<FollowStore, 'parentsOfMembers' | 'applyChanges'>;
  /**
   * Whether the daily credit budget pays for a proactive read now: the proactive share at its
   * pace, not only the day (docs/design.md, "Budget"; `CreditBudget.proactiveAffordable`); always
   * when absent. Asked before every try. A Delete it cannot pay for is given up as lost (a new
   * epoch), never taken for "nothing deleted".
   */
  affordable?: () => boolean;
  clock: Clock;
  slots: Pick<SlotClock, 'trusts' | 'newest'>;
  reread: Reread;
  changed: (parent: string) => void;
  /**
   * A transaction that deleted names could not be read (every try null or failed, or past
   * {@link MAX_QUEUED}): which entries it touched is unknown.
   */
  lost: (signature: string) => void;
  metrics: Metrics;
  logger: Logger;
  /**
   * Every name-program account a transaction deleted, whatever its parent (the registry index):
   * one the logs reported, or one a gap read found ({@link Deletions.removeDeleted}).
   */
  deleted?: (accounts: readonly string[], slot: number) => void;
};

/**
 * Deletions within seconds (docs/design.md, "Freshness"). The name program's Delete zeroes and
 * closes the account, and `programSubscribe` sends nothing for it; `logsSubscribe` reports the
 * transaction, whose logs hold "Instruction: Delete Name". Only those transactions are read
 * (`getTransaction`, 1 credit): the first account of each Delete, inner instructions included,
 * maps to its parent through the store's member index, and the member is removed at the
 * transaction's slot. A node that has not seen the transaction yet answers null: tried again with
 * back-off, {@link TRANSACTION_TRIES} times, then given up as lost. Bounded whatever the stream
 * reports: a signature is read once (remembered among the last {@link RECENT_MAX}), reads are
 * capped at {@link MAX_READS_PER_MINUTE}, and each must be affordable.
 */
export class Deletions {
  private readonly queue: string[] = [];
  /** Signatures queued or being read, and when each was reported (ms). */
  private readonly queued = new Map<string, number>();
  private running = 0;
  private readonly waiters: Array<() => void> = [];
  /** Signatures read or given up lately, oldest first. */
  private readonly recent = new RecentSignatures(RECENT_MAX);
  /** Reads the allowance holds (at most {@link MAX_READS_PER_MINUTE}), as of `refilledAt`. */
  private tokens = MAX_READS_PER_MINUTE;
  private refilledAt: number | undefined;

  /** A flood of unreadable Deletes writes one line a minute, not one each. */
  private readonly warn: ReturnType<typeof occasionalWarning>;

  constructor(private readonly deps: DeletionsDeps) {
    this.warn = occasionalWarning(deps.logger, 60_000, () => deps.clock.now());
  }

  /** A logs notification: reads the transaction when it deleted a name. Synchronous. */
  onLogs(note: LogsNote): void {
    if (note.failed || !logsDelete(note.logs)) return;
    this.enqueue(note.signature);
  }

  /** Reads the transaction `signature` for Deletes (a gap heal found it). */
  enqueue(signature: string): void {
    if (this.queued.has(signature) || this.recent.has(signature)) return;
    if (this.queued.size >= MAX_QUEUED) {
      this.deps.lost(signature);
      return;
    }
    this.queued.set(signature, this.deps.clock.now());
    this.queue.push(signature);
    this.pump();
  }

  /**
   * When the oldest Delete still waiting for its read (queued, or being tried) was reported, Unix
   * ms, if it has waited {@link DELETE_READ_GRACE_MS} or more by `now`; undefined when none has.
   * Until it is read, or given up (a new epoch), which names were deleted is unknown.
   */
  waitingSince(now: number): number | undefined {
    let oldest: number | undefined;
    for (const reportedAt of this.queued.values())
      oldest = Math.min(oldest ?? reportedAt, reportedAt);
    return oldest !== undefined && now - oldest >= DELETE_READ_GRACE_MS ? oldest : undefined;
  }

  /** Resolves once nothing is queued or being read. */
  idle(): Promise<void> {
    if (this.queued.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Removes the members whose name account (or reverse record) is among `accounts`, deleted at
   * `slot`, and hands them all to `deleted` (the registry index, whatever their parent); accounts
   * of no cached parent are skipped. A slot past the clock's ceiling is not believed: the parent
   * is re-read instead.
   *
   * @returns how many entries changed.
   */
  async removeDeleted(accounts: readonly string[], slot: number): Promise<number> {
    const { store, slots } = this.deps;
    // A gap's Deletes come only through here: the index needs them as the logs' own.
    if (accounts.length > 0) this.deps.deleted?.(accounts, slot);
    const byParent = new Map<string, Map<string, string>>();
    const found = await store.parentsOfMembers(accounts);
    for (const member of found) {
      if (!member) continue;
      const changes = byParent.get(member.parent) ?? new Map<string, string>();
      changes.set(
        member.subdomain,
        toBase58(reverseKeyFromDomainKey(member.subdomain, domainKey(member.parent))),
      );
      byParent.set(member.parent, changes);
    }
    let changed = 0;
    for (const [parent, members] of byParent) {
      if (!slots.trusts(slot)) {
        this.deps.reread(parent, slots.newest);
        continue;
      }
      const outcome = await store.applyChanges(
        parent,
        [...members].map(([account, reverse]) => ({ account, reverse, member: null })),
        slot,
      );
      // 'unsound' (an entry holding a slot no chain has reached): the store re-read the parent.
      if (outcome === 'written') {
        changed++;
        this.deps.changed(parent);
      }
    }
    return changed;
  }

  private pump(): void {
    while (this.running < CONCURRENCY && this.queue.length > 0) {
      const signature = this.queue.shift() as string;
      this.running++;
      void this.read(signature, this.queued.get(signature) ?? this.deps.clock.now())
        .catch((err: unknown) => {
          this.warn({ err: String(err), signature }, 'follow: a deletion was not applied');
          this.deps.lost(signature);
        })
        .finally(() => {
          this.running--;
          this.queued.delete(signature);
          this.recent.add(signature);
          this.pump();
          if (this.queued.size === 0) for (const w of this.waiters.splice(0)) w();
        });
    }
  }

  private async read(signature: string, reportedAt: number): Promise<void> {
    const { rpc, clock } = this.deps;
    let wait = TRANSACTION_BACKOFF_MS;
    for (let attempt = 1; ; attempt++) {
      if (!(await this.mayRead(reportedAt))) {
        this.deps.lost(signature);
        return;
      }
      let refused = false;
      const tx = await rpc.transaction(signature).catch((err: unknown) => {
        refused = err instanceof CreditBudgetRefusal;
        return undefined;
      });
      // The budget refused the call unmade: trying again before its pace allows meets the same
      // refusal, so the Delete is given up now rather than after every try.
      if (refused) {
        this.deps.lost(signature);
        return;
      }
      const writes = nameWrites(tx);
      // A transaction that failed changed nothing.
      if (writes === 'failed') return;
      if (writes) {
        await this.removeDeleted(writes.deleted, writes.slot);
        return;
      }
      // Null (a lagging node), a failed call, or a reply that is not a transaction (a broken
      // node): which names it deleted is unknown, tried again and then given up as lost.
      if (attempt >= TRANSACTION_TRIES || clock.now() + wait - reportedAt > MAX_READ_WAIT_MS) {
        this.warn({ signature }, 'follow: a deleting transaction stayed unreadable');
        this.deps.lost(signature);
        return;
      }
      await new Promise<void>((resolve) => clock.after(wait, resolve));
      wait *= 2;
    }
  }

  /**
   * Takes one read of the allowance if the budget pays for it, waiting for the allowance to refill
   * while that keeps within {@link MAX_READ_WAIT_MS} of `reportedAt`; false when the budget is
   * spent or the wait would be longer.
   */
  private async mayRead(reportedAt: number): Promise<boolean> {
    const { clock } = this.deps;
    const perMs = MAX_READS_PER_MINUTE / 60_000;
    for (;;) {
      if (this.deps.affordable && !this.deps.affordable()) return false;
      const now = clock.now();
      if (this.refilledAt !== undefined) {
        const back = (now - this.refilledAt) * perMs;
        this.tokens = Math.min(MAX_READS_PER_MINUTE, this.tokens + back);
      }
      this.refilledAt = now;
      if (this.tokens >= 1) {
        this.tokens--;
        return true;
      }
      const wait = Math.ceil((1 - this.tokens) / perMs);
      if (now + wait - reportedAt > MAX_READ_WAIT_MS) return false;
      await new Promise<void>((resolve) => clock.after(wait, resolve));
    }
  }
}
