import type { Logger } from 'pino';
import { occasionalWarning } from '../../src/core/logger.js';
import {
  WS_NOTIFICATION_OUTCOME,
  type Metrics,
  type WsNotificationOutcome,
} from '../../src/core/metrics.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { fromBase58, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import { classifyChange, type Change } from '../sns/change.js';
import { scanSliceOf } from './name-program.js';
import { Settling } from './settling.js';
import type { AccountNote, Clock, FollowStore, Member, Reread } from './types.js';

/**
 * How long a reverse record's notification waits for its subdomain name account's (they are
 * written in one transaction, so both come within a slot or two), before the parent is re-read.
 */
export const PAIRING_MS = 1_500;
/**
 * Accounts with a notification waiting to be applied, per parent: a newer notification of an
 * account replaces its waiting one (only the newest state matters), and past this bound the
 * parent's waiting notifications are dropped for one re-read at the newest of their slots, which
 * covers them all. The same bound holds the halves waiting for their pair. A burst this large is
 * cheaper to scan than to patch, and a flood cannot grow the heap.
 */
export const MAX_PENDING_PER_PARENT = 256;
/** {@link MAX_PENDING_PER_PARENT} over every parent together. */
const MAX_PENDING = 10_000;

export type PatcherDeps = {
  store: FollowStore;
  clock: Clock;
  /**
   * The worker's slot clock: a notification's slot past its ceiling is not believed (the parent
   * is re-read at the newest slot believed instead, nothing patched).
   */
  slots: Pick<SlotClock, 'trusts' | 'ceiling' | 'newest'>;
  reread: Reread;
  /** An entry changed: tell the API processes (a refresh event). */
  changed: (parent: string) => void;
  metrics: Metrics;
  logger: Logger;
};

/** `origin`: the oldest of the notifications it settles ({@link Patcher.settled}), held by it. */
type Pair = { slot: number; cancel: () => void; origin: number };

/** A waiting notification, and the oldest origin it carries (it replaced older ones). */
type Waiting = { note: AccountNote; origin: number };

type ParentState = {
  parentKey: Buffer;
  /** Waiting notifications by account, the newest of each; one loop applies them in order. */
  pending: Map<string, Waiting>;
  /**
   * A re-read owed, at this slot or later (undefined: at what the RPC has), and the oldest origin
   * of the notifications it settles.
   */
  owed?: { slot: number | undefined; origin: number };
  draining?: Promise<void>;
  /** Reverse records notified before their subdomain name account: account -> label, slot. */
  reverses: Map<string, Pair & { label: string }>;
  /** New subdomain name accounts waiting for their reverse record: account -> owner, slot. */
  seen: Map<string, Pair & { owner: string }>;
};

/**
 * Turns account notifications of followed parents into member changes of their entries
 * (docs/design.md, "Freshness"): a new subdomain once both its name account and its reverse
 * record (derived from the label) are seen, usually in one transaction; a transfer when a listed
 * subdomain's owner changes; anything it cannot prove (a text cut at the slice, an emptied text, a
 * record made by hand, a slot past the clock's ceiling, a half whose pair never came) a re-read
 * at the notification's slot. Notifications wait per parent keyed by account, bounded (see
 * {@link MAX_PENDING_PER_PARENT}); one loop per parent applies them. Never backwards: the store
 * ignores a member change older than the member's slot.
 */
export class Patcher {
  private readonly parents = new Map<string, ParentState>();
  private pendingTotal = 0;
  /** Notifications handed in and not settled yet ({@link settled}), by origin (./settling.ts). */
  private readonly settling = new Settling();
  private readonly warnAhead: ReturnType<typeof occasionalWarning>;

  constructor(private readonly deps: PatcherDeps) {
    this.warnAhead = occasionalWarning(deps.logger, 60_000, () => deps.clock.now());
  }

  /** Notifications waiting over every parent. */
  get pending(): number {
    return this.pendingTotal;
  }

  /**
   * Queues a notification of an account under `parent` (whose key is `parentKey`, base58). It
   * replaces a waiting one of the same account (newest slot wins; at one slot, the last
   * received); past the bounds the parent's waiting ones are dropped for one re-read. Synchronous
   * and bounded.
   */
  notify(parent: string, parentKey: string, note: AccountNote): void {
    const state = this.stateOf(parent, parentKey);
    const origin = this.settling.take();
    const coalesced = (n: number) =>
      this.deps.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.coalesced }, n);
    const waiting = state.pending.get(note.pubkey);
    if (waiting) {
      coalesced(1);
      // The waiting one's older origin stays held until what replaces it is applied.
      if (waiting.note.slot <= note.slot)
        state.pending.set(note.pubkey, { note, origin: waiting.origin });
    } else if (state.pending.size >= MAX_PENDING_PER_PARENT || this.pendingTotal >= MAX_PENDING) {
      coalesced(state.pending.size + 1);
      const dropped = [...state.pending.values()];
      const origins = dropped.map((w) => w.origin);
      this.owe(
        state,
        [...dropped.map((w) => w.note.slot), note.slot],
        Math.min(origin, ...origins),
      );
      this.settling.release(origins);
      this.pendingTotal -= state.pending.size;
      state.pending.clear();
    } else {
      this.settling.hold(origin);
      state.pending.set(note.pubkey, { note, origin });
      this.pendingTotal++;
    }
    this.drain(parent, state);
  }

  /**
   * Resolves once every notification handed in before the call is settled: written to its entry,
   * or its parent's re-read asked (a half whose pair never came, a change nothing proves, a
   * failed patch), or its parent let go. What a heal read is in the entries, or owed a re-read,
   * before the stream vouches for them again (docs/design.md, "Gaps"). Notifications handed in
   * later are not waited for, so a busy stream cannot hold it. Never rejects; bounded by the
   * store's writes and {@link PAIRING_MS}.
   */
  settled(): Promise<void> {
    return this.settling.settled();
  }

  /** Stops patching `parent`: its waiting notifications and pairs are dropped. */
  forget(parent: string): void {
    const state = this.parents.get(parent);
    if (!state) return;
    this.parents.delete(parent);
    this.dropAll(state);
  }

  /** Resolves once every parent's loop is idle (tests, shutdown). */
  async idle(): Promise<void> {
    for (;;) {
      const running: Array<Promise<void>> = [];
      for (const s of this.parents.values()) if (s.draining) running.push(s.draining);
      if (running.length === 0) return;
      await Promise.all(running);
    }
  }

  private stateOf(parent: string, parentKey: string): ParentState {
    let state = this.parents.get(parent);
    if (!state) {
      state = {
        parentKey: fromBase58(parentKey),
        pending: new Map(),
        reverses: new Map(),
        seen: new Map(),
      };
      this.parents.set(parent, state);
    }
    return state;
  }

  /**
   * Owes one re-read at the highest of `slots` believed (else the newest the RPC has shown), which
   * settles the notifications it stands for once asked: `origin`, the oldest, is held until then.
   */
  private owe(state: ParentState, slots: number[], origin: number): void {
    const clock = this.deps.slots;
    let slot = state.owed?.slot;
    for (const s of slots) {
      const at = clock.trusts(s) ? s : clock.newest;
      if (at !== undefined) slot = Math.max(slot ?? at, at);
    }
    const before = state.owed?.origin;
    const oldest = Math.min(before ?? origin, origin);
    this.settling.hold(oldest);
    if (before !== undefined) this.settling.release([before]);
    state.owed = { slot, origin: oldest };
  }

  /** A parent let go: what it waits for is dropped, and settles. */
  private dropAll(state: ParentState): void {
    for (const pairs of [state.reverses, state.seen]) {
      for (const pair of pairs.values()) {
        pair.cancel();
        this.settling.release([pair.origin]);
      }
      pairs.clear();
    }
    this.settling.release([...state.pending.values()].map((w) => w.origin));
    this.pendingTotal -= state.pending.size;
    state.pending.clear();
    if (state.owed) this.settling.release([state.owed.origin]);
    state.owed = undefined;
  }

  private drain(parent: string, state: ParentState): void {
    if (state.draining) return;
    const current = () => this.parents.get(parent) === state;
    state.draining = (async () => {
      while (current()) {
        if (state.owed) {
          const { slot, origin } = state.owed;
          state.owed = undefined;
          this.deps.reread(parent, slot);
          this.settling.release([origin]);
          continue;
        }
        const next = state.pending.values().next();
        if (next.done) return;
        const { note, origin } = next.value;
        state.pending.delete(note.pubkey);
        this.pendingTotal--;
        await this.apply(parent, state, note, origin).catch((err: unknown) => {
          this.deps.logger.warn({ err: String(err), parent }, 'follow: a patch failed: re-read');
          this.owe(state, [note.slot], origin);
        });
        this.settling.release([origin]);
      }
    })().finally(() => {
      state.draining = undefined;
      // Let go meanwhile: what the last patch left waiting (a half, a re-read) is dropped too.
      if (!current()) this.dropAll(state);
      else if (state.owed || state.pending.size > 0) this.drain(parent, state);
    });
  }

  private count(outcome: WsNotificationOutcome): void {
    this.deps.metrics.wsNotifications.inc({ outcome });
  }

  /** Applies `note` (whose origin is `origin`); what waits after it holds `origin`. */
  private async apply(
    parent: string,
    state: ParentState,
    note: AccountNote,
    origin: number,
  ): Promise<void> {
    const { slots, store } = this.deps;
    const { slot } = note;
    if (!slots.trusts(slot)) {
      const ceiling = slots.ceiling();
      if (ceiling !== undefined) {
        this.warnAhead(
          { parent, slot, ceiling },
          'notification slot ahead of any the RPC has shown: re-read instead',
        );
      }
      this.count(WS_NOTIFICATION_OUTCOME.reread);
      this.owe(state, [slot], origin);
      return;
    }
    const change: Change = note.head
      ? classifyChange(note.pubkey, scanSliceOf(note.head), state.parentKey)
      : { kind: 'unproven' };
    switch (change.kind) {
      case 'unproven':
      case 'empty':
        this.count(WS_NOTIFICATION_OUTCOME.reread);
        this.owe(state, [slot], origin);
        return;
      case 'subdomain': {
        const { subdomain, owner } = change;
        const waiting = state.reverses.get(subdomain);
        if (waiting) {
          waiting.cancel();
          state.reverses.delete(subdomain);
          return this.write(
            parent,
            state,
            subdomain,
            [waiting.label, owner],
            Math.max(slot, waiting.slot),
          ).finally(() => this.settling.release([waiting.origin]));
        }
        const listed = await store.member(parent, subdomain);
        // A listed subdomain's own header changed: a transfer (a new owner), or nothing.
        if (listed) return this.write(parent, state, subdomain, [listed.label, owner], slot);
        // A new name account: listed once its reverse record comes (usually in the same
        // transaction). If none comes, only a scan tells (a name re-created under a record that
        // stayed, or no record at all).
        this.wait(parent, state, state.seen, subdomain, { slot, owner }, origin);
        return;
      }
      case 'reverse': {
        const { subdomain, label } = change;
        const seen = state.seen.get(subdomain);
        if (seen) {
          seen.cancel();
          state.seen.delete(subdomain);
          return this.write(
            parent,
            state,
            subdomain,
            [label, seen.owner],
            Math.max(slot, seen.slot),
          ).finally(() => this.settling.release([seen.origin]));
        }
        const listed = await store.member(parent, subdomain);
        if (listed) return this.write(parent, state, subdomain, [label, listed.owner], slot);
        this.wait(parent, state, state.reverses, subdomain, { slot, label }, origin);
        return;
      }
    }
  }

  /**
   * Waits {@link PAIRING_MS} for the other half of `subdomain`; then the parent is re-read. The
   * half settles `origin` (the note's, held by the caller) and what a half it replaces carried.
   */
  private wait<T extends Pair>(
    parent: string,
    state: ParentState,
    pairs: Map<string, T>,
    subdomain: string,
    half: Omit<T, 'cancel' | 'origin'>,
    origin: number,
  ): void {
    const replaced = pairs.get(subdomain);
    replaced?.cancel();
    pairs.delete(subdomain);
    const carried = Math.min(replaced?.origin ?? origin, origin);
    this.settling.hold(carried);
    if (replaced) this.settling.release([replaced.origin]);
    if (pairs.size >= MAX_PENDING_PER_PARENT) {
      const slots: number[] = [];
      const origins: number[] = [];
      for (const pair of pairs.values()) {
        pair.cancel();
        slots.push(pair.slot);
        origins.push(pair.origin);
      }
      this.deps.metrics.wsNotifications.inc(
        { outcome: WS_NOTIFICATION_OUTCOME.coalesced },
        pairs.size,
      );
      pairs.clear();
      this.owe(state, slots, Math.min(...origins));
      this.settling.release(origins);
    }
    const cancel = this.deps.clock.after(PAIRING_MS, () => {
      if (pairs.get(subdomain)?.cancel !== cancel) return;
      pairs.delete(subdomain);
      this.count(WS_NOTIFICATION_OUTCOME.reread);
      this.owe(state, [half.slot], carried);
      this.settling.release([carried]);
      this.drain(parent, state);
    });
    pairs.set(subdomain, { ...half, cancel, origin: carried } as T);
  }

  private async write(
    parent: string,
    state: ParentState,
    subdomain: string,
    member: Member,
    slot: number,
  ): Promise<void> {
    const reverse = toBase58(reverseKeyFromDomainKey(subdomain, state.parentKey));
    const outcome = await this.deps.store.applyChanges(
      parent,
      [{ account: subdomain, reverse, member }],
      slot,
    );
    if (outcome === 'written') {
      this.count(WS_NOTIFICATION_OUTCOME.patched);
      this.deps.changed(parent);
    } else if (outcome === 'unsound') {
      // The entry holds a slot no chain has reached: the store has re-read the parent instead.
      this.count(WS_NOTIFICATION_OUTCOME.reread);
    } else {
      this.count(WS_NOTIFICATION_OUTCOME.ignored);
    }
  }
}
