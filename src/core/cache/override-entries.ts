import type { RedisClient } from '../redis.js';
import type { RedisKeys } from '../redis-keys.js';
import { LuaScript, replyNumber } from '../lua-script.js';
import { isSlot } from '../rpc/slot.js';
import { entryArgs, type CacheEntry, type EntryAccounts, type Member } from './entry.js';

/** How override entries are kept: a short life and a budget of bytes of their own. */
export type OverrideBudget = {
  /** Expiry of an override's entry, in milliseconds (`RPC_OVERRIDE_CACHE_SECONDS`). */
  readonly ttlMs: number;
  /** Bytes all override entries may take together (`RPC_OVERRIDE_CACHE_BYTES`). */
  readonly maxBytes: number;
};

/** Writes an override's entry within the budget (src/core/lua/put-override-entry.lua). */
const PUT_OVERRIDE = new LuaScript(
  new URL('../lua/put-override-entry.lua', import.meta.url),
  replyNumber,
);

/**
 * The entries of `?rpc=` overrides (docs/design.md, "The subdomain cache"): each one JSON string,
 * labels and accounts inline, short-lived and never patched, all of them within one budget of
 * bytes. Written by the worker's override lane, read by the API.
 */
export class OverrideEntries {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly budget: OverrideBudget,
  ) {}

  /** The key of an override's entry: `<prefix>:subdomains:<endpoint id>:<parent>`. */
  key(endpointId: string, parent: string): string {
    return this.keys.subdomainEntry(endpointId, parent);
  }

  /**
   * The entry at `key` ({@link key}).
   * @returns null when absent or unreadable (treated as a miss).
   */
  async get(key: string): Promise<CacheEntry | null> {
    return parseEntry(await this.redis.get(key));
  }

  /**
   * Writes the entry of a `?rpc=` override unless the stored one is newer, as the split entries' put decides (an older slot, or with a slot unknown an
   * earlier fetchedAt, never replaces the stored one):
   * it expires after the override budget's `ttlMs`, and the oldest override entries are deleted
   * while all of them together take more than its `maxBytes`, so answers from servers anyone can
   * name never crowd out the configured endpoint's entries (a Redis at its `maxmemory` refuses
   * every write).
   */
  async put(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    const index = this.keys.overrideEntries;
    const rev = await PUT_OVERRIDE.run(
      this.redis,
      [this.key(endpointId, parent), index.byExpiry, index.sizes, index.bytes],
      [...entryArgs(entry), this.budget.ttlMs, now, this.budget.maxBytes],
    );
    return rev > 0 ? 'written' : 'kept';
  }
}

function parseEntry(raw: string | null): CacheEntry | null {
  if (raw === null) return null;
  try {
    const entry = JSON.parse(raw) as Record<string, unknown>;
    if (!Array.isArray(entry.labels) || typeof entry.fetchedAt !== 'number') return null;
    // A slot that is not one (never written: the write script refuses it) is none: the entry is
    // still served, and the next scan replaces it (the scripts do not honour it).
    for (const field of ['slot', 'scanSlot']) if (!isSlot(entry[field])) delete entry[field];
    if (typeof entry.scannedAt !== 'number') delete entry.scannedAt;
    if (entry.accounts !== undefined && !checkedAccounts(entry.accounts)) delete entry.accounts;
    return entry as CacheEntry;
  } catch {
    return null;
  }
}

/** `value` when it has the shape of {@link EntryAccounts}, else null. */
function checkedAccounts(value: unknown): EntryAccounts | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  for (const member of Object.values(value)) if (!isMember(member)) return null;
  return value as EntryAccounts;
}

const isMember = (value: unknown): value is Member =>
  Array.isArray(value) &&
  value.length === 2 &&
  typeof value[0] === 'string' &&
  typeof value[1] === 'string';
