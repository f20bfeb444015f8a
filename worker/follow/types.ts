/**
 * What the follower's units share: the store they write through, the clock they wait on, and an
 * account as the stream or a gap read reports it (docs/design.md, "Freshness").
 */

import type { ApplyVerdict, Member, MemberChange } from '../../src/core/cache/subdomain-cache.js';

// The domain types are the shared layer's (src/core/cache): one shape for the store and the
// follower.
export type { ApplyVerdict, Member, MemberChange };

/**
 * The slice of the store the follower needs (src/core/cache: the split layout of the configured
 * endpoint's entries). Each write is atomic and per member slot-guarded: a change older than the
 * member's stored slot is ignored, so nothing the follower does moves an entry backwards.
 */
export interface FollowStore {
  /**
   * Upserts or removes the touched members of `parent`'s entry at `slot`, raising the entry's
   * slot to it; bumps the revision only when something changed. 'unsound' (the entry holds a slot
   * past the slot ceiling, so no change is judged against it): nothing is written and the store
   * itself has asked for a re-read of `parent` at `slot`; the caller only counts it.
   */
  applyChanges(
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
  ): Promise<ApplyVerdict>;
  /** A member of `parent` by its name account (base58), with the slot it was written at. */
  member(
    parent: string,
    account: string,
  ): Promise<{ label: string; owner: string; slot: number } | undefined>;
  /** Every member of `parent` by name account (the backstop's keys); undefined: no entry. */
  members(parent: string): Promise<Map<string, Member> | undefined>;
  /** The parent and subdomain name account of a subdomain or reverse-record account. */
  parentOfMember(account: string): Promise<{ parent: string; subdomain: string } | undefined>;
  /**
   * {@link parentOfMember} of each of `accounts`, in their order, in one round trip (the Deletes of
   * one transaction).
   */
  parentsOfMembers(
    accounts: readonly string[],
  ): Promise<Array<{ parent: string; subdomain: string } | undefined>>;
  /**
   * The parents the follower follows (the registry of cached parents): all of them, or with
   * `sinceMs` only those asked for or written at or after that time (Unix ms).
   */
  followedParents(sinceMs?: number): Promise<string[]>;
  /**
   * Records an existence check of `parent` read at `slot` and begun at `checkedAt`, under the
   * follow epoch `epoch`: the members whose name account is in `gone` are dropped (unless written
   * at a later slot), and the entry is known whole as of then if it was since the epoch (the
   * stream carried every addition since) and owes no re-read. Returns how many were dropped.
   */
  markChecked(
    parent: string,
    checkedAt: number,
    slot: number,
    gone: readonly string[],
    epoch: number,
  ): Promise<number>;
  /**
   * Records that a re-read of `parent` at `slot` is owed and cannot be made (the budget spent) or
   * may land after a heal vouches: the stream stops vouching for that entry alone until a scan
   * that far is stored. False when there is no entry.
   */
  markOwed(parent: string, slot: number): Promise<boolean>;
}

/** Time and timers, passed in so every unit is testable without waiting. */
export type Clock = {
  now(): number;
  /** Runs `fn` after `ms` milliseconds; returns what cancels it. Never holds the process open. */
  after(ms: number, fn: () => void): () => void;
};

/**
 * Runs `fn` every `ms` milliseconds on `clock` until the returned function is called; a run still
 * under way when the next is due is not overlapped (that beat is skipped). What a run throws or
 * rejects with goes to `onError`. The one scheduler of the follower and the worker's periodic
 * jobs: no unit keeps timers of its own.
 */
export function every(
  clock: Clock,
  ms: number,
  fn: () => unknown,
  onError: (err: unknown) => void,
): () => void {
  let running = false;
  let stopped = false;
  let cancel = () => {};
  const beat = () => {
    cancel = clock.after(ms, () => {
      if (stopped) return;
      if (!running) {
        running = true;
        void Promise.resolve()
          .then(fn)
          .catch(onError)
          .finally(() => (running = false));
      }
      beat();
    });
  };
  beat();
  return () => {
    stopped = true;
    cancel();
  };
}

/** The process's clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * One account of the name program written at `slot`, as a `programSubscribe` notification or a
 * gap read reports it. `head` is its data from byte 0 to the end of the scan's slice
 * ({@link import('./name-program.js').HEAD_SLICE}): the parent at 0..32, then the scan's slice; undefined
 * when the provider sent a length that is not ours (the change is then unknown).
 */
export type AccountNote = { slot: number; pubkey: string; head: Buffer | undefined };

/** Where the follower re-reads a parent: a refresh job at `minContextSlot` or later. */
export type Reread = (parent: string, minContextSlot: number | undefined) => void;
