import type { RedisClient } from '../redis.js';

/** One cached answer of `/subdomains` (DESIGN.md, "The subdomain cache"). */
export type CacheEntry = {
  /** Sorted subdomain labels; an empty list is an answer like any other. */
  readonly labels: readonly string[];
  /** When the worker finished the refresh, in Unix milliseconds. */
  readonly fetchedAt: number;
  /** The slot `getProgramAccounts` answered at, when the RPC said. */
  readonly slot?: number;
};

export type Freshness = 'fresh' | 'stale';

/**
 * The Redis store of subdomain lists, one string key per (endpoint, parent). Entries live
 * `CACHE_STALE_SECONDS` in Redis; within `CACHE_FRESH_SECONDS` of `fetchedAt` they are fresh.
 */
export class SubdomainCache {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly freshMs: number,
    private readonly staleMs: number,
  ) {}

  /**
   * The key of an (endpoint, parent) pair: `<prefix>:subdomains:<endpoint id>:<parent>`. The
   * endpoint id is a hash (never the URL); the parent is a normalized label.
   */
  key(endpointId: string, parent: string): string {
    return `${this.prefix}:subdomains:${endpointId}:${parent}`;
  }

  /** @returns the entry, or null when absent or unreadable (treated as a miss). */
  async get(key: string): Promise<CacheEntry | null> {
    const raw = await this.redis.get(key);
    if (raw === null) return null;
    try {
      const entry = JSON.parse(raw) as CacheEntry;
      return Array.isArray(entry.labels) && typeof entry.fetchedAt === 'number' ? entry : null;
    } catch {
      return null;
    }
  }

  /**
   * Writes an entry unless a newer one is already there (two refreshes may race; the later
   * `fetchedAt` wins). Expires with the stale window.
   */
  async put(key: string, entry: CacheEntry): Promise<void> {
    const current = await this.get(key);
    if (current && current.fetchedAt > entry.fetchedAt) return;
    await this.redis.set(key, JSON.stringify(entry), 'PX', this.staleMs);
  }

  /** Fresh until `CACHE_FRESH_SECONDS` after `fetchedAt`, then stale until it expires. */
  freshness(entry: CacheEntry, now = Date.now()): Freshness {
    return now - entry.fetchedAt < this.freshMs ? 'fresh' : 'stale';
  }

  /** Milliseconds of freshness left (0 once stale). */
  freshMsLeft(entry: CacheEntry, now = Date.now()): number {
    return Math.max(0, entry.fetchedAt + this.freshMs - now);
  }
}
