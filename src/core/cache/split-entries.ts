import type { RedisClient } from '../redis.js';
import type { RedisKeys } from '../redis-keys.js';
import {
  LuaScript,
  replyList,
  replyNumber,
  replyString,
  replyStrings,
  replyStringsOrNull,
} from '../lua-script.js';
import { isSlot } from '../rpc/slot.js';
import { runsOfOneRevision } from './runs-of-one-revision.js';
import { entryArgs, labelsOf, type CacheEntry, type EntryAccounts, type Member } from './entry.js';
import {
  FIRST_CHUNK_MEMBERS,
  PUT_CHUNK_MEMBERS,
  ScanWrite,
  type ScannedMember,
} from './scan-write.js';

export { FIRST_CHUNK_MEMBERS, PUT_CHUNK_MEMBERS, ScanWrite, type ScannedMember };

/** One change to one member of a parent's entry, as {@link SplitEntries.applyChanges} takes it. */
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
 * already there or older than its member; 'missing': no entry (or one whose head is unreadable);
 * 'unsound': the entry holds a slot past the ceiling, so no change is judged against it (only a
 * scan corrects it).
 */
export type ApplyVerdict = 'written' | 'unchanged' | 'missing' | 'unsound';

/** What {@link SplitEntries.applyChanges} did, and the entry's revision after it. */
export type ApplyOutcome = {
  readonly outcome: ApplyVerdict;
  readonly rev: number;
};

/** What {@link SplitEntries.markChecked} did. */
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

/** A followed parent and when it was last asked for or scanned (Unix ms). */
export type FollowedParent = { readonly parent: string; readonly usedAt: number };

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

/** Labels read per round trip when an entry is read (see {@link SplitEntries.get}). */
const LABELS_RUN = 10_000;

/** The separator between a label and its account in the labels' sorted set (below any text). */
const SEP = '\0';

/** One of `outcomes`, as a script replied it. @throws TypeError for anything else. */
function outcomeOf<O extends string>(raw: unknown, outcomes: readonly O[]): O {
  const found = outcomes.find((o) => o === raw);
  if (found === undefined) throw new TypeError(`a script replied the outcome ${String(raw)}`);
  return found;
}

/** The scripts of the split entries, in src/core/lua/ (each file says its KEYS, ARGV and reply). */
const SCRIPTS = {
  applyChanges: new LuaScript(
    new URL('../lua/apply-changes.lua', import.meta.url),
    (raw): ApplyOutcome => {
      const [outcome, rev] = replyList(raw);
      return {
        outcome: outcomeOf(outcome, ['written', 'unchanged', 'missing', 'unsound'] as const),
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
  markOwed: new LuaScript(new URL('../lua/mark-owed.lua', import.meta.url), (raw) => {
    const [outcome] = replyList(raw);
    return outcomeOf(outcome, ['written', 'missing'] as const);
  }),
  touch: new LuaScript(new URL('../lua/touch-entry.lua', import.meta.url), replyNumber),
  getWithMembers: new LuaScript(
    new URL('../lua/get-split-members.lua', import.meta.url),
    replyStringsOrNull,
  ),
  getChunk: new LuaScript(new URL('../lua/get-split-chunk.lua', import.meta.url), (raw) =>
    raw === null ? null : replyList(raw),
  ),
  getRows: new LuaScript(new URL('../lua/get-split-rows.lua', import.meta.url), (raw) =>
    raw === null ? null : replyList(raw),
  ),
  sweep: new LuaScript(new URL('../lua/sweep-parents.lua', import.meta.url), (raw) => {
    const [removed, more] = replyList(raw);
    return { removed: replyNumber(removed), more: replyNumber(more) === 1 };
  }),
};

/**
 * The configured endpoint's entries (docs/design.md, "The subdomain cache"), split so a change
 * touches only the accounts it is about: a head, a sorted set of labels, a hash of members, each
 * member in the member-parents index (`MemberIndex`), each parent in the followed-parents
 * registry. The worker writes them (scans, changes, checks, sweeps); the API reads them and
 * touches them as they are used. No write takes an entry back to an older slot.
 */
export class SplitEntries {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** `CACHE_STALE_SECONDS`, in milliseconds: how long an unused parent is kept. */
    private readonly staleMs: number,
    /** Labels {@link get} reads per round trip. */
    private readonly labelsRun = LABELS_RUN,
  ) {}

  /** Expiry of a configured endpoint's keys after a write or a use, in milliseconds. */
  get entryTtlMs(): number {
    return this.staleMs + Math.min(SWEEP_GRACE_MS, Math.floor(this.staleMs / 10));
  }

  /**
   * The key of the entry of `parent` (its head): `<prefix>:entry:<endpoint id>:<parent>`. What
   * refresh jobs deduplicate on.
   */
  key(endpointId: string, parent: string): string {
    return this.keys.entryMeta(endpointId, parent);
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
   * The entry of (endpoint, parent), labels in answer order. A large entry is read
   * 10,000 labels at a time so that no step holds the event loop for long (the
   * labels of 100,000 subdomains took it 160 to 280 ms at once); the runs are of one revision, as
   * each carries the head and a change between two begins the read again (three times, then it
   * is read in one step: {@link runsOfOneRevision}). A run is one transaction (MULTI: GET, ZCARD,
   * ZRANGE), not a script, whose ZRANGE cost Redis more (its reply converted to Lua and back:
   * BENCHMARKS.md); the count tells the last run, so no run reads past the end.
   *
   * @returns null when absent or unreadable (treated as a miss).
   */
  async get(endpointId: string, parent: string): Promise<CacheEntry | null> {
    const meta = this.keys.entryMeta(endpointId, parent);
    const labelsKey = this.keys.entryLabels(endpointId, parent);
    // The head is compared as stored: parsed once, from the first run.
    const read = async (start: number, stop: number): Promise<LabelsRun | null> => {
      const [head, total, members] = execReplies(
        await this.redis.multi().get(meta).zcard(labelsKey).zrange(labelsKey, start, stop).exec(),
      );
      if (head === null) return null;
      return { head: replyString(head), total: replyNumber(total), members: replyStrings(members) };
    };
    return runsOfOneRevision({
      size: this.labelsRun,
      run: (start, count) => read(start, start + count - 1),
      sameHead: (a, b) => a === b,
      begin: LabelsRead.begin,
      fallback: async () => {
        const whole = await read(0, -1);
        const labels = whole && LabelsRead.begin(whole.head);
        if (!whole || !labels) return null;
        labels.take(whole);
        return labels.done();
      },
    });
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
   * @returns null without an entry; `accounts` null when one of them is unreadable (another
   *   shape: a scan writes them anew).
   */
  async getWithAccounts(
    endpointId: string,
    parent: string,
  ): Promise<{ entry: CacheEntry; accounts: EntryAccounts | null } | null> {
    const [meta, , membersKey] = this.splitKeys(endpointId, parent);
    const read = await SCRIPTS.getWithMembers.run(this.redis, [meta, membersKey]);
    if (!read) return null;
    const head = parseHead(read[0] ?? '');
    if (!head) return null;
    const accounts: Record<string, Member> = {};
    let sound = true;
    for (let i = 1; i + 1 < read.length; i += 2) {
      const stored = parseMember(read[i + 1] as string);
      if (!stored) sound = false;
      else accounts[read[i] as string] = [stored.label, stored.owner];
    }
    return { entry: { ...head, labels: labelsOf(accounts) }, accounts: sound ? accounts : null };
  }

  /**
   * The members behind a page of labels of (endpoint, parent), with the entry's head, in one step
   * (one script: one revision): O(page · log n) whatever the parent's size, for `/details`.
   *
   * @param labels the page's labels in the answers' order, a label once per row (`selectPage`'s
   *   page: it starts where its first label's rows start); at most a page's worth, non-empty.
   * @returns null without an entry (or with an unreadable head); else the head and each row's
   *   account and owner, a label's rows in account order (the order `/details` lists them); rows
   *   null when one could not be read (unreadable, gone, or hidden among too many labels that go
   *   on with a NUL).
   */
  async rowsOf(
    endpointId: string,
    parent: string,
    labels: readonly string[],
  ): Promise<{
    head: Omit<CacheEntry, 'labels'>;
    rows: Array<{ label: string; account: string; owner: string }> | null;
  } | null> {
    const [meta, labelsKey, membersKey] = this.splitKeys(endpointId, parent);
    const wanted = new Map<string, number>();
    for (const label of labels) wanted.set(label, (wanted.get(label) ?? 0) + 1);
    const args = [labels[0] ?? '', labels[labels.length - 1] ?? '', String(labels.length)];
    for (const [label, count] of wanted) args.push(label, String(count));
    const read = await SCRIPTS.getRows.run(this.redis, [meta, labelsKey, membersKey], args);
    if (!read) return null;
    const head = parseHead(typeof read[0] === 'string' ? read[0] : '');
    if (!head) return null;
    const rows: Array<{ label: string; account: string; owner: string }> = [];
    const take = (label: string, account: unknown, raw: unknown): boolean => {
      const member = typeof raw === 'string' ? parseMember(raw) : null;
      if (typeof account !== 'string' || member?.label !== label) return false;
      rows.push({ label, account, owner: member.owner });
      return true;
    };
    if (read[1] === 0) {
      // One range of the labels' sorted set held the page's rows, in the page's order.
      const count = labels.length;
      for (let i = 0; i < count; i++) {
        if (!take(labels[i] as string, read[2 + i], read[2 + count + i]))
          return { head, rows: null };
      }
      return { head, rows };
    }
    let at = 2;
    for (const [label, count] of wanted) {
      const n = read[at++];
      if (n !== count) return { head, rows: null };
      for (let i = 0; i < count; i++, at += 2) {
        if (!take(label, read[at], read[at + 1])) return { head, rows: null };
      }
    }
    return { head, rows };
  }

  /**
   * `count` members of (endpoint, parent) from index `start` of its labels' sorted set (Redis's
   * order: by UTF-8 bytes of `label \0 account`), with the entry's head, in one step: a large
   * entry read a run at a time, the head telling whether it changed between runs.
   *
   * @returns null without an entry (or with an unreadable head); else the head and the run's
   *   members (fewer than `count` at the end), or null for them when one is unreadable.
   */
  async membersRun(
    endpointId: string,
    parent: string,
    start: number,
    count: number,
  ): Promise<{
    head: Omit<CacheEntry, 'labels'>;
    members: Array<{ label: string; account: string; owner: string }> | null;
  } | null> {
    const [meta, labelsKey, membersKey] = this.splitKeys(endpointId, parent);
    const read = await SCRIPTS.getChunk.run(
      this.redis,
      [meta, labelsKey, membersKey],
      [String(start), String(count)],
    );
    if (!read) return null;
    const head = parseHead(typeof read[0] === 'string' ? read[0] : '');
    if (!head) return null;
    const n = (read.length - 1) / 2;
    const members: Array<{ label: string; account: string; owner: string }> = [];
    for (let i = 0; i < n; i++) {
      const member = read[1 + i];
      const raw = read[1 + n + i];
      const stored = typeof raw === 'string' ? parseMember(raw) : null;
      if (typeof member !== 'string' || !stored) return { head, members: null };
      const at = member.lastIndexOf(SEP);
      const label = member.slice(0, at);
      if (stored.label !== label) return { head, members: null };
      members.push({ label, account: member.slice(at + 1), owner: stored.owner });
    }
    return { head, members };
  }

  /** One member of a parent's entry, or null (not listed, no entry, or unreadable). */
  async member(endpointId: string, parent: string, account: string): Promise<StoredMember | null> {
    const raw = await this.redis.hget(this.keys.entryMembers(endpointId, parent), account);
    return raw === null ? null : parseMember(raw);
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
   * From {@link PUT_CHUNK_MEMBERS} members, the members are first staged in chunks (their index
   * fields written then), and the atomic step renames them into place ({@link scanWrite}).
   *
   * @param accounts the name accounts behind the labels (what is stored: the labels are theirs).
   * @param reverses the reverse record (base58) of each of `accounts`, as the scan found them
   *   (the decode thread): written to the member-parents index beside the account.
   * @param ceiling the highest slot the chain can have reached now (`SlotClock.ceiling`), when
   *   known: a stored entry whose slot is past it is replaced whatever this entry's slot, so it
   *   cannot hold scans back.
   * @returns 'written', or 'kept' when the stored entry was newer.
   * @throws TypeError for an entry whose slots are not slots (see `entryArgs`), or an account
   *   without its reverse record in `reverses` (before anything is written).
   */
  async put(
    endpointId: string,
    parent: string,
    entry: CacheEntry,
    accounts: EntryAccounts,
    reverses: ReadonlyMap<string, string>,
    ceiling?: number,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    entryArgs(entry);
    const listed = Object.entries(accounts);
    const members = new Array<ScannedMember>(listed.length);
    for (let i = 0; i < listed.length; i++) {
      const [account, [label, owner]] = listed[i] as [string, Member];
      const reverse = reverses.get(account);
      if (reverse === undefined)
        throw new TypeError(`no reverse record given for the account ${account}`);
      members[i] = [label, account, owner, reverse];
    }
    const write = this.scanWrite(endpointId, parent, entry.slot ?? 0);
    write.add(members);
    return write.commit(entry, ceiling, now);
  }

  /**
   * A write of a scan of (endpoint, parent) fed as the scan lists its members: what {@link put}
   * does at once, its chunks staged while the scan goes on ({@link ScanWrite}).
   *
   * @param memberSlot the slot the scan's entry will hold (0 when unknown), written with each member.
   */
  scanWrite(endpointId: string, parent: string, memberSlot: number): ScanWrite {
    return new ScanWrite(
      this.redis,
      this.keys,
      { split: this.splitKeys(endpointId, parent), endpointId, parent, ttlMs: this.entryTtlMs },
      memberSlot,
    );
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
   * An entry whose slot or scan slot is past `ceiling` is left as it is ('unsound'): a late
   * change would be judged older than a slot no chain has reached, and dropped.
   *
   * @param slot the slot the changes were seen at (a slot the caller's clock trusts).
   * @param ceiling the highest slot the caller's clock believes now (src/core/rpc/slot.ts), if known.
   * @throws TypeError when `slot` is not a slot.
   */
  async applyChanges(
    endpointId: string,
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
    ceiling?: number,
  ): Promise<ApplyOutcome> {
    if (!isSlot(slot)) throw new TypeError(`slot ${String(slot)} is not a slot`);
    const [meta, labels, members, index] = this.splitKeys(endpointId, parent);
    const args: string[] = [
      String(slot),
      parent,
      String(this.entryTtlMs),
      ceiling === undefined ? '' : String(ceiling),
    ];
    for (const c of changes) {
      if (c.member) args.push(c.account, c.reverse, 'u', c.member[0], c.member[1]);
      else args.push(c.account, c.reverse, 'r', '', '');
    }
    return SCRIPTS.applyChanges.run(this.redis, [meta, labels, members, index], args);
  }

  /**
   * Records an existence check of (endpoint, parent): the accounts in `gone` were found missing
   * (each dropped unless its member was written at a slot past the check's), and the slot is
   * raised to the check's. The entry is known whole as of `fetchedAt` (raised, never lowered) only
   * if it was already known whole since `epoch` and owes no re-read: a check sees what is gone,
   * not what was added, which only the stream carried since its epoch (docs/design.md,
   * "Freshness"). Bumps the revision.
   *
   * @param check.slot the lowest slot the check read at; undefined when unknown (then every gone
   *   account is dropped and the slot stays).
   * @param check.epoch the follow epoch the check was made under (Unix ms).
   * @throws TypeError when `fetchedAt`, `epoch` or `slot` is not a safe non-negative integer.
   */
  async markChecked(
    endpointId: string,
    parent: string,
    check: { fetchedAt: number; epoch: number; slot?: number; gone: readonly string[] },
  ): Promise<CheckOutcome> {
    const [slot, fetchedAt] = entryArgs({
      labels: [],
      fetchedAt: check.fetchedAt,
      slot: check.slot,
    });
    if (!Number.isSafeInteger(check.epoch) || check.epoch < 0) {
      throw new TypeError(`epoch ${String(check.epoch)} is not a time`);
    }
    const [meta, labels, members, index] = this.splitKeys(endpointId, parent);
    return SCRIPTS.markChecked.run(
      this.redis,
      [meta, labels, members, index],
      [fetchedAt, slot, check.epoch, parent, ...check.gone],
    );
  }

  /**
   * Records a re-read of (endpoint, parent) that the stream owes and cannot make (the day's
   * budget spent), or that may land after a heal vouches: the head's `owes` is raised to `slot`,
   * and until a scan that far is stored the entry is not fresh by following
   * ({@link CacheEntry.owes}). Bumps the revision.
   *
   * @returns 'missing' when there is no entry (nothing to vouch for).
   * @throws TypeError when `slot` is not a safe non-negative integer.
   */
  async markOwed(endpointId: string, parent: string, slot: number): Promise<'written' | 'missing'> {
    if (!isSlot(slot)) throw new TypeError('an owed slot must be a safe non-negative integer');
    const [meta] = this.splitKeys(endpointId, parent);
    return SCRIPTS.markOwed.run(this.redis, [meta], [String(slot)]);
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
    return SCRIPTS.sweep.run(
      this.redis,
      [this.keys.followedParents(endpointId), this.keys.memberParents(endpointId)],
      [now - this.staleMs, SWEEP_PARENTS, SWEEP_MEMBERS, start.meta, start.labels, start.members],
    );
  }
}

/** One run of {@link SplitEntries.get}: the head (as stored), the labels' count, its members. */
type LabelsRun = {
  readonly head: string;
  readonly total: number;
  readonly members: readonly string[];
};

/**
 * The replies of a transaction's commands, in order.
 * @throws the first command's error, as Redis replied it; a TypeError when the transaction
 *   replied none (aborted).
 */
function execReplies(raw: Array<[Error | null, unknown]> | null): unknown[] {
  if (raw === null) throw new TypeError('a transaction was aborted');
  return raw.map(([err, reply]) => {
    if (err) throw err;
    return reply;
  });
}

/** The labels of one read of an entry ({@link SplitEntries.get}), taken a reply at a time. */
class LabelsRead {
  private readonly labels: string[] = [];
  /** Whether a label may sort otherwise in the answers than in Redis (see {@link done}). */
  private wide = false;

  private constructor(private readonly head: Omit<CacheEntry, 'labels'>) {}

  /** A read of the entry whose head is `rawHead`, or null when that is unreadable (a miss). */
  static begin(this: void, rawHead: string): LabelsRead | null {
    const head = parseHead(rawHead);
    return head && new LabelsRead(head);
  }

  /** Takes the labels of a run (each member is `label \0 account`): how many it held. */
  take({ members }: LabelsRun): number {
    for (const member of members) {
      const label = member.slice(0, member.lastIndexOf(SEP));
      if (!this.wide && /[\0\ud800-\uffff]/.test(label)) this.wide = true;
      this.labels.push(label);
    }
    return members.length;
  }

  /** The entry, its labels in answer order. */
  done(): CacheEntry {
    // Redis orders by UTF-8 bytes, answers by UTF-16 code units: they differ only past U+D7FF.
    // A label holding the separator (a NUL) is ordered by what follows it, account included.
    if (this.wide) this.labels.sort();
    return { ...this.head, labels: this.labels };
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
    if (isSlot(head.owes)) entry.owes = head.owes;
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
