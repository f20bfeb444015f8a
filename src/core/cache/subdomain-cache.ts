import type { RedisClient } from '../redis.js';
import { redisKeys, type RedisKeys } from '../redis-keys.js';
import type { RpcEndpoint } from '../rpc/endpoint.js';
import { isSlot } from '../rpc/slot.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../sns/pda.js';
import { followedFresh, type FollowStatus } from './follow-status.js';
import {
  LuaScript,
  replyList,
  replyNumber,
  replyString,
  replyStringsOrNull,
} from '../lua-script.js';

/** One cached answer of `/subdomains` (docs/design.md, "The subdomain cache"). */
export type CacheEntry = {
  /** Sorted subdomain labels; an empty list is an answer like any other. */
  readonly labels: readonly string[];
  /** When the answer was last known whole (a scan, or a deletion check), in Unix milliseconds. */
  readonly fetchedAt: number;
  /** The slot the answer reflects (`withContext`), when the RPC said. */
  readonly slot?: number;
  /**
   * How many times the stored entry changed (a scan, a change applied, a check): with `fetchedAt`
   * and `slot` it names a revision (`rev` starts again at 1 when an expired entry is written anew).
   */
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
   * are one JSON string (short-lived, within a byte budget); the configured endpoint keeps them in
   * the entry's members hash (see {@link SubdomainCache.getWithAccounts}).
   */
  readonly accounts?: EntryAccounts;
};

/** What the cache knows of one subdomain: its label, and the owner in its name account's header. */
export type Member = readonly [label: string, owner: string];

/**
 * The name accounts behind an entry's labels: subdomain name account (base58) -> its label and
 * owner (base58). Kept with the configured endpoint's entries (a hash, each member with the slot it
 * was written at), so changes and deletions are applied account by account (docs/design.md,
 * "Freshness") and answers can carry keys and owners.
 */
export type EntryAccounts = Readonly<Record<string, Member>>;

/** The labels of `accounts`, sorted as answers list them. */
export const labelsOf = (accounts: EntryAccounts): string[] =>
  Object.values(accounts)
    .map((m) => m[0])
    .sort();

export type Freshness = 'fresh' | 'stale';

/** One of `outcomes`, as a script replied it. @throws TypeError for anything else. */
function outcomeOf<O extends string>(raw: unknown, outcomes: readonly O[]): O {
  const found = outcomes.find((o) => o === raw);
  if (found === undefined) throw new TypeError(`a script replied the outcome ${String(raw)}`);
  return found;
}

/** The Lua scripts of the store, in src/core/lua/ (each file says its KEYS, ARGV and reply). */
const SCRIPTS = {
  putOverride: new LuaScript(
    new URL('../lua/put-override-entry.lua', import.meta.url),
    replyNumber,
  ),
  putSplit: new LuaScript(new URL('../lua/put-split-entry.lua', import.meta.url), replyNumber),
  applyChanges: new LuaScript(
    new URL('../lua/apply-changes.lua', import.meta.url),
    (raw): ApplyOutcome => {
      const [outcome, rev] = replyList(raw);
      return {
        outcome: outcomeOf(outcome, ['written', 'unchanged', 'missing'] as const),
        rev: replyNumber(rev),
      };
    },
  ),
  markChecked: new LuaScript(
    new URL('../lua/mark-checked.lua', import.meta.url),
    (raw): CheckOutcome => {
      const [outcome, rev, dropped] = replyList(raw);
      return {
        outcome: outcomeOf(outcome, ['written', 'missing'] as const),
        rev: replyNumber(rev),
        dropped: replyNumber(dropped),
      };
    },
  ),
  touch: new LuaScript(new URL('../lua/touch-entry.lua', import.meta.url), replyNumber),
  getSplit: new LuaScript(
    new URL('../lua/get-split-entry.lua', import.meta.url),
    replyStringsOrNull,
  ),
  getSplitMembers: new LuaScript(
    new URL('../lua/get-split-members.lua', import.meta.url),
    replyStringsOrNull,
  ),
  sweepParents: new LuaScript(new URL('../lua/sweep-parents.lua', import.meta.url), (raw) => {
    const [removed, more] = replyList(raw);
    return { removed: replyNumber(removed), more: replyNumber(more) === 1 };
  }),
  sweepIndex: new LuaScript(new URL('../lua/sweep-index.lua', import.meta.url), (raw) => {
    const [cursor, dropped] = replyList(raw);
    return { cursor: replyString(cursor), dropped: replyNumber(dropped) };
  }),
};

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

/** One change to one member of a parent's entry, as {@link SubdomainCache.applyChanges} takes it. */
export type MemberChange = {
  /** The subdomain name account (base58). */
  readonly account: string;
  /** Its reverse record (base58): kept in the member-parents index beside the account. */
  readonly reverse: string;
  /** The member as it is now, or null when it is gone (deleted). */
  readonly member: Member | null;
};

/**
 * What a change did: 'written': something changed (revision bumped); 'unchanged': every change was
 * already there or older than its member; 'missing': no entry (or one written without its members).
 */
export type ApplyVerdict = 'written' | 'unchanged' | 'missing';

/** What {@link SubdomainCache.applyChanges} did, and the entry's revision after it. */
export type ApplyOutcome = {
  readonly outcome: ApplyVerdict;
  readonly rev: number;
};

/** What {@link SubdomainCache.markChecked} did. */
export type CheckOutcome = {
  readonly outcome: 'written' | 'missing';
  readonly rev: number;
  /** Members dropped (accounts found gone). */
  readonly dropped: number;
};

/** A member as stored: its label, owner, and the slot it was last written at. */
export type StoredMember = {
  readonly label: string;
  readonly owner: string;
  readonly slot: number;
};

/** Which parent lists an account (a subdomain name account, or its reverse record). */
export type MemberParent = {
  readonly parent: string;
  /** The subdomain name account: `account` itself, or the one whose reverse record it is. */
  readonly subdomain: string;
};

/** A followed parent and when it was last asked for or scanned (Unix ms). */
export type FollowedParent = { readonly parent: string; readonly usedAt: number };

/** How override entries are kept: a short life and a budget of bytes of their own. */
export type OverrideBudget = {
  /** Expiry of an override's entry, in milliseconds (`RPC_OVERRIDE_CACHE_SECONDS`). */
  readonly ttlMs: number;
  /** Bytes all override entries may take together (`RPC_OVERRIDE_CACHE_BYTES`). */
  readonly maxBytes: number;
};

/**
 * How much longer than `CACHE_STALE` the keys of a configured endpoint's entry live, at most (a
 * tenth of `CACHE_STALE` when that is less): the sweep (every minute) removes a parent idle past
 * `CACHE_STALE` with its member-parents fields, which it can find only while the members' hash is
 * still there.
 */
export const SWEEP_GRACE_MS = 5 * 60_000;
/** Parents and members one sweep call removes at most (one Lua script holds Redis meanwhile). */
const SWEEP_PARENTS = 200;
const SWEEP_MEMBERS = 20_000;

/** From this many members a put looks their reverse records up in the index before deriving them. */
const REVERSE_LOOKUP_FROM = 64;
/** Fields per HMGET of that lookup. */
const REVERSE_LOOKUP_BATCH = 5_000;

/** The separator between a label and its account in the labels' sorted set (below any text). */
const SEP = '\0';

/**
 * The Redis store of subdomain lists (docs/design.md, "The subdomain cache"). The configured
 * endpoint's entries are split (a head, a sorted set of labels, a hash of members), so a change
 * touches only the accounts it is about; a `?rpc=` override's entry is one JSON string (short-lived,
 * never patched). Entries live `CACHE_STALE_SECONDS` from their last use in Redis; freshness is
 * decided by {@link freshness}. No write takes an entry back to an older slot.
 */
export class SubdomainCache {
  private readonly keys: RedisKeys;
  /** What every split entry's head key starts with (any endpoint). */
  private readonly metaStart: string;
  /** Where each endpoint's index sweep resumes (an HSCAN cursor). */
  private readonly indexCursors = new Map<string, string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly freshMs: number,
    private readonly staleMs: number,
    private readonly overrides: OverrideBudget = { ttlMs: staleMs, maxBytes: 32 * 1024 * 1024 },
    /**
     * The deployment's one clock, Unix ms (src/core/redis-time.ts): what freshness compares a
     * `fetchedAt` written by a worker with. `Date.now` when absent.
     */
    readonly now: () => number = Date.now,
  ) {
    this.keys = redisKeys(prefix);
    this.metaStart = `${prefix}:entry:`;
  }

  /** Expiry of a configured endpoint's keys after a write or a use, in milliseconds. */
  get entryTtlMs(): number {
    return this.staleMs + Math.min(SWEEP_GRACE_MS, Math.floor(this.staleMs / 10));
  }

  /**
   * The key of the configured endpoint's entry of `parent` (its head):
   * `<prefix>:entry:<endpoint id>:<parent>`. What {@link get} reads and refresh jobs deduplicate on.
   */
  key(endpointId: string, parent: string): string {
    return this.keys.entryMeta(endpointId, parent);
  }

  /** The key of a `?rpc=` override's entry: `<prefix>:subdomains:<endpoint id>:<parent>`. */
  overrideKey(endpointId: string, parent: string): string {
    return this.keys.subdomainEntry(endpointId, parent);
  }

  /** {@link key} or {@link overrideKey}, by the endpoint's kind. */
  keyOf(endpoint: RpcEndpoint, parent: string): string {
    return endpoint.kind === 'override'
      ? this.overrideKey(endpoint.id, parent)
      : this.key(endpoint.id, parent);
  }

  /** KEYS of the split scripts: head, labels, members, member-parents, followed-parents. */
  private splitKeys(endpointId: string, parent: string): [string, string, string, string, string] {
    const k = this.keys;
    return [
      k.entryMeta(endpointId, parent),
      k.entryLabels(endpointId, parent),
      k.entryMembers(endpointId, parent),
      k.memberParents(endpointId),
      k.followedParents(endpointId),
    ];
  }

  /**
   * The entry at `key` ({@link key} or {@link overrideKey}), labels in answer order.
   * @returns null when absent or unreadable (treated as a miss).
   */
  async get(key: string): Promise<CacheEntry | null> {
    if (!key.startsWith(this.metaStart)) return parseEntry(await this.redis.get(key));
    const labelsKey = `${this.prefix}:entry-labels:${key.slice(this.metaStart.length)}`;
    const read = await SCRIPTS.getSplit.run(this.redis, [key, labelsKey]);
    if (!read) return null;
    const head = parseHead(read[0] ?? '');
    if (!head) return null;
    const labels = new Array<string>(read.length - 1);
    let wide = false;
    for (let i = 1; i < read.length; i++) {
      const member = read[i] as string;
      const label = member.slice(0, member.lastIndexOf(SEP));
      if (!wide && /[\0\ud800-\uffff]/.test(label)) wide = true;
      labels[i - 1] = label;
    }
    // Redis orders by UTF-8 bytes, answers by UTF-16 code units: they differ only past U+D7FF.
    // A label holding the separator (a NUL) is ordered by what follows it, account included.
    if (wide) labels.sort();
    return { ...head, labels };
  }

  /**
   * The head of the configured endpoint's entry of (endpoint, parent): everything but its labels,
   * in one GET whatever the parent's size (for decisions on `fetchedAt`, `slot`, `scanSlot`).
   * @returns null when absent or unreadable.
   */
  async head(endpointId: string, parent: string): Promise<Omit<CacheEntry, 'labels'> | null> {
    const raw = await this.redis.get(this.keys.entryMeta(endpointId, parent));
    return raw === null ? null : parseHead(raw);
  }

  /**
   * The configured endpoint's entry of (endpoint, parent) with the accounts behind its labels,
   * read in one step (one script: one revision).
   * @returns null without an entry; `accounts` null when it was written without them, or one of
   *   them is unreadable (another shape: a scan writes them anew).
   */
  async getWithAccounts(
    endpointId: string,
    parent: string,
  ): Promise<{ entry: CacheEntry; accounts: EntryAccounts | null } | null> {
    const [meta, labelsKey, membersKey] = this.splitKeys(endpointId, parent);
    const read = await SCRIPTS.getSplitMembers.run(this.redis, [meta, labelsKey, membersKey]);
    if (!read) return null;
    const head = parseHead(read[0] ?? '');
    if (!head) return null;
    if (read[1] !== 'm') {
      const labels = read.slice(2).map((m) => m.slice(0, m.lastIndexOf(SEP)));
      return { entry: { ...head, labels: labels.sort() }, accounts: null };
    }
    const accounts: Record<string, Member> = {};
    let sound = true;
    for (let i = 2; i + 1 < read.length; i += 2) {
      const stored = parseMember(read[i + 1] as string);
      if (!stored) sound = false;
      else accounts[read[i] as string] = [stored.label, stored.owner];
    }
    return { entry: { ...head, labels: labelsOf(accounts) }, accounts: sound ? accounts : null };
  }

  /** One member of a parent's entry, or null (not listed, no entry, or unreadable). */
  async member(endpointId: string, parent: string, account: string): Promise<StoredMember | null> {
    const raw = await this.redis.hget(this.keys.entryMembers(endpointId, parent), account);
    return raw === null ? null : parseMember(raw);
  }

  /**
   * Which cached parent lists `account`, a subdomain name account or its reverse record (one
   * HGET): how a deleted account named by a transaction finds its entry.
   * @returns null when no cached entry lists it.
   */
  async parentOfMember(endpointId: string, account: string): Promise<MemberParent | null> {
    const raw = await this.redis.hget(this.keys.memberParents(endpointId), account);
    return raw === null ? null : parseMemberParent(raw, account);
  }

  /**
   * {@link parentOfMember} of each of `accounts`, in one HMGET (one round trip however many a
   * transaction deleted), in their order.
   */
  async parentsOfMembers(
    endpointId: string,
    accounts: readonly string[],
  ): Promise<Array<MemberParent | null>> {
    if (accounts.length === 0) return [];
    const raws = await this.redis.hmget(this.keys.memberParents(endpointId), ...accounts);
    return accounts.map((account, i) => {
      const raw = raws[i];
      return raw === null || raw === undefined ? null : parseMemberParent(raw, account);
    });
  }

  /** The cached parents of an endpoint (the registry the worker follows), oldest use first. */
  async followedParents(endpointId: string): Promise<FollowedParent[]> {
    const flat = await this.redis.zrange(
      this.keys.followedParents(endpointId),
      0,
      -1,
      'WITHSCORES',
    );
    const parents: FollowedParent[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      parents.push({ parent: flat[i] as string, usedAt: Number(flat[i + 1]) });
    }
    return parents;
  }

  /**
   * Writes a scan of (endpoint, parent) unless the stored entry is newer: read at a later slot,
   * or (when a slot is unknown) fetched later. Two refreshes may race and a lagging node may
   * answer from an older slot; neither takes the answer back. Replaces the members and labels in
   * one atomic step (a Lua script), keeps the member-parents index in step, registers the parent
   * as used at `now`, and expires with the stale window ({@link entryTtlMs}). Work: O(members).
   *
   * @param accounts the name accounts behind the labels; without them the entry keeps labels only
   *   (and cannot be patched).
   * @param ceiling the highest slot the chain can have reached now (`SlotClock.ceiling`), when
   *   known: a stored entry whose slot is past it is replaced whatever this entry's slot, so it
   *   cannot hold scans back.
   * @returns 'written', or 'kept' when the stored entry was newer.
   * @throws TypeError for an entry whose slots are not slots (see `entryArgs`).
   */
  async put(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    accounts?: EntryAccounts,
    ceiling?: number,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    const [slot, fetchedAt] = entryArgs(entry);
    const args: string[] = [
      slot,
      fetchedAt,
      entry.scanSlot === undefined ? '' : String(entry.scanSlot),
      isSlot(entry.scannedAt) ? String(entry.scannedAt) : '',
      String(this.entryTtlMs),
      isSlot(ceiling) ? String(ceiling) : '',
      String(now),
      parent,
    ];
    if (accounts) {
      args.push('m');
      const memberSlot = entry.slot ?? 0;
      const listed = Object.entries(accounts);
      const reverses = await this.reverseKeys(
        endpointId,
        parent,
        listed.map(([account]) => account),
      );
      listed.forEach(([account, [label, owner]], i) => {
        // JSON.stringify escapes every newline, so the first one ends the value.
        const value = JSON.stringify([label, owner, memberSlot]);
        args.push(`${account} ${reverses[i] as string} ${value}\n${label}`);
      });
    } else {
      args.push('l');
      entry.labels.forEach((label, i) => args.push(`${label}${SEP}${i}`));
    }
    const rev = await SCRIPTS.putSplit.run(this.redis, this.splitKeys(endpointId, parent), args);
    return rev > 0 ? 'written' : 'kept';
  }

  /**
   * The reverse records of `accounts` under `parent`: from the member-parents index where a scan
   * before indexed them (a rescan of a large parent then derives almost none: about 12 µs each),
   * else derived (`reverseKeyFromDomainKey`). The index is read in batches, between which other
   * clients are served.
   */
  private async reverseKeys(
    endpointId: string,
    parent: string,
    accounts: readonly string[],
  ): Promise<string[]> {
    const known = new Map<string, string>();
    if (accounts.length >= REVERSE_LOOKUP_FROM) {
      const index = this.keys.memberParents(endpointId);
      for (let i = 0; i < accounts.length; i += REVERSE_LOOKUP_BATCH) {
        const batch = accounts.slice(i, i + REVERSE_LOOKUP_BATCH);
        const values = await this.redis.hmget(index, ...batch);
        values.forEach((value, j) => {
          const [p, account, reverse] = value?.split(' ') ?? [];
          if (p === parent && account && account === batch[j] && reverse) {
            known.set(account, reverse);
          }
        });
      }
    }
    let parentKey: Buffer | undefined;
    return accounts.map((account) => {
      const found = known.get(account);
      if (found !== undefined) return found;
      parentKey ??= domainKey(parent);
      return toBase58(reverseKeyFromDomainKey(account, parentKey));
    });
  }

  /**
   * Applies changes of some members of (endpoint, parent) in one atomic step, touching only
   * their accounts: O(changes · log n) whatever the parent's size. An upsert lists the member
   * (or changes its label or owner), a removal drops it, each with its member-parents fields. A
   * change older than its member's stored slot is ignored (a late notification), as is one of an
   * account not listed older than the last scan (which saw its outcome). When something
   * changed the revision is bumped and the entry's slot raised to `slot`; otherwise nothing but
   * member slots is written (an answer that did not change keeps its revision).
   *
   * @param slot the slot the changes were seen at (a slot the caller's clock trusts).
   * @throws TypeError when `slot` is not a slot.
   */
  async applyChanges(
    endpointId: string,
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
  ): Promise<ApplyOutcome> {
    if (!isSlot(slot)) throw new TypeError(`slot ${String(slot)} is not a slot`);
    const [meta, labels, members, index] = this.splitKeys(endpointId, parent);
    const args: string[] = [String(slot), parent, String(this.entryTtlMs)];
    for (const c of changes) {
      if (c.member) args.push(c.account, c.reverse, 'u', c.member[0], c.member[1]);
      else args.push(c.account, c.reverse, 'r', '', '');
    }
    return SCRIPTS.applyChanges.run(this.redis, [meta, labels, members, index], args);
  }

  /**
   * Records an existence check of (endpoint, parent): the accounts in `gone` were found missing
   * (each dropped unless its member was written at a slot past the check's), and the entry is
   * known whole as of `fetchedAt` (raised, never lowered) and `slot` (raised). Bumps the revision.
   *
   * @param check.slot the lowest slot the check read at; undefined when unknown (then every gone
   *   account is dropped and the slot stays).
   * @throws TypeError when `fetchedAt` or `slot` is not a safe non-negative integer.
   */
  async markChecked(
    endpointId: string,
    parent: string,
    check: { fetchedAt: number; slot?: number; gone: readonly string[] },
  ): Promise<CheckOutcome> {
    const [slot, fetchedAt] = entryArgs({
      labels: [],
      fetchedAt: check.fetchedAt,
      slot: check.slot,
    });
    const [meta, labels, members, index] = this.splitKeys(endpointId, parent);
    return SCRIPTS.markChecked.run(
      this.redis,
      [meta, labels, members, index],
      [fetchedAt, slot, parent, ...check.gone],
    );
  }

  /**
   * A use of the entry of (endpoint, parent): its keys live {@link entryTtlMs} from `now` again
   * and its registry score is `now`, so a parent asked now and then is neither swept nor expired.
   * The API calls it through a throttle ({@link TouchThrottle}).
   * @returns whether there was an entry to touch.
   */
  async touch(endpointId: string, parent: string, now = Date.now()): Promise<boolean> {
    const done = await SCRIPTS.touch.run(this.redis, this.splitKeys(endpointId, parent), [
      this.entryTtlMs,
      now,
      parent,
    ]);
    return done === 1;
  }

  /**
   * One bounded batch of the sweep: removes the parents of `endpointId` not used (asked for or
   * scanned) for `CACHE_STALE` before `now`, with their keys and member-parents fields. At most
   * a few hundred parents or some tens of thousands of members per call.
   * @returns how many parents it removed, and whether more are due (call again).
   */
  async sweep(endpointId: string, now = Date.now()): Promise<{ removed: number; more: boolean }> {
    const start = this.keys.entryPrefix(endpointId);
    return SCRIPTS.sweepParents.run(
      this.redis,
      [this.keys.followedParents(endpointId), this.keys.memberParents(endpointId)],
      [now - this.staleMs, SWEEP_PARENTS, SWEEP_MEMBERS, start.meta, start.labels, start.members],
    );
  }

  /**
   * One bounded step (`count` fields of HSCAN) of the member-parents index's own sweep: drops the
   * fields whose parent has no entry, which {@link sweep} cannot find once the parent's members
   * hash expired before it (a sweep fallen behind, workers down). Resumes where the last step of
   * this process stopped; a pass over the whole index ends with `done`.
   */
  async sweepIndex(endpointId: string, count = 1_000): Promise<{ dropped: number; done: boolean }> {
    const { cursor, dropped } = await SCRIPTS.sweepIndex.run(
      this.redis,
      [this.keys.memberParents(endpointId)],
      [this.indexCursors.get(endpointId) ?? '0', count, this.keys.entryPrefix(endpointId).meta],
    );
    this.indexCursors.set(endpointId, cursor);
    return { dropped, done: cursor === '0' };
  }

  /**
   * Writes the entry of a `?rpc=` override unless the stored one is newer, as {@link put} decides:
   * it expires after the override budget's `ttlMs`, and the oldest override entries are deleted
   * while all of them together take more than its `maxBytes`, so answers from servers anyone can
   * name never crowd out the configured endpoint's entries (a Redis at its `maxmemory` refuses
   * every write).
   */
  async putOverride(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    const index = this.keys.overrideEntries;
    const rev = await SCRIPTS.putOverride.run(
      this.redis,
      [this.overrideKey(endpointId, parent), index.byExpiry, index.sizes, index.bytes],
      [...entryArgs(entry), this.overrides.ttlMs, now, this.overrides.maxBytes],
    );
    return rev > 0 ? 'written' : 'kept';
  }

  /**
   * Fresh or stale (docs/design.md, "Freshness"): fresh within `CACHE_FRESH_SECONDS` of
   * `fetchedAt`, or while the chain is followed and nothing was missed since the entry was fetched
   * ({@link followedFresh}; pass `status` for the configured endpoint's entries only).
   */
  freshness(entry: CacheEntry, now = this.now(), status?: FollowStatus | null): Freshness {
    return this.freshMsLeft(entry, now, status) > 0 ? 'fresh' : 'stale';
  }

  /**
   * Milliseconds of freshness left (0 once stale): the window's, or while the entry is fresh by
   * following the chain, until the status's `healthyUntil` if that is later.
   */
  freshMsLeft(entry: CacheEntry, now = this.now(), status?: FollowStatus | null): number {
    const windowLeft = Math.max(0, entry.fetchedAt + this.freshMs - now);
    if (!status || !followedFresh(entry, status, now)) return windowLeft;
    return Math.max(windowLeft, status.healthyUntil - now);
  }
}

/** The head of a split entry as a CacheEntry without labels, or null when unreadable. */
function parseHead(raw: string): Omit<CacheEntry, 'labels'> | null {
  try {
    const head = JSON.parse(raw) as Record<string, unknown>;
    if (typeof head.fetchedAt !== 'number') return null;
    const entry: { -readonly [K in keyof CacheEntry]?: CacheEntry[K] } = {
      fetchedAt: head.fetchedAt,
    };
    if (isSlot(head.slot)) entry.slot = head.slot;
    if (typeof head.rev === 'number') entry.rev = head.rev;
    if (isSlot(head.scanSlot)) entry.scanSlot = head.scanSlot;
    if (typeof head.scannedAt === 'number') entry.scannedAt = head.scannedAt;
    return entry as Omit<CacheEntry, 'labels'>;
  } catch {
    return null;
  }
}

/** A member's stored `[label, owner, slot]`, or null when of another shape. */
function parseMember(raw: string): StoredMember | null {
  try {
    const value = JSON.parse(raw) as unknown;
    if (
      Array.isArray(value) &&
      value.length === 3 &&
      typeof value[0] === 'string' &&
      typeof value[1] === 'string' &&
      isSlot(value[2])
    ) {
      return { label: value[0], owner: value[1], slot: value[2] };
    }
  } catch {
    // Not JSON: of another shape.
  }
  return null;
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

/**
 * A member index value: `parent subdomain reverse` under the subdomain, `parent subdomain` under
 * its reverse record. The accounts are the last words, the parent (any name the API takes) the
 * rest. Null when it does not read so.
 */
function parseMemberParent(raw: string, account: string): MemberParent | null {
  const words = raw.split(' ');
  const tail = words.length > 2 && words[words.length - 2] === account ? 2 : 1;
  const parent = words.slice(0, -tail).join(' ');
  const subdomain = words[words.length - tail];
  return parent && subdomain ? { parent, subdomain } : null;
}
