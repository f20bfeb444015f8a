import type { RedisClient } from '../redis.js';
import { LuaScript, replyList, replyNumber, replyStrings } from '../lua-script.js';
import { redisKeys, type RedisKeys } from '../redis-keys.js';
import { isSlot } from '../rpc/slot.js';
import * as rv from './registry-value.js';

/**
 * The registry index (docs/design.md, "The registry index"): every subdomain of the name program,
 * per parent key, in Redis. One hash per parent key (subdomain name account -> `slot|owner|label`),
 * buckets of accounts (a subdomain -> its parent id, a reverse record -> its subdomain's first
 * characters, so a Delete finds its member), the build's state and shards, and a journal of what
 * the stream saw during a build for accounts no piece had written yet.
 *
 * A member holds two facts, each known, unknown or deleted: the owner in the subdomain name
 * account's header (stored as `#` and its 32 bytes, read back as base58; `''` unknown; `-` the
 * account is gone) and the label of its reverse record (`+label`; `''` unknown; `-` gone). It is
 * listed when both are known. Each member keeps the slot of its newest fact: a fact at a lower slot
 * never changes a known or deleted one (a late notification, a piece read before a change), though
 * it may fill an unknown one. A member whose two facts are gone is a tombstone: it keeps a piece
 * read before the deletion from bringing the name back.
 *
 * A complete build sets the floor: the lowest slot its pages were read at. A member whose newest
 * fact is older than the floor was in none of that build's pages (the chain no longer listed it,
 * by a Delete the stream missed before the build) and reads as its label gone at the floor, so a
 * rebuild after an unhealed gap leaves the index as the chain was at its pages' slots.
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
  | { op: 'delete'; slot: number; account: string }
  /** The chain does not list `account` under `parentKey` (the audit): its label is gone. */
  | { op: 'unlist'; slot: number; parentKey: string; account: string };

/** One member a bootstrap piece read: its reverse record's label and (when found) its owner. */
export type PieceMember = {
  parentKey: string;
  account: string;
  reverse: string;
  label: string;
  /** The name account's owner, or null when it does not exist (or is not under `parentKey`). */
  owner: string | null;
};

/** A member as stored: slot, owner (`''` unknown, `-` gone), label (`+label`, `''`, `-`). */
type StoredMember = { slot: number; owner: string; label: string };

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
  /** The last complete build's floor: the lowest slot its pages were read at (0 before one). */
  floor: number;
};

/**
 * The `endpointId` of the refresh events the index's changes publish: their `parent` is a parent
 * id ({@link parentIdOf}), for the API's live updates.
 */
export const REGISTRY_EVENTS = 'registry';

/** Base58 characters of a parent key naming its hash, and of an account naming it in the index. */
export const ID_CHARS = 16;
/** Base58 characters of an account naming its bucket of the accounts index. */
export const BUCKET_CHARS = 2;

/** The id a parent key's hash is named by: its first {@link ID_CHARS} characters. */
export const parentIdOf = (parentKey: string): string => parentKey.slice(0, ID_CHARS);

/** A reply `{a, b}` of two numbers. */
const twoNumbers = (raw: unknown): [number, number] => {
  const [a, b] = replyList(raw);
  return [replyNumber(a), replyNumber(b)];
};

/** The index's Lua scripts, in src/core/lua/ (each file says its KEYS, ARGV and reply). */
const SCRIPTS = {
  /** Facts from the stream: the parent ids changed, the accounts whose owner is unknown. */
  apply: new LuaScript(new URL('../lua/registry-apply.lua', import.meta.url), (raw) => {
    const [changed, needOwner] = replyList(raw);
    return { changed: replyStrings(changed), needOwner: replyStrings(needOwner) };
  }),
  /** A bootstrap page: written, and shards done (written -1: not the current build). */
  piece: new LuaScript(new URL('../lua/registry-piece.lua', import.meta.url), twoNumbers),
  /** Starts a build: the run, and 1 when started now. */
  start: new LuaScript(new URL('../lua/registry-start.lua', import.meta.url), twoNumbers),
};

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

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = redisKeys(prefix);
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
    const args: Array<string | Buffer> = [];
    for (const o of ops) {
      const slot = slotArg(o.slot);
      if (o.op === 'label') {
        args.push('L', slot, parentIdOf(o.parentKey), o.account, o.reverse, o.label);
      } else if (o.op === 'owner') {
        args.push('O', slot, parentIdOf(o.parentKey), o.account, rv.ownerArg(o.owner), '');
      } else if (o.op === 'unlist') {
        args.push('U', slot, parentIdOf(o.parentKey), o.account, '', '');
      } else args.push('D', slot, o.account, '', '', '');
    }
    return SCRIPTS.apply.run(
      this.redis,
      [this.keys.registryJournal, this.keys.registryState],
      [this.keys.registryPrefix, ...args],
    );
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
    const args: Array<string | Buffer> = [];
    for (const m of members) {
      args.push(parentIdOf(m.parentKey), m.account, m.reverse, m.label, rv.ownerArg(m.owner ?? ''));
    }
    const [written, done] = await SCRIPTS.piece.run(
      this.redis,
      [this.keys.registryJournal, this.keys.registryState, this.keys.registryShards(run)],
      [
        this.keys.registryPrefix,
        run,
        shard ?? '',
        slotArg(slot),
        slotArg(Math.max(slot, ownersSlot)),
        now,
        ...args,
      ],
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
    const [run, started] = await SCRIPTS.start.run(
      this.redis,
      [this.keys.registryState],
      [shards, now, force ? '1' : ''],
    );
    return { run, started: started === 1 };
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
      floor: num(raw.floor),
    };
  }

  /**
   * Every member of the parent whose key is `parentKey` as stored, listed or not (the audit): name
   * account -> slot, owner (`''` unknown, `-` gone) and label (`+label`, `''` unknown, `-` gone),
   * as the floor reads them (one older than the last build's floor: its label gone at the floor,
   * its owner unknown). One round trip.
   */
  async storedMembers(parentKey: string): Promise<Map<string, StoredMember>> {
    const raw = await this.rawMembers(parentKey);
    return new Map([...raw].map(([account, m]) => [account, rv.withOwnerText(m)]));
  }

  /** Every member of the parent as stored, the floor applied, owners as `rv.parseRaw` gives them. */
  private async rawMembers(parentKey: string): Promise<Map<string, rv.RawValue>> {
    const replies = await this.redis
      .pipeline()
      .hgetallBuffer(this.keys.registryParent(parentIdOf(parentKey)))
      .hget(this.keys.registryState, 'floor')
      .exec();
    const [hash, floorReply] = replies ?? [];
    const failed = hash?.[0] ?? floorReply?.[0];
    if (failed) throw failed;
    const raw = (hash?.[1] ?? {}) as Record<string, Buffer>;
    const floor = Number(floorReply?.[1] ?? 0);
    const out = new Map<string, rv.RawValue>();
    for (const [account, value] of Object.entries(raw)) {
      const m = rv.parseRaw(value);
      if (m) out.set(account, rv.atFloor(m, floor));
    }
    return out;
  }

  /**
   * The listed subdomains of the parent whose name account is `parentKey` (base58), sorted by
   * label as answers list them, and the highest slot among its members (undefined: none).
   */
  async members(parentKey: string): Promise<{ members: RegistryMember[]; slot?: number }> {
    const { members, slot } = await this.listed(parentKey);
    const out = members.map((m) => ({ ...m, owner: rv.ownerText(m.owner) }));
    return slot === undefined ? { members: out } : { members: out, slot };
  }

  /**
   * {@link members} with each owner as stored (32 bytes, or the text of an older write): what an
   * answer reads, which shows owners only in `/details` (`rv.ownerText` then).
   */
  async listed(parentKey: string): Promise<{ members: rv.ListedMember[]; slot?: number }> {
    const members: rv.ListedMember[] = [];
    let slot: number | undefined;
    for (const [account, m] of await this.rawMembers(parentKey)) {
      slot = Math.max(slot ?? m.slot, m.slot);
      if (m.owner === '' || m.owner === '-' || !m.label.startsWith('+')) continue;
      members.push({ label: m.label.slice(1), account, owner: m.owner });
    }
    // Answer order, as `/details` lists rows: by label, then by account.
    const order = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
    members.sort((a, b) => order(a.label, b.label) || order(a.account, b.account));
    return slot === undefined ? { members } : { members, slot };
  }

  /**
   * Up to `count` parents of the index, walking its keys from where the last call of this object
   * stopped (a rolling sample: every parent comes round). Each as its id ({@link parentIdOf}) and
   * a few of its name accounts (the audit reads one to learn the parent's whole key).
   */
  async sampleParents(count: number): Promise<Array<{ parentId: string; accounts: string[] }>> {
    const out: Array<{ parentId: string; accounts: string[] }> = [];
    const prefix = `${this.keys.registryPrefix}p:`;
    for (let rounds = 0; rounds < 100 && out.length < count; rounds++) {
      const [next, keys] = await this.redis.scan(
        this.sampleCursor,
        'MATCH',
        `${prefix}*`,
        'COUNT',
        500,
      );
      this.sampleCursor = next;
      for (const key of keys) {
        if (out.length >= count) break;
        const [, fields] = await this.redis.hscan(key, '0', 'COUNT', 8);
        const accounts = fields.filter((_, i) => i % 2 === 0).slice(0, 4);
        if (accounts.length > 0) out.push({ parentId: key.slice(prefix.length), accounts });
      }
      if (next === '0') break;
    }
    return out;
  }

  private sampleCursor = '0';

  /**
   * One member as stored, listed or not (tests, the audit): its slot, owner (`''` unknown, `-`
   * gone) and label (`+label`, `''` unknown, `-` gone).
   */
  async member(parentKey: string, account: string): Promise<StoredMember | null> {
    const [value, floor] = await Promise.all([
      this.redis.hgetBuffer(this.keys.registryParent(parentIdOf(parentKey)), account),
      this.redis.hget(this.keys.registryState, 'floor'),
    ]);
    const m = value && rv.parseRaw(value);
    return m && rv.withOwnerText(rv.atFloor(m, Number(floor ?? 0)));
  }
}
