import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';
import { isSlot } from '../rpc/slot.js';

/** One cached answer of `/subdomains` (docs/design.md, "The subdomain cache"). */
export type CacheEntry = {
  /** Sorted subdomain labels; an empty list is an answer like any other. */
  readonly labels: readonly string[];
  /** When the answer was last known whole (a scan, or a deletion check), in Unix milliseconds. */
  readonly fetchedAt: number;
  /** The slot the answer reflects (`withContext`), when the RPC said. */
  readonly slot?: number;
  /** How many times the stored entry was written; what {@link SubdomainCache.patch} compares. */
  readonly rev?: number;
  /**
   * The slot of the last full scan (`getProgramAccounts`) behind the labels: `slot` also moves
   * with patches and deletion checks, this only with scans.
   */
  readonly scanSlot?: number;
  /** When that scan began, in Unix milliseconds. */
  readonly scannedAt?: number;
  /**
   * The name accounts behind the labels, inside the entry: for `?rpc=` overrides, whose entries
   * live apart (short-lived, within a byte budget); the configured endpoint keeps them beside
   * the entry (see {@link SubdomainCache.getWithAccounts}).
   */
  readonly accounts?: EntryAccounts;
};

/** What the cache knows of one subdomain: its label, and the owner in its name account's header. */
export type Member = readonly [label: string, owner: string];

/**
 * The name accounts behind an entry's labels: subdomain name account (base58) -> its label and
 * owner (base58). Kept beside the configured endpoint's entries, so deletions are checked account
 * by account (docs/design.md, "Freshness") and answers can carry keys and owners.
 */
export type EntryAccounts = Readonly<Record<string, Member>>;

/** The labels of `accounts`, sorted as answers list them. */
export const labelsOf = (accounts: EntryAccounts): string[] =>
  Object.values(accounts)
    .map((m) => m[0])
    .sort();

export type Freshness = 'fresh' | 'stale';

/** What a conditional write did. */
export type WriteOutcome = 'written' | 'kept' | 'conflict' | 'missing';

/**
 * Lua shared by the scripts. An entry is stored as `{"slot":S,"rev":R,"fetchedAt":T,"labels":[..]}`
 * in that order, so `head(raw)` reads what the scripts compare from the head of the value without
 * decoding thousands of labels; an entry in another layout (an older release, a null slot) is
 * decoded. `older(...)` says whether a new entry would take the stored one back in time: a lower
 * slot when both slots are known, else an earlier fetchedAt; `next_rev(key, slot, at, ceiling)` the
 * revision a write of that entry gets, or nil when the stored one is newer.
 *
 * Slots are checked as `isSlot` (src/core/rpc/slot.ts) checks them. A write whose slot or fetchedAt is
 * not one is refused with an error (the callers check first; this keeps `Infinity` or a float past
 * 2^53 out of the store whatever a caller does). A stored entry whose slot is not one (cjson reads
 * `Infinity`, which JSON.parse refuses), whose fetchedAt is not finite, or whose slot is past
 * `ceiling` (the highest slot the chain can have reached, when the caller knows it) holds no write
 * back: it would otherwise refuse every scan, for as long as it lives.
 */
const LUA_ENTRY = `
local MAX_SLOT = 9007199254740991
local function is_slot(v)
  return type(v) == 'number' and v >= 0 and v <= MAX_SLOT and math.floor(v) == v
end
local function arg_slot(s)
  if s == 'null' then return nil end
  if #s <= 16 and string.match(s, '^%d+$') and is_slot(tonumber(s)) then return tonumber(s) end
  return false
end
local function bad_args(slot, at)
  if arg_slot(slot) == false or not is_slot(tonumber(at)) then
    return redis.error_reply('ERR entry slot or fetchedAt is not a safe integer')
  end
end
local function head(raw)
  local s, r, a = string.match(raw, '^{"slot":(%d+),"rev":(%d+),"fetchedAt":(%d+)')
  local slot, rev, at
  if a then
    slot, rev, at = tonumber(s), tonumber(r), tonumber(a)
  else
    local ok, d = pcall(cjson.decode, raw)
    if not ok or type(d) ~= 'table' then return nil, 0, nil, false end
    local function num(v) if type(v) == 'number' then return v end return nil end
    slot, rev, at = num(d.slot), num(d.rev), num(d.fetchedAt)
  end
  local sound = (slot == nil or is_slot(slot)) and (at == nil or is_slot(at))
  if not is_slot(rev) then rev = 0 end
  return slot, rev, at, sound
end
local function older(cslot, cat, slot, at)
  if cslot and slot and cslot ~= slot then return slot < cslot end
  return cat ~= nil and at < cat
end
local function entry(slot, rev, at, rest)
  return '{"slot":' .. slot .. ',"rev":' .. rev .. ',"fetchedAt":' .. at .. ',' .. rest
end
local function next_rev(key, slot, at, ceiling)
  local current = redis.call('GET', key)
  if not current then return 1 end
  local cslot, crev, cat, sound = head(current)
  if not sound or (ceiling and cslot and cslot > ceiling) then return crev + 1 end
  if older(cslot, cat, slot, at) then return nil end
  return crev + 1
end
`;

/**
 * KEYS[1] the entry, KEYS[2] its accounts. ARGV: the new entry's slot ('null' when unknown), its
 * fetchedAt, the rest of its JSON after the head, the expiry in milliseconds, the accounts' JSON
 * ('' to leave none), the ceiling ('' when unknown). Keeps the stored entry when the new one is
 * older (`older`); writes otherwise, both keys in one step. Returns the new revision, or 0 when it
 * kept the stored entry.
 */
const PUT_IF_NEWER = `${LUA_ENTRY}
local refused = bad_args(ARGV[1], ARGV[2])
if refused then return refused end
local rev = next_rev(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6]))
if not rev then return 0 end
redis.call('SET', KEYS[1], entry(ARGV[1], rev, ARGV[2], ARGV[3]), 'PX', ARGV[4])
if ARGV[5] ~= '' then redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[4])
else redis.call('DEL', KEYS[2]) end
return rev
`;

/**
 * KEYS[1] the entry, KEYS[2] its accounts. ARGV: the revision the change was computed from, then
 * as {@link PUT_IF_NEWER}. Writes only while the stored entry is still that revision (an
 * optimistic compare-and-set: the caller read, changed, and writes back). Returns the new
 * revision, 0 when the entry changed meanwhile, -1 when there is none (expired: nothing to patch).
 */
const PATCH = `${LUA_ENTRY}
local refused = bad_args(ARGV[2], ARGV[3])
if refused then return refused end
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
local _, rev = head(current)
if rev ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], entry(ARGV[2], rev + 1, ARGV[3], ARGV[4]), 'PX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[6], 'PX', ARGV[5])
return rev + 1
`;

/**
 * {@link PUT_IF_NEWER} for an override's entry, which also keeps every override entry within one
 * budget of bytes. KEYS[1] the entry's key, KEYS[2] the index (a sorted set of override entry keys
 * by expiry time), KEYS[3] their sizes (a hash), KEYS[4] the sum of those sizes. ARGV: the new
 * entry's slot, its fetchedAt, the rest of its JSON, the expiry in milliseconds, the time now in
 * Unix milliseconds, the budget in bytes. Entries past their expiry leave the index first; then,
 * while the sum is over the budget, the entry closest to its expiry is deleted. Every key it
 * touches shares the prefix, which is a hash tag on Redis Cluster, so they live in one slot.
 * Returns the new revision, or 0 when it kept the stored entry.
 */
const PUT_OVERRIDE = `${LUA_ENTRY}
local refused = bad_args(ARGV[1], ARGV[2])
if refused then return refused end
local rev = next_rev(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), nil)
if not rev then return 0 end
local now = tonumber(ARGV[5])
local function forget(key)
  local size = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  redis.call('HDEL', KEYS[3], key)
  redis.call('ZREM', KEYS[2], key)
  return redis.call('DECRBY', KEYS[4], size)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do forget(key) end
forget(KEYS[1])
local value = entry(ARGV[1], rev, ARGV[2], ARGV[3])
local size = #value + #KEYS[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], size)
local total = redis.call('INCRBY', KEYS[4], size)
while total > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest or oldest == KEYS[1] then break end
  redis.call('DEL', oldest)
  total = forget(oldest)
end
return rev
`;

/** The scripts as commands of the connection (`defineCommand`: EVALSHA, the text sent once). */
type EntryCommands = {
  snsPutEntry(...args: string[]): Promise<number>;
  snsPatchEntry(...args: string[]): Promise<number>;
  snsPutOverrideEntry(...args: string[]): Promise<number>;
};

function entryCommands(redis: RedisClient): EntryCommands {
  const commands = redis as unknown as Partial<EntryCommands>;
  if (!commands.snsPutEntry) {
    redis.defineCommand('snsPutEntry', { numberOfKeys: 2, lua: PUT_IF_NEWER });
    redis.defineCommand('snsPatchEntry', { numberOfKeys: 2, lua: PATCH });
    redis.defineCommand('snsPutOverrideEntry', { numberOfKeys: 4, lua: PUT_OVERRIDE });
  }
  return redis as unknown as EntryCommands;
}

/**
 * The head and the rest of an entry's stored JSON, as the scripts take them.
 *
 * @throws TypeError when `slot` or `scanSlot` is not a slot ({@link isSlot}) or `fetchedAt` not a
 *   safe integer: such a value is never stored (the scripts refuse it too).
 */
function entryArgs(entry: CacheEntry): [slot: string, fetchedAt: string, rest: string] {
  for (const field of ['slot', 'scanSlot'] as const) {
    const value: number | undefined = entry[field];
    if (value !== undefined && !isSlot(value)) {
      throw new TypeError(`${field} ${String(value)} is not a slot`);
    }
  }
  const at: number = entry.fetchedAt;
  if (!isSlot(at)) throw new TypeError(`fetchedAt ${String(at)} is not a time`);
  return [
    entry.slot === undefined ? 'null' : String(entry.slot),
    String(entry.fetchedAt),
    JSON.stringify({
      scanSlot: entry.scanSlot,
      scannedAt: entry.scannedAt,
      accounts: entry.accounts,
      labels: entry.labels,
    }).slice(1),
  ];
}

/** How override entries are kept: a short life and a budget of bytes of their own. */
export type OverrideBudget = {
  /** Expiry of an override's entry, in milliseconds (`RPC_OVERRIDE_CACHE_SECONDS`). */
  readonly ttlMs: number;
  /** Bytes all override entries may take together (`RPC_OVERRIDE_CACHE_BYTES`). */
  readonly maxBytes: number;
};

const outcome = (rev: number): WriteOutcome =>
  rev > 0 ? 'written' : rev === 0 ? 'conflict' : 'missing';

/**
 * The Redis store of subdomain lists, one string key per (endpoint, parent), and beside the
 * configured endpoint's entries the name accounts behind their labels. Entries live
 * `CACHE_STALE_SECONDS` in Redis; within `CACHE_FRESH_SECONDS` of `fetchedAt` they are fresh. No
 * write takes an entry back to an older slot.
 */
export class SubdomainCache {
  private readonly commands: EntryCommands;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly freshMs: number,
    private readonly staleMs: number,
    private readonly overrides: OverrideBudget = { ttlMs: staleMs, maxBytes: 32 * 1024 * 1024 },
  ) {
    this.commands = entryCommands(redis);
  }

  /**
   * The key of an (endpoint, parent) pair: `<prefix>:subdomains:<endpoint id>:<parent>`. The
   * endpoint id is a hash (never the URL); the parent is a normalized label.
   */
  key(endpointId: string, parent: string): string {
    return redisKeys(this.prefix).subdomainEntry(endpointId, parent);
  }

  /** The key of the accounts behind the entry of (endpoint, parent). */
  accountsKey(endpointId: string, parent: string): string {
    return redisKeys(this.prefix).subdomainAccounts(endpointId, parent);
  }

  /** @returns the entry, or null when absent or unreadable (treated as a miss). */
  async get(key: string): Promise<CacheEntry | null> {
    return parseEntry(await this.redis.get(key));
  }

  /**
   * The entry of (endpoint, parent) with the accounts behind its labels, read in one step.
   * @returns null without an entry; `accounts` null when none are kept (an older release wrote
   *   the entry, or they were unreadable).
   */
  async getWithAccounts(
    endpointId: string,
    parent: string,
  ): Promise<{ entry: CacheEntry; accounts: EntryAccounts | null } | null> {
    const [rawEntry, rawAccounts] = await this.redis.mget(
      this.key(endpointId, parent),
      this.accountsKey(endpointId, parent),
    );
    const entry = parseEntry(rawEntry ?? null);
    if (!entry) return null;
    return { entry, accounts: parseAccounts(rawAccounts ?? null) };
  }

  /**
   * Writes the entry of (endpoint, parent) unless the stored one is newer: read at a later slot,
   * or (when a slot is unknown) fetched later. Two refreshes may race and a lagging node may
   * answer from an older slot; neither takes the answer back. One atomic step (a Lua script), the
   * accounts with it. Expires with the stale window.
   *
   * @param accounts the name accounts behind the labels; without them the stored ones are
   *   deleted, so the two never disagree.
   * @param ceiling the highest slot the chain can have reached now (`SlotClock.ceiling`), when
   *   known: a stored entry whose slot is past it (stored from a bad notification, or by an
   *   earlier release) is replaced whatever this entry's slot, so it cannot hold scans back.
   * @returns 'written', or 'kept' when the stored entry was newer.
   * @throws TypeError for an entry whose slots are not slots (see `entryArgs`).
   */
  async put(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    accounts?: EntryAccounts,
    ceiling?: number,
  ): Promise<WriteOutcome> {
    const rev = await this.commands.snsPutEntry(
      this.key(endpointId, parent),
      this.accountsKey(endpointId, parent),
      ...entryArgs(entry),
      String(this.staleMs),
      accounts ? JSON.stringify(accounts) : '',
      isSlot(ceiling) ? String(ceiling) : '',
    );
    return rev > 0 ? 'written' : 'kept';
  }

  /**
   * Writes a changed entry and its accounts only if the stored entry is still revision `rev` (the
   * one the change was computed from): an optimistic compare-and-set, for changes computed from
   * what is stored (a notification's patch, a deletion check).
   *
   * @returns 'written'; 'conflict' when the entry changed meanwhile (read again and retry);
   *   'missing' when it is gone (expired: nothing to patch).
   */
  async patch(
    endpointId: string,
    parent: string,
    rev: number,
    entry: CacheEntry,
    accounts: EntryAccounts,
  ): Promise<WriteOutcome> {
    const next = await this.commands.snsPatchEntry(
      this.key(endpointId, parent),
      this.accountsKey(endpointId, parent),
      String(rev),
      ...entryArgs(entry),
      String(this.staleMs),
      JSON.stringify(accounts),
    );
    return outcome(next);
  }

  /**
   * {@link put} for the entry of a `?rpc=` override: it expires after the override budget's
   * `ttlMs`, and the oldest override entries are deleted while all of them together take more
   * than its `maxBytes`, so answers from servers anyone can name never crowd out the configured
   * endpoint's entries (a Redis at its `maxmemory` refuses every write).
   */
  async putOverride(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    now = Date.now(),
  ): Promise<WriteOutcome> {
    const index = redisKeys(this.prefix).overrideEntries;
    const rev = await this.commands.snsPutOverrideEntry(
      this.key(endpointId, parent),
      index.byExpiry,
      index.sizes,
      index.bytes,
      ...entryArgs(entry),
      String(this.overrides.ttlMs),
      String(now),
      String(this.overrides.maxBytes),
    );
    return rev > 0 ? 'written' : 'kept';
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

function parseEntry(raw: string | null): CacheEntry | null {
  if (raw === null) return null;
  try {
    const entry = JSON.parse(raw) as Record<string, unknown>;
    if (!Array.isArray(entry.labels) || typeof entry.fetchedAt !== 'number') return null;
    // A slot that is not one (an earlier release stored what the provider sent) is none: the
    // entry is still served, and the next scan replaces it (the scripts do not honour it).
    for (const field of ['slot', 'scanSlot']) if (!isSlot(entry[field])) delete entry[field];
    if (typeof entry.scannedAt !== 'number') delete entry.scannedAt;
    if (entry.accounts !== undefined && !checkedAccounts(entry.accounts)) delete entry.accounts;
    return entry as CacheEntry;
  } catch {
    return null;
  }
}

/**
 * The accounts beside an entry, or null when absent or not of the shape written here (every value
 * a `[label, owner]` pair of strings): a value of another shape, from another release or by hand,
 * would otherwise be read as labels and owners, and patched back into the entry. Null makes the
 * watcher read the parent again, which writes them anew.
 */
function parseAccounts(raw: string | null): EntryAccounts | null {
  if (raw === null) return null;
  try {
    return checkedAccounts(JSON.parse(raw) as unknown);
  } catch {
    return null;
  }
}

/** `value` when it has the shape of {@link EntryAccounts}, else null (see {@link parseAccounts}). */
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
