import type { Reread } from './types.js';

/** Parents whose re-read at a slot is remembered at most; past it the oldest need is dropped. */
export const MAX_WANTED = 10_000;

export type RereadsDeps = {
  /** Queues the refresh job (deduplicated by BullMQ: it may join a scan already under way). */
  queue: Reread;
  /**
   * The slot of the last full scan stored for `parent`: undefined when the entry has none, null
   * when there is no entry (nothing left to correct).
   */
  scanSlotOf: (parent: string) => Promise<number | undefined | null>;
};

/**
 * Re-reads of parents at a slot, remembered until a scan that far is stored. A re-read queued
 * while a scan of the same parent is under way joins it (BullMQ deduplication), and that scan may
 * have read before the change; without this the change would wait for the next scan, which a
 * followed entry may never need (docs/design.md, "Freshness").
 */
export class Rereads {
  private readonly wanted = new Map<string, number>();

  constructor(private readonly deps: RereadsDeps) {}

  /** Parents with a re-read still owed. */
  get size(): number {
    return this.wanted.size;
  }

  /** Each parent with a re-read still owed, and the slot it must reach (a snapshot). */
  owed(): Array<[parent: string, slot: number]> {
    return [...this.wanted];
  }

  /** Queues a re-read of `parent` at `minContextSlot` or later, and remembers the slot. */
  want(parent: string, minContextSlot: number | undefined): void {
    this.deps.queue(parent, minContextSlot);
    if (minContextSlot === undefined) return;
    const owed = this.wanted.get(parent);
    this.wanted.delete(parent);
    this.wanted.set(parent, Math.max(owed ?? minContextSlot, minContextSlot));
    if (this.wanted.size > MAX_WANTED) {
      const oldest = this.wanted.keys().next().value;
      if (oldest !== undefined) this.wanted.delete(oldest);
    }
  }

  /**
   * One round: a parent whose stored scan reached its owed slot (or whose entry is gone) is
   * settled; the others are queued again.
   *
   * @throws what `scanSlotOf` throws (a Redis error): the round stops, the needs are kept.
   */
  async check(): Promise<void> {
    for (const [parent, slot] of [...this.wanted]) {
      const scanned = await this.deps.scanSlotOf(parent);
      if (scanned === null || (scanned !== undefined && scanned >= slot)) {
        if (this.wanted.get(parent) === slot) this.wanted.delete(parent);
        continue;
      }
      this.deps.queue(parent, slot);
    }
  }
}
