import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import type { RedisKeys } from '../redis-keys.js';
import { LuaScript, replyNumber } from '../lua-script.js';
import { isSlot } from '../rpc/slot.js';
import { entryArgs, type CacheEntry } from './entry.js';
import { packMembers, type PackedMembers } from './packed-members.js';

/**
 * Members a scan's write sends in one script; a larger scan is written in chunks of this many or
 * more, never twice as many (a part handed over is not split; one script each, so Redis serves
 * other clients between them), then taken in by a last script. One script of 100,000 members held
 * Redis past the clients' command timeout.
 */
export const PUT_CHUNK_MEMBERS = 2_000;
/**
 * Members of a large scan's first part, and so of its first chunk: the parts after double up to
 * {@link PUT_CHUNK_MEMBERS}, so Redis starts on the write once the first few members are listed
 * rather than a whole chunk later, and each part is ready about when the chunk before is written
 * (BENCHMARKS.md, "The first cold answer where fresh memory is dear").
 */
export const FIRST_CHUNK_MEMBERS = 250;
/** How long a large scan's staged chunks outlive a write that never finished. */
const STAGING_TTL_MS = 10 * 60_000;

/** A member of a scan as it is written: its label, name account, owner and reverse record. */
export type ScannedMember = readonly [
  label: string,
  account: string,
  owner: string,
  reverse: string,
];

/** The scripts of a scan's write, in src/core/lua/ (each file says its KEYS, ARGV and reply). */
const SCRIPTS = {
  put: new LuaScript(new URL('../lua/put-split-entry.lua', import.meta.url), replyNumber),
  putChunk: new LuaScript(new URL('../lua/put-split-chunk.lua', import.meta.url), replyNumber),
};

/** Where a scan of (endpoint, parent) is written: the entry's keys, and the scan's staging. */
export type ScanWriteKeys = {
  /** KEYS of the split scripts: head, labels, members, member-parents, followed-parents. */
  readonly split: readonly [string, string, string, string, string];
  readonly endpointId: string;
  readonly parent: string;
  /** Expiry of the entry's keys (`SplitEntries.entryTtlMs`), ms. */
  readonly ttlMs: number;
};

/**
 * One scan's write of a configured endpoint's entry (docs/design.md, "The subdomain cache"), fed
 * its members as the scan lists them. Fewer than {@link PUT_CHUNK_MEMBERS} members, {@link commit}
 * writes in one script; from that many, chunks are staged as members come (their member-parents
 * fields written then), each sent while Redis runs the one before and never more than that queued
 * on the connection, and the commit's script takes them in at once. A write fed while the scan is
 * still being decoded overlaps the two (BENCHMARKS.md, "Cold scans of a large parent"). Fed
 * eagerly (a large scan's parts, which start small), it also sends what is pending whenever no
 * chunk is under way, so Redis never waits for a full chunk while members are listed.
 */
export class ScanWrite {
  private readonly staging: { readonly labels: string; readonly members: string };
  /** Members added and not yet staged, in order, and how many. */
  private pending: string[] = [];
  private pendingCount = 0;
  /** Chunks sent in order: each step sends one, then waits for the one before it. */
  private chain: Promise<void> = Promise.resolve();
  /** The chunk sent last, which the next one waits behind. */
  private last: Promise<number> | undefined;
  private staged = false;
  /** Chunks staged and not yet written (or failed). */
  private inFlight = 0;
  /** Fed eagerly ({@link addPacked}): pending members go whenever no chunk is under way. */
  private eager = false;
  private failure: { error: unknown } | undefined;
  private done = false;

  /**
   * @param memberSlot the slot written with each member (the entry's slot, 0 when unknown): what a
   *   later change of the member is compared with.
   */
  constructor(
    private readonly redis: RedisClient,
    keys: RedisKeys,
    private readonly at: ScanWriteKeys,
    private readonly memberSlot: number,
  ) {
    this.staging = keys.entryStaging(at.endpointId, randomBytes(8).toString('hex'));
  }

  /**
   * Adds members of the scan (each account once over the write), packed where they were listed;
   * stages a chunk once {@link PUT_CHUNK_MEMBERS} or more are pending, or, once fed `eager`
   * (a scan of several chunks, whose first parts are small), whenever no chunk is under way. A
   * part is never split (its text is not read here): a chunk holds each of its members, in one
   * script however many, so callers hand over parts of at most {@link PUT_CHUNK_MEMBERS}.
   */
  addPacked(members: PackedMembers, eager = false): void {
    if (this.done) throw new Error('a scan write is added to after its commit');
    if (eager) this.eager = true;
    if (members.count === 0) return;
    this.pending.push(members.text);
    this.pendingCount += members.count;
    // Staged as soon as there is a chunk, or Redis is free for an eager write: more may come.
    if (this.pendingCount >= PUT_CHUNK_MEMBERS || (this.eager && this.inFlight === 0)) {
      this.stage(this.takePending());
    }
  }

  /**
   * Stages the members pending, however few, if chunks were staged already (a scan of fewer
   * members is still written by the commit's one script): for a writer whose last members are
   * known to come late, so that Redis writes these meanwhile.
   */
  flush(): void {
    if (this.done) throw new Error('a scan write is flushed after its commit');
    if (this.staged && this.pendingCount > 0) this.stage(this.takePending());
  }

  /** {@link addPacked} of `members`, a chunk at a time. */
  add(members: readonly ScannedMember[]): void {
    for (let from = 0; from < members.length; from += PUT_CHUNK_MEMBERS) {
      this.addPacked(packMembers(members.slice(from, from + PUT_CHUNK_MEMBERS)));
    }
  }

  /**
   * Writes the scan as `entry` (its labels are the members added; its slot must be the
   * `memberSlot` given) unless the stored entry is newer (`SplitEntries.put` says when).
   *
   * @returns 'written', or 'kept' when the stored entry was newer (what was staged is dropped).
   * @throws a staged chunk's Redis error, or the commit's; TypeError for an entry whose slots are
   *   not slots.
   */
  async commit(
    entry: Omit<CacheEntry, 'labels' | 'accounts'>,
    ceiling?: number,
    now = Date.now(),
  ): Promise<'written' | 'kept'> {
    this.done = true;
    const [slot, fetchedAt] = entryArgs({ ...entry, labels: [] });
    if ((entry.slot ?? 0) !== this.memberSlot) {
      throw new TypeError(
        `entry slot ${String(entry.slot)} is not the members' ${this.memberSlot}`,
      );
    }
    const args: string[] = [
      slot,
      fetchedAt,
      entry.scanSlot === undefined ? '' : String(entry.scanSlot),
      isSlot(entry.scannedAt) ? String(entry.scannedAt) : '',
      String(this.at.ttlMs),
      isSlot(ceiling) ? String(ceiling) : '',
      String(now),
      this.at.parent,
    ];
    if (!this.staged) args.push('m', this.takePending());
    else {
      if (this.pendingCount > 0) this.stage(this.takePending());
      await this.settled();
      args.push('s');
    }
    const keys = [...this.at.split, this.staging.labels, this.staging.members];
    const rev = await SCRIPTS.put.run(this.redis, keys, args);
    return rev > 0 ? 'written' : 'kept';
  }

  /**
   * Gives the write up (the scan failed): once its chunks are done, drops what they staged. Their
   * member-parents fields stay (each names this parent for an account the scan found under it),
   * as after a worker that died mid-write.
   */
  async abandon(): Promise<void> {
    this.done = true;
    this.takePending();
    if (!this.staged) return;
    // A chunk's failure is why the scan is given up, or beside the point now.
    await this.settled().catch(() => undefined);
    await this.redis.del(this.staging.labels, this.staging.members);
  }

  /** The pending members' text; none are pending then. */
  private takePending(): string {
    const text = this.pending.join('');
    this.pending = [];
    this.pendingCount = 0;
    return text;
  }

  /** Queues `chunk` (packed members) behind the chunks before it. */
  private stage(chunk: string): void {
    this.staged = true;
    this.inFlight++;
    this.chain = this.chain.then(async () => {
      if (this.failure) {
        this.inFlight--;
        return;
      }
      const sent = SCRIPTS.putChunk.run(
        this.redis,
        [this.staging.labels, this.staging.members, this.at.split[3]],
        [this.at.parent, String(STAGING_TTL_MS), String(this.memberSlot), chunk],
      );
      sent.then(
        () => this.written(),
        (error: unknown) => {
          this.failure ??= { error };
          this.inFlight--;
        },
      );
      const before = this.last;
      this.last = sent;
      await before?.catch(() => undefined);
    });
  }

  /** A chunk is written: an eager write then sends what is pending if no other is under way. */
  private written(): void {
    this.inFlight--;
    if (this.eager && !this.done && this.inFlight === 0 && this.pendingCount > 0) {
      this.stage(this.takePending());
    }
  }

  /** Resolves once every chunk is done. @throws the first chunk's failure. */
  private async settled(): Promise<void> {
    await this.chain;
    await this.last?.catch(() => undefined);
    if (this.failure) throw this.failure.error;
  }
}
