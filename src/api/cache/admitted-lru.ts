import { LRUCache } from 'lru-cache';
import { Doorkeeper } from './doorkeeper.js';

/** Doorkeeper memory in LRU sizes: a key offered again within about that many others enters. */
const DOORKEEPER_WINDOW = 4;

/**
 * A bounded LRU admitting a key on its second offer ({@link Doorkeeper}), so a cold long tail
 * evicts nothing. Values are shared: never change them.
 */
export class AdmittedLru<V extends object> {
  private readonly entries: LRUCache<string, V>;
  private readonly doorkeeper: Doorkeeper;

  /** @param maxEntries entries kept (at least 1). */
  constructor(maxEntries: number) {
    this.entries = new LRUCache<string, V>({ max: maxEntries });
    this.doorkeeper = new Doorkeeper(maxEntries * DOORKEEPER_WINDOW);
  }

  /** The value kept for `key`, if any. */
  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  /**
   * Keeps `make()` for `key` if it was offered recently; `make` runs only then, so one-off keys
   * never render an answer.
   */
  offer(key: string, make: () => V): void {
    if (this.doorkeeper.seenBefore(key)) this.entries.set(key, make());
  }
}
