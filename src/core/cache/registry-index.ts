import type { RedisClient } from '../redis.js';
import { redisKeys, type RedisKeys } from '../redis-keys.js';
import { isSlot } from '../rpc/slot.js';
import type { FollowStatus } from './follow-status.js';

/**
 * The registry index (docs/design.md, "The registry index"): every subdomain of the name program,
 * per parent key, in Redis. One hash per parent key (subdomain name account -> `slot|owner|label`),
 * one hash of accounts (subdomain and reverse record -> parent key, so a Delete finds its member),
 * the build's state and shards, and a journal of what the stream saw during a build for accounts no
 * piece had written yet.
 *
 * A member holds two facts, each known, unknown or deleted: the owner in the subdomain name
 * account's header (base58; `''` unknown; `-` the account is gone) and the label of its reverse
 * record (`+label`; `''` unknown; `-` gone). It is listed when both are known. Each member keeps the
 * slot of its newest fact: a fact at a lower slot never changes a known or deleted one (a late
 * notification, a piece read before a change), though it may fill an unknown one. A member whose
 * two facts are gone is a tombstone: it keeps a piece read before the deletion from bringing the
 * name back.
 */

/** What {@link RegistryIndex.apply} does with one fact. */
export type RegistryOp =
  /** A reverse record of `account` under `parentKey` names `label` (a subdomain's, proven). */
  | {
      op: 'label';
      slot: number;
      parentKey: string;
      account: string;
      reverse: string;
      label: string;
    }
  /** The name account `account` under `parentKey` is owned by `owner`. */
  | { op: 'owner'; slot: number; parentKey: string; account: string; owner: string }
  /** `account` (a name account or a reverse record) was deleted. */
  | { op: 'delete'; slot: number; account: string };

/** One member a bootstrap piece read: its reverse record's label and (when found) its owner. */
export type PieceMember = {
  parentKey: string;
  account: string;
  reverse: string;
  label: string;
  /** The name account's owner, or null when it does not exist (or is not under `parentKey`). */
  owner: string | null;
};

/** A listed subdomain: label, name account, owner. */
export type RegistryMember = { label: string; account: string; owner: string };

/** The state of the index's build. */
export type RegistryState = {
  /** The build's number (0: none started). */
  run: number;
  /** `behind`: the stream lost facts since; a new build is due. */
  status: 'none' | 'building' | 'complete' | 'behind';
  /** Shards of the run. */
  shards: number;
  /** Shards done. */
  done: number;
  /** When the run began (Unix ms): the stream must have missed nothing since. */
  startedAt: number;
  /** When it completed (Unix ms), 0 before. */
  completedAt: number;
};

/**
 * What the registry index is to a process (`/readyz`'s `index`, `sns_registry_state`):
 * - `serving`: built, and the stream has followed the whole program with no unhealed gap since
 *   the build began: every `/subdomains/:parent` is answered from it;
 * - `building`: a build runs (the per-parent path answers meanwhile);
 * - `unfollowed`: built, but the stream is not whole-program and healthy now;
 * - `behind`: the stream missed something since the build began: a rebuild is due;
 * - `none`: no build yet; `off`: `SUBDOMAIN_INDEX=parents`.
 */
export type RegistryServing = 'off' | 'none' | 'building' | 'serving' | 'unfollowed' | 'behind';

/** `sns_registry_state`'s value of each {@link RegistryServing}. */
export const REGISTRY_SERVING_VALUE: Readonly<Record<RegistryServing, number>> = Object.freeze({
  off: 0,
  none: 0,
  building: 1,
  serving: 2,
  unfollowed: 3,
  behind: 4,
});

/**
 * Decides whether the index answers, from its build's state and the follow status (both read from
 * Redis at most every `intervalMs`, one read in flight): complete, the stream whole-program and
 * healthy now, and its epoch (since when nothing was missed) no later than the build's start.
 */
export function registryServing(
  state: Pick<RegistryState, 'status' | 'startedAt'> | null,
  status: FollowStatus | null,
  now: number,
): RegistryServing {
  if (!state || state.status === 'none') return 'none';
  if (state.status === 'behind') return 'behind';
  if (status && status.epoch > state.startedAt) return 'behind';
  if (state.status === 'building') return 'building';
  if (!status || status.mode !== 'program' || now >= status.healthyUntil) return 'unfollowed';
  return 'serving';
}

/** Base58 characters of a parent key naming its hash, and of an account naming it in the index. */
export const ID_CHARS = 16;
/** Base58 characters of an account naming its bucket of the accounts index. */
export const BUCKET_CHARS = 2;

/** The id a parent key's hash is named by: its first {@link ID_CHARS} characters. */
export const parentIdOf = (parentKey: string): string => parentKey.slice(0, ID_CHARS);

const LUA_MEMBER = `
local R = ARGV[1]
local function pkey(pid) return R .. 'p:' .. pid end
local function bucket(acct) return R .. 'a:' .. string.sub(acct, 1, ${BUCKET_CHARS}) end
local function aget(acct)
  return redis.call('HGET', bucket(acct), string.sub(acct, ${BUCKET_CHARS + 1}, ${ID_CHARS}))
end
local function index_member(pid, acct, rev)
  redis.call('HSET', bucket(acct), string.sub(acct, ${BUCKET_CHARS + 1}, ${ID_CHARS}), pid)
  redis.call('HSET', bucket(rev), string.sub(rev, ${BUCKET_CHARS + 1}, ${ID_CHARS}),
    pid .. ' ' .. string.sub(acct, 1, ${ID_CHARS}))
end
-- The member of parent \`pid\` whose name account starts with \`prefix\` (a reverse record's entry
-- keeps that much of it): one field in the parent's hash.
local function find_sub(pid, prefix)
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', pkey(pid), cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
    cursor = r[1]
    if r[2][1] then return r[2][1] end
  until cursor == '0'
  return nil
end
local DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz'
local function b36(n)
  local out = ''
  repeat
    local r = n % 36
    out = string.sub(DIGITS, r + 1, r + 1) .. out
    n = math.floor(n / 36)
  until n == 0
  return out
end
local function parse(v)
  if not v then return nil end
  local s, o, l = string.match(v, '^(%w+)|([^|]*)|(.*)$')
  if not s then return nil end
  return { slot = tonumber(s, 36), owner = o, label = l }
end
local function encode(m)
  return b36(m.slot) .. '|' .. m.owner .. '|' .. m.label
end
local function listed(m)
  return m ~= nil and m.owner ~= '' and m.owner ~= '-' and string.sub(m.label, 1, 1) == '+'
end
-- A fact at \`slot\` for field \`f\` of member m: fills an unknown one whatever the slot, changes a
-- known or deleted one only from a slot no lower than the member's.
local function merge(m, f, value, slot)
  if m[f] == value then
    if slot > m.slot then m.slot = slot end
    return false
  end
  if m[f] ~= '' and slot < m.slot then return false end
  m[f] = value
  if slot > m.slot then m.slot = slot end
  return true
end
local function jslot(j) return j and tonumber(string.match(j, '^(%d+)|')) end
`;

/**
 * Facts from the stream. KEYS: 1 journal, 2 state. ARGV: 1 the index's prefix
 * (`<prefix>:registry:`), then six per fact: kind (L, O, D), slot, then L: parent id, account,
 * reverse, label; O: parent id, account, owner, ''; D: account, '', '', ''. Returns `{changed parent keys, accounts whose
 * owner is unknown}`.
 */
const APPLY = `${LUA_MEMBER}
local building = redis.call('HGET', KEYS[2], 'status') == 'building'
local changed, need, seen = {}, {}, {}
local function put(pk, acct, m, before)
  redis.call('HSET', pkey(pk), acct, encode(m))
  if listed(m) ~= before or listed(m) then
    if not seen[pk] then seen[pk] = true; changed[#changed + 1] = pk end
  end
end
local function journal(acct, value, slot)
  local js = jslot(redis.call('HGET', KEYS[1], acct))
  if js and js > slot then return end
  redis.call('HSET', KEYS[1], acct, value)
end
for i = 2, #ARGV, 6 do
  local kind, slot = ARGV[i], tonumber(ARGV[i + 1])
  local a, b, c, d = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if kind == 'L' then
    local pk, acct, rev, label = a, b, c, '+' .. d
    local m = parse(redis.call('HGET', pkey(pk), acct))
    local fresh = m == nil
    m = m or { slot = slot, owner = '', label = '' }
    local before = listed(m) and not fresh
    local moved = merge(m, 'label', label, slot)
    if m.owner == '' then
      local j = redis.call('HGET', KEYS[1], acct)
      local jp, jo = string.match(j or '', '^%d+|([^|]+)|(.+)$')
      if jp == pk then m.owner = jo; moved = true end
    end
    if moved or fresh then
      put(pk, acct, m, before)
      index_member(pk, acct, rev)
    else
      redis.call('HSET', pkey(pk), acct, encode(m))
    end
    if m.owner == '' and string.sub(m.label, 1, 1) == '+' then need[#need + 1] = acct end
  elseif kind == 'O' then
    local pk, acct, owner = a, b, c
    local m = parse(redis.call('HGET', pkey(pk), acct))
    if m then
      local before = listed(m)
      if merge(m, 'owner', owner, slot) then put(pk, acct, m, before)
      else redis.call('HSET', pkey(pk), acct, encode(m)) end
    elseif building then
      journal(acct, string.format('%.0f', slot) .. '|' .. pk .. '|' .. owner, slot)
    end
  elseif kind == 'D' then
    local acct = a
    local idx = aget(acct)
    local pk, sub, f
    if idx then
      local prefix
      pk, prefix = string.match(idx, '^(%S+) (%S+)$')
      f = 'label'
      if pk then sub = find_sub(pk, prefix) else pk, sub, f = idx, acct, 'owner' end
    end
    if sub then
      local m = parse(redis.call('HGET', pkey(pk), sub))
      if m then
        local before = listed(m)
        if merge(m, f, '-', slot) then put(pk, sub, m, before) end
      end
    elseif building then
      journal(acct, string.format('%.0f', slot) .. '|del', slot)
    end
  end
end
return { changed, need }
`;

/**
 * A bootstrap page. KEYS: 1 journal, 2 state, 3 the run's shards. ARGV: 1 the index's prefix, 2
 * run, 3 shard ('' while more pages follow), 4 the page's slot P, 5 the slot its
 * owners were read at Q, 6 now (ms), then five per member: parent key, account, reverse, label, owner ('' when
 * the name account is missing). Each member is written at P unless the stream wrote it at a later
 * slot (then only its unknown facts are filled); the journal's later facts win over the page's. A
 * shard given is marked done; the last one completes the build (status `complete`, the journal
 * deleted). Returns `{written, done}`, or `{-1, 0}` when `run` is not the current build.
 */
const APPLY_PIECE = `${LUA_MEMBER}
local state = redis.call('HMGET', KEYS[2], 'run', 'status', 'shards')
if state[1] ~= ARGV[2] or state[2] ~= 'building' then return { -1, 0 } end
local P_slot, Q_slot = tonumber(ARGV[4]), tonumber(ARGV[5])
local written = 0
for i = 7, #ARGV, 5 do
  local pk, acct, rev, label, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], '+' .. ARGV[i + 3], ARGV[i + 4]
  if owner == '' then owner = '-' end
  local ja = redis.call('HGET', KEYS[1], acct)
  local jr = redis.call('HGET', KEYS[1], rev)
  local jas = jslot(ja)
  if ja and string.match(ja, '|del$') and jas > P_slot then owner = '-' end
  local jp, jo = string.match(ja or '', '^%d+|([^|]+)|(.+)$')
  if jp == pk and jas > Q_slot then owner = jo end
  if jr and string.match(jr, '|del$') and jslot(jr) > P_slot then label = '-' end
  local m = parse(redis.call('HGET', pkey(pk), acct))
  if m and m.slot > P_slot then
    if m.owner == '' then m.owner = owner end
    if m.label == '' then m.label = label end
  else
    m = { slot = P_slot, owner = owner, label = label }
  end
  redis.call('HSET', pkey(pk), acct, encode(m))
  index_member(pk, acct, rev)
  written = written + 1
end
local done = redis.call('HLEN', KEYS[3])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  done = redis.call('HLEN', KEYS[3])
  if done >= tonumber(state[3]) then
    redis.call('HSET', KEYS[2], 'status', 'complete', 'completedAt', ARGV[6])
    redis.call('DEL', KEYS[1])
  end
end
return { written, done }
`;

/**
 * Starts build `run + 1` unless one is under way (or complete, when `force` is not set). KEYS: 1
 * state. ARGV: 1 shards, 2 now (ms), 3 force ('1' or ''). Returns the run under way or started,
 * and whether it was started now.
 */
const START = `
local s = redis.call('HMGET', KEYS[1], 'run', 'status')
local run = tonumber(s[1]) or 0
if s[2] == 'building' or (s[2] == 'complete' and ARGV[3] ~= '1') then return { run, 0 } end
run = run + 1
redis.call('HSET', KEYS[1], 'run', run, 'status', 'building', 'shards', ARGV[1],
  'startedAt', ARGV[2], 'completedAt', 0)
return { run, 1 }
`;

type Commands = {
  snsRegistryApply(...args: string[]): Promise<[string[], string[]]>;
  snsRegistryPiece(...args: string[]): Promise<[number, number]>;
  snsRegistryStart(...args: string[]): Promise<[number, number]>;
};

function commands(redis: RedisClient): Commands {
  const defined = redis as unknown as Partial<Commands>;
  if (!defined.snsRegistryApply) {
    redis.defineCommand('snsRegistryApply', { numberOfKeys: 2, lua: APPLY });
    redis.defineCommand('snsRegistryPiece', { numberOfKeys: 3, lua: APPLY_PIECE });
    redis.defineCommand('snsRegistryStart', { numberOfKeys: 1, lua: START });
  }
  return redis as unknown as Commands;
}

const slotArg = (slot: number): string => {
  if (!isSlot(slot)) throw new TypeError(`slot ${String(slot)} is not a slot`);
  return String(slot);
};

/**
 * The registry index in Redis under one deployment's prefix (see the file's comment for the
 * layout and the rules). Every write is one Lua script, atomic.
 */
export class RegistryIndex {
  private readonly keys: RedisKeys;
  private readonly commands: Commands;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = redisKeys(prefix);
    this.commands = commands(redis);
  }

  /**
   * Applies facts the stream (or a read it asked for) saw, in order, each slot-guarded per member.
   * A fact of an account no piece wrote yet is kept in the journal while a build runs (a name
   * account's owner, a deletion); after it, an owner of an account the index does not hold is
   * dropped (top-level names, records).
   *
   * @returns the parent ids ({@link parentIdOf}) whose listed subdomains changed, and the subdomain accounts whose
   *   label is known but owner unknown (the caller reads them).
   * @throws TypeError for a slot that is not one.
   */
  async apply(ops: readonly RegistryOp[]): Promise<{ changed: string[]; needOwner: string[] }> {
    if (ops.length === 0) return { changed: [], needOwner: [] };
    const args: string[] = [];
    for (const o of ops) {
      const slot = slotArg(o.slot);
      if (o.op === 'label') {
        args.push('L', slot, parentIdOf(o.parentKey), o.account, o.reverse, o.label);
      } else if (o.op === 'owner') {
        args.push('O', slot, parentIdOf(o.parentKey), o.account, o.owner, '');
      } else args.push('D', slot, o.account, '', '', '');
    }
    const [changed, needOwner] = await this.commands.snsRegistryApply(
      this.keys.registryJournal,
      this.keys.registryState,
      this.keys.registryPrefix,
      ...args,
    );
    return { changed, needOwner };
  }

  /**
   * Writes one page of a bootstrap piece of build `run`, read at `slot` (its owners at
   * `ownersSlot`); with `shard`, the piece is done (its last page), and the build completes with
   * its last shard.
   *
   * @returns how many members were written and shards are done, or null when `run` is not the
   *   build under way (a later one started, or it completed).
   */
  async writePiece(
    run: number,
    shard: string | undefined,
    slot: number,
    ownersSlot: number,
    members: readonly PieceMember[],
    now = Date.now(),
  ): Promise<{ written: number; done: number } | null> {
    const args: string[] = [];
    for (const m of members) {
      args.push(parentIdOf(m.parentKey), m.account, m.reverse, m.label, m.owner ?? '');
    }
    const [written, done] = await this.commands.snsRegistryPiece(
      this.keys.registryJournal,
      this.keys.registryState,
      this.keys.registryShards(run),
      this.keys.registryPrefix,
      String(run),
      shard ?? '',
      slotArg(slot),
      slotArg(Math.max(slot, ownersSlot)),
      String(now),
      ...args,
    );
    return written < 0 ? null : { written, done };
  }

  /**
   * Starts a build of `shards` pieces unless one is under way (or the index is complete and
   * `force` is not set: an index behind its stream is rebuilt with `force`).
   * @returns the build's number, and whether it started now.
   */
  async start(
    shards: number,
    force = false,
    now = Date.now(),
  ): Promise<{ run: number; started: boolean }> {
    const [run, started] = await this.commands.snsRegistryStart(
      this.keys.registryState,
      String(shards),
      String(now),
      force ? '1' : '',
    );
    return { run: Number(run), started: Number(started) === 1 };
  }

  /**
   * The stream lost facts (a full queue, a failed write): the index is no longer served, and the
   * next supervision starts a build anew.
   */
  async markBehind(now = Date.now()): Promise<void> {
    await this.redis.hset(this.keys.registryState, 'status', 'behind', 'behindAt', String(now));
  }

  /** The shards of build `run` done. */
  async shardsDone(run: number): Promise<string[]> {
    return this.redis.hkeys(this.keys.registryShards(run));
  }

  /** Whether shard `shard` of build `run` is done. */
  async shardDone(run: number, shard: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.registryShards(run), shard)) === 1;
  }

  /** The build's state (`none` before the first). */
  async state(): Promise<RegistryState> {
    const raw = await this.redis.hgetall(this.keys.registryState);
    const num = (v: string | undefined) => {
      const n = Number(v);
      return Number.isSafeInteger(n) && n >= 0 ? n : 0;
    };
    const run = num(raw.run);
    const status =
      raw.status === 'building' || raw.status === 'complete' || raw.status === 'behind'
        ? raw.status
        : 'none';
    const done = run > 0 ? await this.redis.hlen(this.keys.registryShards(run)) : 0;
    return {
      run,
      status,
      shards: num(raw.shards),
      done,
      startedAt: num(raw.startedAt),
      completedAt: num(raw.completedAt),
    };
  }

  /**
   * The listed subdomains of the parent whose name account is `parentKey` (base58), sorted by
   * label as answers list them, and the highest slot among its members (undefined: none).
   */
  async members(parentKey: string): Promise<{ members: RegistryMember[]; slot?: number }> {
    const raw = await this.redis.hgetall(this.keys.registryParent(parentIdOf(parentKey)));
    const members: RegistryMember[] = [];
    let slot: number | undefined;
    for (const [account, value] of Object.entries(raw)) {
      const m = parseValue(value);
      if (!m) continue;
      slot = Math.max(slot ?? m.slot, m.slot);
      if (m.owner === '' || m.owner === '-' || !m.label.startsWith('+')) continue;
      members.push({ label: m.label.slice(1), account, owner: m.owner });
    }
    members.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
    return slot === undefined ? { members } : { members, slot };
  }

  /**
   * One member as stored, listed or not (tests, the audit): its slot, owner (`''` unknown, `-`
   * gone) and label (`+label`, `''` unknown, `-` gone).
   */
  async member(
    parentKey: string,
    account: string,
  ): Promise<{ slot: number; owner: string; label: string } | null> {
    const raw = await this.redis.hget(this.keys.registryParent(parentIdOf(parentKey)), account);
    return raw === null ? null : parseValue(raw);
  }
}

function parseValue(value: string): { slot: number; owner: string; label: string } | null {
  const a = value.indexOf('|');
  const b = a < 0 ? -1 : value.indexOf('|', a + 1);
  if (b < 0) return null;
  const digits = value.slice(0, a);
  const slot = /^[0-9a-z]{1,11}$/.test(digits) ? Number.parseInt(digits, 36) : NaN;
  if (!isSlot(slot)) return null;
  return { slot, owner: value.slice(a + 1, b), label: value.slice(b + 1) };
}
