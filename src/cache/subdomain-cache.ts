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
 * An entry's JSON with `fetchedAt` first, so {@link PUT_IF_NEWER} reads it from the head of the
 * stored value without decoding a list of thousands of labels.
 */
function serialize(entry: CacheEntry): string {
  return JSON.stringify({ fetchedAt: entry.fetchedAt, labels: entry.labels, slot: entry.slot });
}

/**
 * KEYS[1] the entry's key; ARGV: the new entry's JSON, its `fetchedAt`, the expiry in
 * milliseconds. Keeps the stored entry when its `fetchedAt` is later (read from the head of the
 * JSON, or by decoding an entry written in another field order); writes otherwise. Returns 1 when
 * it wrote.
 */
const PUT_IF_NEWER = `
local current = redis.call('GET', KEYS[1])
if current then
  local at = tonumber(string.match(current, '^{"fetchedAt":(%d+)'))
  if not at then
    local ok, decoded = pcall(cjson.decode, current)
    if ok and type(decoded) == 'table' then at = tonumber(decoded.fetchedAt) end
  end
  if at and at > tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`;

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
   * `fetchedAt` wins), in one atomic step (a Lua script: a read then a write from here would let
   * an older entry overwrite a newer one written in between). Expires with the stale window.
   */
  async put(key: string, entry: CacheEntry): Promise<void> {
    await this.redis.eval(
      PUT_IF_NEWER,
      1,
      key,
      serialize(entry),
      String(entry.fetchedAt),
      String(this.staleMs),
    );
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
