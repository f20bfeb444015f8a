import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/** One cached answer of `/subdomains` (docs/design.md, "The subdomain cache"). */
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
 * {@link PUT_IF_NEWER} for an override's entry, which also keeps every override entry within one
 * budget of bytes. KEYS[1] the entry's key, KEYS[2] the index (a sorted set of override entry keys
 * by expiry time), KEYS[3] their sizes (a hash), KEYS[4] the sum of those sizes. ARGV: the JSON,
 * its `fetchedAt`, the expiry in milliseconds, the time now in Unix milliseconds, the budget in
 * bytes. Entries past their expiry leave the index first; then, while the sum is over the budget,
 * the entry closest to its expiry is deleted. Every key it touches shares the prefix, which is a
 * hash tag on Redis Cluster, so they live in one slot. Returns 1 when it wrote.
 */
const PUT_OVERRIDE = `
local current = redis.call('GET', KEYS[1])
if current then
  local at = tonumber(string.match(current, '^{"fetchedAt":(%d+)'))
  if at and at > tonumber(ARGV[2]) then return 0 end
end
local now = tonumber(ARGV[4])
local function forget(key)
  local size = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  redis.call('HDEL', KEYS[3], key)
  redis.call('ZREM', KEYS[2], key)
  return redis.call('DECRBY', KEYS[4], size)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do forget(key) end
forget(KEYS[1])
local size = #ARGV[1] + #KEYS[1]
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], size)
local total = redis.call('INCRBY', KEYS[4], size)
while total > tonumber(ARGV[5]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest or oldest == KEYS[1] then break end
  redis.call('DEL', oldest)
  total = forget(oldest)
end
return 1
`;

/** How override entries are kept: a short life and a budget of bytes of their own. */
export type OverrideBudget = {
  /** Expiry of an override's entry, in milliseconds (`RPC_OVERRIDE_CACHE_SECONDS`). */
  readonly ttlMs: number;
  /** Bytes all override entries may take together (`RPC_OVERRIDE_CACHE_BYTES`). */
  readonly maxBytes: number;
};

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
    private readonly overrides: OverrideBudget = { ttlMs: staleMs, maxBytes: 32 * 1024 * 1024 },
  ) {}

  /**
   * The key of an (endpoint, parent) pair: `<prefix>:subdomains:<endpoint id>:<parent>`. The
   * endpoint id is a hash (never the URL); the parent is a normalized label.
   */
  key(endpointId: string, parent: string): string {
    return redisKeys(this.prefix).subdomainEntry(endpointId, parent);
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

  /**
   * {@link put} for the entry of a `?rpc=` override: it expires after the override budget's
   * `ttlMs`, and the oldest override entries are deleted while all of them together take more
   * than its `maxBytes`, so answers from servers anyone can name never crowd out the configured
   * endpoint's entries (a Redis at its `maxmemory` refuses every write).
   */
  async putOverride(key: string, entry: CacheEntry, now = Date.now()): Promise<void> {
    const index = redisKeys(this.prefix).overrideEntries;
    await this.redis.eval(
      PUT_OVERRIDE,
      4,
      key,
      index.byExpiry,
      index.sizes,
      index.bytes,
      serialize(entry),
      String(entry.fetchedAt),
      String(this.overrides.ttlMs),
      String(now),
      String(this.overrides.maxBytes),
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
