import type { Metrics } from '../../src/core/metrics.js';
import { toBase58 } from '../../src/core/sns/pda.js';
import type { Backstop } from './backstop.js';
import { ParentIndex } from './parent-index.js';
import type { Patcher } from './patcher.js';
import type { AccountNote, Clock, FollowStore } from './types.js';

/**
 * How often the parents asked for or written lately are read from the registry (one range read):
 * a parent's first entry is followed within this, and the replay buffer covers the wait.
 */
export const JOIN_EVERY_MS = 1_000;
/** How often the whole registry is read again (parents swept as idle are let go). */
export const RELOAD_EVERY_MS = 60_000;
/** How far before the last read a join reads: registry writes of other processes land a little late. */
const JOIN_OVERLAP_MS = 5_000;

export type FollowedParentsDeps = {
  store: Pick<FollowStore, 'followedParents'>;
  clock: Clock;
  metrics: Metrics;
  patcher: Pick<Patcher, 'notify' | 'forget'>;
  backstop: Pick<Backstop, 'add' | 'sync'>;
};

/**
 * The parents the follower follows (docs/design.md, "The registry of followed parents"): those
 * that join (the registry's recent writes, read every {@link JOIN_EVERY_MS}), those let go (the
 * whole registry, read every {@link RELOAD_EVERY_MS}), and where an account goes: to its parent's
 * patcher, or kept a while for a parent whose scan is under way (./parent-index.ts).
 */
export class FollowedParents {
  private readonly index: ParentIndex;
  /** When the registry was last read (Unix ms). */
  private joinedAt = 0;
  /** The parents of the last whole read: the patcher forgets those gone since. */
  private known = new Set<string>();

  constructor(private readonly deps: FollowedParentsDeps) {
    this.index = new ParentIndex(deps.clock);
  }

  /** Every followed parent. */
  parents(): Iterable<string> {
    return this.index.parents();
  }

  /** Follows `parent` now (its entry was just written); applies what was kept for it. */
  follow(parent: string): void {
    const replay = this.index.add(parent);
    this.deps.backstop.add(parent);
    this.deps.metrics.watchedParents.set(this.index.size);
    this.replay(parent, replay);
  }

  /** Follows the parents asked for or written since the last look (and a little before it). */
  async join(): Promise<void> {
    const since = this.joinedAt - JOIN_OVERLAP_MS;
    this.joinedAt = this.deps.clock.now();
    for (const parent of await this.deps.store.followedParents(since)) {
      if (!this.index.has(parent)) this.follow(parent);
    }
  }

  /** Reads the registry of cached parents again: the parents no longer in it are let go. */
  async reload(): Promise<void> {
    const { deps } = this;
    this.joinedAt = deps.clock.now();
    const parents = await deps.store.followedParents();
    for (const [parent, replay] of this.index.replace(parents)) this.replay(parent, replay);
    for (const parent of this.known) if (!this.index.has(parent)) deps.patcher.forget(parent);
    this.known = new Set(parents);
    deps.backstop.sync(this.index.parents());
    deps.metrics.watchedParents.set(this.index.size);
  }

  /**
   * Routes an account to its parent's patcher: by `parentKey` (a per-parent subscription, a gap
   * read) or by its head's first 32 bytes; an account under no followed parent is kept a while.
   */
  route(note: AccountNote, parentKey: string | undefined): void {
    // A provider that ignored the `dataSlice` sent the whole account: its first bytes are the head.
    const head = note.head ?? undefined;
    const key =
      parentKey ?? (head && head.length >= 32 ? toBase58(head.subarray(0, 32)) : undefined);
    if (key === undefined) return;
    const parent = this.index.parentOf(key);
    if (parent === undefined) {
      // Not followed (yet): kept a while for a parent whose scan is under way.
      this.index.keep(key, note);
      return;
    }
    this.deps.patcher.notify(parent, key, note);
  }

  /** The stream no longer owned: the patcher lets go of every parent's queue. */
  forgetAll(): void {
    for (const parent of this.index.parents()) this.deps.patcher.forget(parent);
  }

  private replay(parent: string, notes: Iterable<AccountNote>): void {
    const key = this.index.keyOfParent(parent);
    if (key !== undefined) for (const note of notes) this.deps.patcher.notify(parent, key, note);
  }
}
