import { LRUCache } from 'lru-cache';
import { Doorkeeper } from './doorkeeper.js';

/**
 * How many distinct keys, in LRU sizes, the doorkeeper remembers before it forgets them all: a key
 * offered again within about that many other keys is admitted.
 */
const DOORKEEPER_WINDOW = 4;

/**
 * A bounded LRU that admits a key on its second offer ({@link Doorkeeper}): keys offered once,
 * most of a long tail of cold traffic, never evict anything. Values are shared between callers:
 * they must not be changed.
 */
export class AdmittedLru<V extends object> {
  private readonly entries: LRUCache<string, V>;
  private readonly doorkeeper: Doorkeeper;

  /** @param maxEntries entries kept (at least 1). */
  constructor(maxEntries: number) {
    this.entries = new LRUCache<string, V>({ max: maxEntries });
    this.doorkeeper = new Doorkeeper(maxEntries * DOORKEEPER_WINDOW);
  }

  /** The value kept for `key`, or `undefined`. */
  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  /**
   * Keeps the value `make` gives for `key` if `key` was offered before (recently, within the
   * doorkeeper's window). `make` is called only then: most offers are of keys asked for once, and
   * their values are never made (a batch of records would otherwise render an answer per record).
   */
  offer(key: string, make: () => V): void {
    if (this.doorkeeper.seenBefore(key)) this.entries.set(key, make());
  }
}
