import type { Logger } from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import { LRUCache } from 'lru-cache';
import type { RegistryIndex, RegistryOp } from '../../src/core/cache/registry-index.js';
import { ROOT_DOMAIN_ACCOUNT, toBase58 } from '../../src/core/sns/pda.js';
import { DELETE_READ_GRACE_MS } from '../follow/deletions.js';
import type { AccountNote } from '../follow/types.js';
import { scanSliceOf } from '../follow/name-program.js';
import { classifyChange } from '../sns/change.js';
import { isReverseSlice } from '../sns/discovery-decode.js';

/** Ops applied in one script call at most. */
const FEED_BATCH = 500;
/** Ops waiting at most; past it the oldest are dropped and the index is declared behind. */
const FEED_MAX_QUEUED = 100_000;
/**
 * Name-account owners remembered for a reverse record that follows (they come in one transaction,
 * the name account first): an addition then needs no read of its owner.
 */
const RECENT_OWNERS = 10_000;
const RECENT_OWNERS_MS = 60_000;
/**
 * Reads of a reverse record whose text the stream's slice cut, until one at the notification's
 * slot or later (an HTTP node lags the websocket), waiting {@link WHOLE_BACKOFF_MS} doubled between.
 */
const WHOLE_TRIES = 5;
const WHOLE_BACKOFF_MS = 250;

const ZERO_KEY = toBase58(new Uint8Array(32));
/**
 * The slot of an owner read whose reply's slot the clock does not believe: below every fact, so
 * it only fills an owner the index does not know (the merge rule) and never changes one it knows.
 */
const FILL_ONLY_SLOT = 0;
const ROOT_KEY = toBase58(ROOT_DOMAIN_ACCOUNT);

/** The reads the feed makes besides the stream (the configured endpoint's lane). */
export type FeedRpc = {
  /**
   * Heads (bytes 0..130: parent, owner, class, start of data) of `keys`, null for a missing
   * account, with the lowest believed slot of the replies; with `whole`, a reverse record's whole
   * text instead of the head; with `minContextSlot`, read at that slot or later (a node behind
   * refuses, and the call is retried).
   */
  accounts(
    keys: readonly string[],
    opts?: { whole?: boolean; minContextSlot?: number },
  ): Promise<{ slot: number | undefined; accounts: Array<{ head: Buffer } | null> }>;
};

export type RegistryFeedDeps = {
  index: Pick<RegistryIndex, 'apply'>;
  rpc: FeedRpc;
  logger: Logger;
  /** The listed subdomains of these parent keys changed (live updates, metrics). */
  changed?: (parentKeys: readonly string[]) => void;
  /** Facts were dropped (queue past its bound, a failed write): the index may be behind. */
  lost: (why: string) => void;
  /**
   * The clock the follow status is written on (Unix ms; the deployment's, Redis's): when each fact
   * was taken in ({@link RegistryFeed.waitingSince}). `Date.now` when absent.
   */
  now?: () => number;
};

/**
 * Applies every write of the name program the follow stream carries to the registry index
 * (docs/design.md, "The registry index"), whatever its parent: a reverse record of a subdomain
 * (its label, proven by deriving its key), a name account's owner, a deletion from the logs
 * stream. Synchronous intake, one write loop; a label whose owner the index does not know is
 * completed by one read of the name account.
 */
export class RegistryFeed {
  private queue: Array<{ op: RegistryOp; origin: number }> = [];
  private draining: Promise<void> | undefined;
  /**
   * Cut reverse records waiting for their whole read: pubkey -> the slot it must be read at, and
   * the facts (their origins, {@link hold}) it completes.
   */
  private wholeWaiting = new Map<string, { slot: number; origins: number[] }>();
  /** The origin of the last fact taken in: each notification, gap read or deletion is one. */
  private taken = 0;
  /**
   * Facts not written yet, by origin: how many ops, reads and owner reads still carry each. Work
   * done for a fact (its whole read, the owner read its label needs) carries the fact's origin,
   * and is held before the work that led to it is released, so an origin leaves only once all of
   * it is written or given up. Origins are taken in increasing order and never held again once
   * released: the first key is the oldest fact not written. `since`: when it was first held, which
   * is when it was taken in (every fact holds at once, in the turn that takes it).
   */
  private readonly unwritten = new Map<number, { count: number; since: number }>();
  /** Callers of {@link settled}: resolved once no origin up to theirs is unwritten. */
  private settling: Array<{ upTo: number; resolve: () => void }> = [];
  private readonly owners = new LRUCache<
    string,
    { parentKey: string; owner: string; slot: number }
  >({ max: RECENT_OWNERS, ttl: RECENT_OWNERS_MS });

  constructor(private readonly deps: RegistryFeedDeps) {}

  /** Ops waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  /** An account notification of the name program (any parent), or one read for a gap. */
  onAccount(note: AccountNote): void {
    this.take(note, false, ++this.taken);
  }

  /**
   * Resolves once every fact taken in before the call (an account, a deletion) is written to the
   * index or given up (the index then marked behind), its whole read and owner read included:
   * what a heal read is in the index before the stream vouches for it again (docs/design.md, "The
   * registry index", "Stitching"). Facts taken in later are not waited for, so a busy stream
   * cannot hold it. Never rejects; bounded by the feed's own tries.
   */
  settled(): Promise<void> {
    const upTo = this.taken;
    if (this.oldestUnwritten() > upTo) return Promise.resolve();
    return new Promise((resolve) => this.settling.push({ upTo, resolve }));
  }

  /**
   * When the oldest fact taken in and not written yet was taken in (Unix ms, {@link
   * RegistryFeedDeps.now}), if it has waited {@link DELETE_READ_GRACE_MS} or more by `now`;
   * undefined when none has. Until it is written (its whole read, its owner read) or given up (the
   * index then marked behind), the index lacks a change the stream reported: the follower says so
   * in the follow status beside a waiting Delete (`deletesSince`), and the index's answers are
   * dated then (docs/design.md, "The registry index", "Stitching").
   */
  waitingSince(now: number): number | undefined {
    for (const { since } of this.unwritten.values())
      return now - since >= DELETE_READ_GRACE_MS ? since : undefined;
    return undefined;
  }

  /** The origin of the oldest fact not written yet (Infinity: none). */
  private oldestUnwritten(): number {
    for (const origin of this.unwritten.keys()) return origin;
    return Infinity;
  }

  private hold(origin: number): void {
    const held = this.unwritten.get(origin);
    if (held) held.count++;
    else this.unwritten.set(origin, { count: 1, since: (this.deps.now ?? Date.now)() });
  }

  private release(origin: number): void {
    const held = this.unwritten.get(origin);
    if (held && held.count > 1) {
      held.count--;
      return;
    }
    this.unwritten.delete(origin);
    const oldest = this.oldestUnwritten();
    if (this.settling.length === 0 || (this.settling[0]?.upTo ?? Infinity) >= oldest) return;
    const still = [];
    for (const waiter of this.settling) {
      if (waiter.upTo < oldest) waiter.resolve();
      else still.push(waiter);
    }
    this.settling = still;
  }

  /**
   * An account as the stream or a read saw it; `whole`: read whole already (never again);
   * `origin`: the fact it belongs to.
   */
  private take(note: AccountNote, whole: boolean, origin: number): void {
    const head = note.head;
    if (!head || head.length < 32) {
      // A length that is not ours: read what it is now.
      this.hold(origin);
      void this.readHeads([note.pubkey], false, origin).finally(() => this.release(origin));
      return;
    }
    const parentKey = toBase58(head.subarray(0, 32));
    // Top-level names (under the root) and their reverse records (parent all zeros) are no one's
    // subdomains: a `/subdomains/:parent` parent is one label, never the root.
    if (parentKey === ZERO_KEY || parentKey === ROOT_KEY) return;
    const parentBytes = head.subarray(0, 32);
    const slice = scanSliceOf(head);
    const change = classifyChange(note.pubkey, slice, parentBytes);
    switch (change.kind) {
      case 'subdomain': {
        this.owners.set(note.pubkey, { parentKey, owner: change.owner, slot: note.slot });
        this.push(
          { op: 'owner', slot: note.slot, parentKey, account: note.pubkey, owner: change.owner },
          origin,
        );
        return;
      }
      case 'reverse': {
        this.push(
          {
            op: 'label',
            slot: note.slot,
            parentKey,
            account: change.subdomain,
            reverse: note.pubkey,
            label: change.label,
          },
          origin,
        );
        const seen = this.owners.get(change.subdomain);
        if (seen && seen.parentKey === parentKey) {
          this.push(
            {
              op: 'owner',
              slot: seen.slot,
              parentKey,
              account: change.subdomain,
              owner: seen.owner,
            },
            origin,
          );
        }
        return;
      }
      case 'empty':
        // A text the SDK does not list: the reverse record no longer names a subdomain.
        this.push({ op: 'delete', slot: note.slot, account: note.pubkey }, origin);
        return;
      case 'unproven':
        // A reverse text cut at the slice (a long label): read whole. Anything else (a record made
        // by hand whose key is not derived from its text, a text past the longest label) is the
        // audit's to find.
        if (isReverseSlice(slice) && !whole) this.wantWhole(note.pubkey, note.slot, origin);
        else this.deps.logger.debug({ account: note.pubkey }, 'registry: reverse text unproven');
        return;
    }
  }

  /**
   * Queues the reverse record `pubkey` to be read whole at `slot` or later: the records cut in one
   * turn of the event loop (a transaction's, a gap read's) are read together, in one call.
   */
  private wantWhole(pubkey: string, slot: number, origin: number): void {
    const first = this.wholeWaiting.size === 0;
    this.hold(origin);
    const waiting = this.wholeWaiting.get(pubkey);
    if (waiting) {
      waiting.slot = Math.max(slot, waiting.slot);
      waiting.origins.push(origin);
    } else {
      this.wholeWaiting.set(pubkey, { slot, origins: [origin] });
    }
    if (!first) return;
    setImmediate(() => {
      const waiting = this.wholeWaiting;
      this.wholeWaiting = new Map();
      void this.readWhole(waiting).finally(() => {
        for (const { origins } of waiting.values())
          for (const origin of origins) this.release(origin);
      });
    });
  }

  /**
   * Reads the reverse records of `waiting` whole (one `getMultipleAccounts` a batch), at the
   * latest of their slots or later, and takes each as seen at the read's slot. Gone by then:
   * nothing to add (its Delete comes through the logs). Never read that late within
   * {@link WHOLE_TRIES}: facts lost, the index behind.
   */
  private async readWhole(
    waiting: ReadonlyMap<string, { slot: number; origins: readonly number[] }>,
  ): Promise<void> {
    const keys = [...waiting.keys()];
    let slot = 0;
    for (const at of waiting.values()) slot = Math.max(slot, at.slot);
    let wait = WHOLE_BACKOFF_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const read = await this.deps.rpc.accounts(keys, { whole: true, minContextSlot: slot });
        const readAt = read.slot;
        if (readAt !== undefined && readAt >= slot) {
          read.accounts.forEach((found, i) => {
            const pubkey = keys[i] as string;
            // The oldest fact it completes: the others are released with it, after its write.
            const origin = Math.min(...(waiting.get(pubkey)?.origins ?? [this.taken]));
            if (found) this.take({ slot: readAt, pubkey, head: found.head }, true, origin);
          });
          return;
        }
      } catch (err) {
        this.deps.logger.debug(
          { err: String(err), accounts: keys.length },
          'registry: a read failed',
        );
      }
      if (attempt >= WHOLE_TRIES) {
        this.deps.lost('registry: a long reverse text stayed unread');
        return;
      }
      await sleep(wait);
      wait *= 2;
    }
  }

  /** Accounts deleted at `slot` (a Delete found in a transaction the logs stream reported). */
  onDeleted(accounts: readonly string[], slot: number): void {
    const origin = ++this.taken;
    for (const account of accounts) this.push({ op: 'delete', slot, account }, origin);
  }

  /** Resolves once nothing waits to be written. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private push(op: RegistryOp, origin: number): void {
    if (this.queue.length >= FEED_MAX_QUEUED) {
      const dropped = this.queue.shift();
      this.deps.lost('registry feed queue full');
      if (dropped) this.release(dropped.origin);
    }
    this.hold(origin);
    this.queue.push({ op, origin });
    this.drain();
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = (async () => {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, FEED_BATCH);
        // The owners a label needs complete its fact: read before the batch's facts are released.
        const origin = Math.min(...batch.map((b) => b.origin));
        try {
          const { changed, needOwner } = await this.deps.index.apply(batch.map((b) => b.op));
          if (changed.length > 0) this.deps.changed?.(changed);
          if (needOwner.length > 0) await this.readHeads(needOwner, true, origin);
        } catch (err) {
          this.deps.logger.warn({ err: String(err) }, 'registry: a write of the stream failed');
          this.deps.lost('registry write failed');
        } finally {
          for (const b of batch) this.release(b.origin);
        }
      }
    })().finally(() => (this.draining = undefined));
  }

  /**
   * Reads the heads of `keys` and feeds them as notifications at the read's slot. With
   * `fillOnly` (owners the index does not know), a reply at a slot the clock does not believe is
   * still fed, at {@link FILL_ONLY_SLOT}: what it fills was unknown, so nothing is lost or brought
   * back, and the index is not declared behind (a rebuild) for a slot it could not date.
   */
  private async readHeads(
    keys: readonly string[],
    fillOnly: boolean,
    origin: number,
  ): Promise<void> {
    try {
      const read = await this.deps.rpc.accounts(keys);
      const { accounts } = read;
      const slot = read.slot ?? (fillOnly ? FILL_ONLY_SLOT : undefined);
      if (slot === undefined) {
        this.deps.lost('registry: an account read at an unknown slot');
        return;
      }
      accounts.forEach((found, i) => {
        const pubkey = keys[i] as string;
        if (found) this.take({ slot, pubkey, head: found.head }, false, origin);
      });
    } catch (err) {
      this.deps.logger.warn({ err: String(err) }, 'registry: an owner read failed');
      this.deps.lost('registry owner read failed');
    }
  }
}
