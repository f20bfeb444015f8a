import { domainKey, toBase58 } from '../../src/core/sns/pda.js';
import type { AccountNote, Clock } from './types.js';

/** How long a notification for no followed parent is kept for a parent that joins late. */
export const REPLAY_MS = 30_000;
/** The most notifications kept for replay, whatever their age. */
export const REPLAY_MAX = 10_000;

/**
 * The followed parents by parent key (base58 of the parent's name account, bytes 0..32 of every
 * account under it), so the whole-program stream picks the notifications of followed parents in
 * process with one map lookup each; everything else costs no RPC call.
 *
 * A parent joins when the registry is loaded ({@link replace}, periodically) or when a refresh
 * writes its entry ({@link add}, from the refresh events). Its scan may have begun before the
 * follower knew it: notifications of its accounts meanwhile were for no followed parent, so the
 * index keeps the last {@link REPLAY_MS} of such notifications ({@link REPLAY_MAX} at most, the
 * oldest dropped first) and hands them back when the parent joins ({@link add} returns them).
 */
export class ParentIndex {
  private readonly byKey = new Map<string, string>();
  private readonly keyOf = new Map<string, string>();
  /** Notifications for no followed parent, oldest first, with their parent key and arrival. */
  private replay: Array<{ at: number; parentKey: string; note: AccountNote }> = [];
  /** Index of the first live element of {@link replay} (dropped ones are cut in bulk). */
  private head = 0;

  constructor(private readonly clock: Clock) {}

  get size(): number {
    return this.byKey.size;
  }

  /** The followed parent whose key is `parentKey`, or undefined. */
  parentOf(parentKey: string): string | undefined {
    return this.byKey.get(parentKey);
  }

  /** The key of a followed parent. */
  keyOfParent(parent: string): string | undefined {
    return this.keyOf.get(parent);
  }

  has(parent: string): boolean {
    return this.keyOf.has(parent);
  }

  parents(): IterableIterator<string> {
    return this.keyOf.keys();
  }

  /**
   * Follows `parent`. Returns the notifications kept for its key that arrived within
   * {@link REPLAY_MS} (oldest first), for the caller to apply: empty when it was followed already.
   */
  add(parent: string): AccountNote[] {
    if (this.keyOf.has(parent)) return [];
    const key = toBase58(domainKey(parent));
    this.byKey.set(key, parent);
    this.keyOf.set(parent, key);
    this.expire();
    const out: AccountNote[] = [];
    for (let i = this.head; i < this.replay.length; i++) {
      const kept = this.replay[i];
      if (kept?.parentKey === key) out.push(kept.note);
    }
    return out;
  }

  /** Stops following `parent`. */
  remove(parent: string): void {
    const key = this.keyOf.get(parent);
    if (key === undefined) return;
    this.keyOf.delete(parent);
    this.byKey.delete(key);
  }

  /**
   * Makes the followed set `parents` (a reload of the registry): removes the others and adds the
   * new ones. Returns the new ones with their replayed notifications.
   */
  replace(parents: Iterable<string>): Array<[parent: string, replay: AccountNote[]]> {
    const want = new Set(parents);
    for (const parent of [...this.keyOf.keys()]) if (!want.has(parent)) this.remove(parent);
    const added: Array<[string, AccountNote[]]> = [];
    for (const parent of want) {
      if (!this.keyOf.has(parent)) added.push([parent, this.add(parent)]);
    }
    return added;
  }

  /** Keeps a notification for `parentKey`, followed by no one now, for {@link REPLAY_MS}. */
  keep(parentKey: string, note: AccountNote): void {
    this.replay.push({ at: this.clock.now(), parentKey, note });
    if (this.replay.length - this.head > REPLAY_MAX) this.head++;
    this.expire();
  }

  /** Notifications kept now (for the memory bound's tests). */
  get kept(): number {
    this.expire();
    return this.replay.length - this.head;
  }

  private expire(): void {
    const oldest = this.clock.now() - REPLAY_MS;
    while (this.head < this.replay.length && (this.replay[this.head]?.at ?? 0) < oldest)
      this.head++;
    // Cut the dropped prefix in bulk: amortised O(1) per notification.
    if (this.head > 1024 && this.head * 2 > this.replay.length) {
      this.replay = this.replay.slice(this.head);
      this.head = 0;
    }
  }
}
