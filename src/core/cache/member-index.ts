import type { RedisClient } from '../redis.js';
import type { RedisKeys } from '../redis-keys.js';
import { LuaScript, replyList, replyNumber, replyString } from '../lua-script.js';

/** Which parent lists an account (a subdomain name account, or its reverse record). */
export type MemberParent = {
  readonly parent: string;
  /** The subdomain name account: `account` itself, or the one whose reverse record it is. */
  readonly subdomain: string;
};

/** One bounded step of the index's own sweep (src/core/lua/sweep-index.lua). */
const SWEEP_INDEX = new LuaScript(new URL('../lua/sweep-index.lua', import.meta.url), (raw) => {
  const [cursor, dropped] = replyList(raw);
  return { cursor: replyString(cursor), dropped: replyNumber(dropped) };
});

/**
 * The member-parents index of the configured endpoint's entries (docs/design.md, "The subdomain
 * cache"): per endpoint one hash, subdomain name account -> `parent subdomain reverse`, reverse
 * record -> `parent subdomain`. The split entries' scripts write it with the entries; this reads
 * it (how a deleted account named by a transaction finds its entry) and sweeps what they leave.
 */
export class MemberIndex {
  /** Where each endpoint's index sweep resumes (an HSCAN cursor). */
  private readonly cursors = new Map<string, string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Which cached parent lists `account`, a subdomain name account or its reverse record (one
   * HGET): how a deleted account named by a transaction finds its entry.
   * @returns null when no cached entry lists it.
   */
  async parentOf(endpointId: string, account: string): Promise<MemberParent | null> {
    const raw = await this.redis.hget(this.keys.memberParents(endpointId), account);
    return raw === null ? null : parseMemberParent(raw, account);
  }

  /**
   * {@link parentOf} of each of `accounts`, in one HMGET (one round trip however many a
   * transaction deleted), in their order.
   */
  async parentsOf(
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

  /**
   * One bounded step (`count` fields of HSCAN) of the member-parents index's own sweep: drops the
   * fields whose parent has no entry, which the split entries' sweep cannot find once the parent's members
   * hash expired before it (a sweep fallen behind, workers down). Resumes where the last step of
   * this process stopped; a pass over the whole index ends with `done`.
   */
  async sweep(endpointId: string, count = 1_000): Promise<{ dropped: number; done: boolean }> {
    const { cursor, dropped } = await SWEEP_INDEX.run(
      this.redis,
      [this.keys.memberParents(endpointId)],
      [this.cursors.get(endpointId) ?? '0', count, this.keys.entryPrefix(endpointId).meta],
    );
    this.cursors.set(endpointId, cursor);
    return { dropped, done: cursor === '0' };
  }
}

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
