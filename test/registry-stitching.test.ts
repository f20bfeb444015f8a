import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import {
  RegistryIndex,
  type PieceMember,
  type RegistryOp,
} from '../src/core/cache/registry-index.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { createLogger } from '../src/core/logger.js';
import { REVERSE_LOOKUP_CLASS, reverseKeyFromDomainKey, toBase58 } from '../src/core/sns/pda.js';
import { HEAD_SLICE } from '../worker/follow/name-program.js';
import { RegistryFeed, type FeedRpc } from '../worker/registry/feed.js';
import { subdomainKey } from '../worker/sns/change.js';
import { deletePrefix, uniquePrefix, waitFor } from './support/gateway.js';

/**
 * Stitching a bootstrap with the stream (docs/design.md, "The registry index"): a fact the stream
 * saw at a slot after a piece's wins over that piece, whichever is written first, and nothing old
 * brings a deleted name back. Each case writes the two orders on a real Redis.
 */
describe('registry index stitching', () => {
  let redis: Redis;
  let prefix: string;
  let index: RegistryIndex;
  const PK = 'ParentKey1111111111111111111111111111111111';
  const member = (n: number, owner: string | null = `Owner${n}`): PieceMember => ({
    parentKey: PK,
    account: `Sub${n}`,
    reverse: `Rev${n}`,
    label: `label${n}`,
    owner,
  });
  const labels = async () => (await index.members(PK)).members.map((m) => m.label);
  const ownerOf = async (n: number) =>
    (await index.members(PK)).members.find((m) => m.account === `Sub${n}`)?.owner;

  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  beforeEach(async () => {
    prefix = uniquePrefix();
    index = new RegistryIndex(redis, prefix);
    expect(await index.start(2)).toEqual({ run: 1, started: true });
  });
  afterAll(async () => {
    redis.disconnect();
  });

  it('keeps a deletion the stream saw after the piece read, whether the piece is written before or after it', async () => {
    // Piece first, then the late Delete of the name account.
    await index.writePiece(1, undefined, 100, 100, [member(1), member(2)]);
    await index.apply([{ op: 'delete', slot: 105, account: 'Sub1' }]);
    expect(await labels()).toEqual(['label2']);
    // The Delete arrives before the piece read before it (the account not yet indexed): journal.
    await index.apply([{ op: 'delete', slot: 110, account: 'Rev3' }]);
    await index.writePiece(1, undefined, 100, 100, [member(3)]);
    expect(await labels()).toEqual(['label2']);
    // A piece read before the deletion, written again (a retried page), brings nothing back.
    await index.writePiece(1, undefined, 100, 100, [member(1), member(3)]);
    expect(await labels()).toEqual(['label2']);
    await deletePrefix(redis, prefix);
  });

  it('keeps a transfer the stream saw after the owners were read', async () => {
    // The transfer comes before the piece: the member is not there yet, the journal keeps it.
    await index.apply([{ op: 'owner', slot: 120, parentKey: PK, account: 'Sub4', owner: 'New' }]);
    await index.writePiece(1, undefined, 100, 110, [member(4)]);
    expect(await ownerOf(4)).toBe('New');
    // Read after the transfer (owners at 130): the piece's owner is the new one anyway.
    await index.apply([{ op: 'owner', slot: 125, parentKey: PK, account: 'Sub5', owner: 'Mid' }]);
    await index.writePiece(1, undefined, 100, 130, [member(5, 'Newest')]);
    expect(await ownerOf(5)).toBe('Newest');
    // After the piece: a transfer at a later slot applies, a late older one does not.
    await index.apply([{ op: 'owner', slot: 140, parentKey: PK, account: 'Sub4', owner: 'Later' }]);
    await index.apply([{ op: 'owner', slot: 135, parentKey: PK, account: 'Sub4', owner: 'Old' }]);
    expect(await ownerOf(4)).toBe('Later');
    await deletePrefix(redis, prefix);
  });

  it('lists an addition the stream saw during the build, and a piece read before it keeps it', async () => {
    // The name account first (its owner), then the reverse record: listed at once.
    await index.apply([
      { op: 'owner', slot: 150, parentKey: PK, account: 'Sub6', owner: 'Owner6' },
      { op: 'label', slot: 150, parentKey: PK, account: 'Sub6', reverse: 'Rev6', label: 'label6' },
    ]);
    expect(await labels()).toEqual(['label6']);
    // A piece read before it (it does not have it) changes nothing; one that has it neither.
    await index.writePiece(1, undefined, 100, 100, [member(7)]);
    await index.writePiece(1, undefined, 100, 100, [member(6, null)]);
    expect(await labels()).toEqual(['label6', 'label7']);
    expect(await ownerOf(6)).toBe('Owner6');
    await deletePrefix(redis, prefix);
  });

  it('never lets an addition older than a removal bring the name back', async () => {
    await index.writePiece(1, undefined, 100, 100, [member(8)]);
    await index.apply([{ op: 'delete', slot: 200, account: 'Rev8' }]);
    // A late notification of the reverse record's creation (older than the Delete).
    await index.apply([
      { op: 'label', slot: 150, parentKey: PK, account: 'Sub8', reverse: 'Rev8', label: 'label8' },
    ]);
    expect(await labels()).toEqual([]);
    // Made again later: listed again.
    await index.apply([
      { op: 'label', slot: 210, parentKey: PK, account: 'Sub8', reverse: 'Rev8', label: 'label8' },
    ]);
    expect(await labels()).toEqual(['label8']);
    await deletePrefix(redis, prefix);
  });

  it('completes with the last shard, drops the journal, and refuses pieces of another build', async () => {
    await index.apply([{ op: 'delete', slot: 300, account: 'Unknown' }]);
    const keys = redisKeys(prefix);
    expect(await redis.exists(keys.registryJournal)).toBe(1);
    expect(await index.writePiece(1, '00', 100, 100, [])).toEqual({ written: 0, done: 1 });
    expect((await index.state()).status).toBe('building');
    expect(await index.writePiece(1, '01', 100, 100, [member(9)])).toEqual({
      written: 1,
      done: 2,
    });
    const state = await index.state();
    expect(state.status).toBe('complete');
    expect(state.completedAt).toBeGreaterThan(0);
    expect(await redis.exists(keys.registryJournal)).toBe(0);
    // After completion an owner of an account the index does not hold is dropped (no journal).
    await index.apply([{ op: 'owner', slot: 400, parentKey: PK, account: 'Nope', owner: 'X' }]);
    expect(await redis.exists(keys.registryJournal)).toBe(0);
    expect(await index.writePiece(2, '00', 100, 100, [member(10)])).toBeNull();
    // A rebuild is a new run; the old run's pieces are then refused.
    expect((await index.start(2, true)).run).toBe(2);
    expect(await index.writePiece(1, '00', 500, 500, [member(11)])).toBeNull();
    await deletePrefix(redis, prefix);
  });

  it('makes a rebuild after an unhealed gap the chain at its pages: a missed Delete goes', async () => {
    const add = (n: number, slot: number) =>
      index.apply([
        { op: 'owner', slot, parentKey: PK, account: `Sub${n}`, owner: `Owner${n}` },
        {
          op: 'label',
          slot,
          parentKey: PK,
          account: `Sub${n}`,
          reverse: `Rev${n}`,
          label: `label${n}`,
        },
      ]);
    await index.writePiece(1, '00', 100, 100, [member(1), member(2), member(3)]);
    await index.writePiece(1, '01', 105, 105, []);
    expect(await labels()).toEqual(['label1', 'label2', 'label3']);
    // The stream loses the Delete of label1 (a gap it could not heal); a rebuild begins.
    expect((await index.start(2, true)).run).toBe(2);
    // During it: label3 transferred at 250 (before the pages), label5 added after them (320).
    await index.apply([{ op: 'owner', slot: 250, parentKey: PK, account: 'Sub3', owner: 'New3' }]);
    // Until the rebuild completes, the old build's members read as they were.
    expect(await labels()).toEqual(['label1', 'label2', 'label3']);
    await index.writePiece(2, '00', 300, 300, [member(2), member(3, 'New3')]);
    await add(5, 320);
    await index.writePiece(2, '01', 310, 310, []);
    expect((await index.state()).floor).toBe(300);
    expect(await labels()).toEqual(['label2', 'label3', 'label5']);
    expect(await ownerOf(3)).toBe('New3');
    expect(await index.member(PK, 'Sub1')).toEqual({ slot: 300, owner: '', label: '-' });
    // A late notification from before the rebuild does not bring it back; made again, it is listed.
    await add(1, 150);
    expect(await labels()).toEqual(['label2', 'label3', 'label5']);
    await add(1, 400);
    expect(await labels()).toEqual(['label1', 'label2', 'label3', 'label5']);
    // A late fact of a member the index never held, older than the floor, writes nothing.
    await add(6, 200);
    expect(await index.member(PK, 'Sub6')).toBeNull();
    await deletePrefix(redis, prefix);
  });

  it('keeps a journaled fact as the newest: a late older notification does not undo it', async () => {
    // A Delete of the name account at 120, before any page wrote the member: journaled.
    await index.apply([{ op: 'delete', slot: 120, account: 'Sub20' }]);
    // A transfer at 130 after the owners were read (110), journaled too.
    await index.apply([{ op: 'owner', slot: 130, parentKey: PK, account: 'Sub21', owner: 'New' }]);
    // The reverse record's Delete at 125.
    await index.apply([{ op: 'delete', slot: 125, account: 'Rev22' }]);
    await index.writePiece(1, undefined, 100, 110, [member(20), member(21), member(22)]);
    expect(await labels()).toEqual(['label21']);
    expect(await ownerOf(21)).toBe('New');
    // Notifications older than those facts, though newer than the page, arrive late.
    await index.apply([
      { op: 'owner', slot: 115, parentKey: PK, account: 'Sub20', owner: 'Owner20' },
      { op: 'owner', slot: 120, parentKey: PK, account: 'Sub21', owner: 'Mid' },
      {
        op: 'label',
        slot: 115,
        parentKey: PK,
        account: 'Sub22',
        reverse: 'Rev22',
        label: 'label22',
      },
    ]);
    expect(await labels()).toEqual(['label21']);
    expect(await ownerOf(21)).toBe('New');
    await deletePrefix(redis, prefix);
  });

  it('loses and brings back nothing that lands during the build, before or after a page, in either order', async () => {
    // A page read at P = 100, its owners at Q = 110; each change lands at a slot before P, between
    // P and Q, or after Q, and reaches the index before or after the page is written.
    const P = 100;
    const Q = 110;
    type Case = {
      kind: 'add' | 'transfer' | 'delete';
      slot: number;
      streamFirst: boolean;
      n: number;
    };
    const cases: Case[] = [];
    let n = 100;
    for (const kind of ['add', 'transfer', 'delete'] as const)
      for (const slot of [95, 105, 115])
        for (const streamFirst of [true, false]) cases.push({ kind, slot, streamFirst, n: n++ });
    const label = (c: Case, slot: number): RegistryOp => ({
      op: 'label',
      slot,
      parentKey: PK,
      account: `Sub${c.n}`,
      reverse: `Rev${c.n}`,
      label: `label${c.n}`,
    });
    const owner = (c: Case, slot: number, who: string): RegistryOp => ({
      op: 'owner',
      slot,
      parentKey: PK,
      account: `Sub${c.n}`,
      owner: who,
    });
    /** What the stream sees of a change. */
    const streamOf = (c: Case): RegistryOp[] =>
      c.kind === 'delete'
        ? [
            { op: 'delete', slot: c.slot, account: `Sub${c.n}` },
            { op: 'delete', slot: c.slot, account: `Rev${c.n}` },
          ]
        : [owner(c, c.slot, `New${c.n}`), ...(c.kind === 'add' ? [label(c, c.slot)] : [])];
    /** What the page read of the member: its reverse record at P, its owner at Q. */
    const pageOf = (c: Case): PieceMember[] => {
      if (c.kind === 'add')
        return c.slot <= P ? [member(c.n, c.slot <= Q ? `New${c.n}` : null)] : [];
      if (c.kind === 'transfer') return [member(c.n, c.slot <= Q ? `New${c.n}` : `Owner${c.n}`)];
      return c.slot <= P ? [] : [member(c.n, c.slot <= Q ? null : `Owner${c.n}`)];
    };
    for (const c of cases.filter((c) => c.streamFirst)) await index.apply(streamOf(c));
    await index.writePiece(1, undefined, P, Q, cases.flatMap(pageOf));
    for (const c of cases.filter((c) => !c.streamFirst)) await index.apply(streamOf(c));
    /** Late notifications of a member as it was before its change (none before an addition). */
    const stale = (c: Case): RegistryOp[] =>
      c.kind === 'add' ? [] : [owner(c, c.slot - 1, `Owner${c.n}`), label(c, c.slot - 1)];
    const check = async () => {
      const listed = new Map((await index.members(PK)).members.map((m) => [m.account, m.owner]));
      for (const c of cases) {
        const want = c.kind === 'delete' ? undefined : `New${c.n}`;
        expect({ ...c, owner: listed.get(`Sub${c.n}`) }).toEqual({ ...c, owner: want });
      }
    };
    await index.apply(cases.flatMap(stale));
    await check();
    // Completing the build (its floor is the page's slot) changes none of it.
    await index.writePiece(1, '00', P, Q, []);
    await index.writePiece(1, '01', P, Q, []);
    expect((await index.state()).status).toBe('complete');
    await index.apply(cases.flatMap(stale));
    await check();
    await deletePrefix(redis, prefix);
  });

  it('holds a subdomain in at most 300 bytes of Redis, on the benchmark registry', async () => {
    // The benchmark's registry (bench/registry.ts): 44-character base58 accounts and owners, 10,000
    // subdomains under 3,000 parents, one of them with 2,000, labels as the simulator writes them
    // (`s`, 1 to 12 letters, a base-36 index: 3 to 16 characters), and 1,000 orphan reverse
    // records kept as members never listed.
    const key = () => toBase58(randomBytes(32));
    const letters = () =>
      Array.from(randomBytes(1 + ((randomBytes(1)[0] as number) % 12)), (b) =>
        String.fromCharCode(97 + (b % 26)),
      ).join('');
    const parents = Array.from({ length: 3_000 }, key);
    const members: PieceMember[] = [];
    for (let i = 0; i < 11_000; i++) {
      const orphan = i >= 10_000;
      members.push({
        parentKey: (i < 2_000 ? parents[0] : parents[1 + (i % 2_999)]) as string,
        account: key(),
        reverse: key(),
        label: `${orphan ? 'o' : 's'}${letters()}${i.toString(36)}`,
        owner: orphan ? null : key(),
      });
    }
    for (let i = 0; i < members.length; i += 500) {
      await index.writePiece(1, undefined, 350_000_000, 350_000_000, members.slice(i, i + 500));
    }
    let bytes = 0;
    for (const k of await redis.keys(`${prefix}:registry:*`)) {
      bytes += Number(await redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
    }
    expect(bytes / 10_000).toBeLessThanOrEqual(300);
    // Owners come back as written, from their stored bytes.
    const [first] = members;
    const listed = await index.members(first?.parentKey as string);
    expect(listed.members.find((m) => m.account === first?.account)?.owner).toBe(first?.owner);
    await deletePrefix(redis, prefix);
  });
});

/**
 * The feed (worker/registry/feed.ts) between the stream and the index: what it reads besides the
 * stream never makes it lose a fact, nor declare the index behind for nothing.
 */
describe('registry feed', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterAll(() => redis.disconnect());

  /** A name account's head: parent, owner, a zero class. */
  const nameHead = (parent: Buffer, owner: Buffer) =>
    Buffer.concat([parent, owner, Buffer.alloc(32)]);
  /** A reverse record's head: parent, owner, the reverse class, the text with its leading NUL. */
  const reverseHead = (parent: Buffer, label: string) => {
    const text = Buffer.from(`\0${label}`);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(text.length);
    return Buffer.concat([parent, randomBytes(32), REVERSE_LOOKUP_CLASS, len, text]);
  };

  it('fills an owner read at a slot the clock does not believe, and keeps the index served', async () => {
    const prefix = uniquePrefix();
    const index = new RegistryIndex(redis, prefix);
    await index.start(1);
    await index.writePiece(1, '00', 100, 100, []);
    expect((await index.state()).status).toBe('complete');
    const parent = randomBytes(32);
    const owner = randomBytes(32);
    const account = subdomainKey('fresh', parent);
    const reverse = toBase58(reverseKeyFromDomainKey(account, parent));
    const lost: string[] = [];
    const feed = new RegistryFeed({
      index,
      // The node answers at a slot past the clock's ceiling: the read's slot is unknown.
      rpc: {
        accounts: async (keys) => ({
          slot: undefined,
          accounts: keys.map((k) => (k === account ? { head: nameHead(parent, owner) } : null)),
        }),
      },
      logger: createLogger('silent'),
      lost: (why) => lost.push(why),
    });
    // The reverse record of a new subdomain, its name account's notification missed: the feed
    // reads the owner.
    feed.onAccount({ slot: 200, pubkey: reverse, head: reverseHead(parent, 'fresh') });
    await feed.idle();
    expect(lost).toEqual([]);
    expect((await index.members(toBase58(parent))).members).toEqual([
      { label: 'fresh', account, owner: toBase58(owner) },
    ]);
    await deletePrefix(redis, prefix);
  });

  it('reads the texts the stream cut in one turn together, at the latest of their slots', async () => {
    const prefix = uniquePrefix();
    const index = new RegistryIndex(redis, prefix);
    await index.start(1);
    await index.writePiece(1, '00', 100, 100, []);
    const parent = randomBytes(32);
    const owner = randomBytes(32);
    const labels = ['a', 'b', 'c'].map((c) => c.repeat(60)); // longer than the stream's slice
    const records = labels.map((label) => {
      const account = subdomainKey(label, parent);
      const reverse = toBase58(reverseKeyFromDomainKey(account, parent));
      return { label, account, reverse, head: reverseHead(parent, label) };
    });
    const whole = new Map(records.map((r) => [r.reverse, r.head]));
    const reads: Array<{ keys: readonly string[]; minContextSlot?: number }> = [];
    const rpc: FeedRpc = {
      accounts: async (keys, opts) => {
        if (opts?.whole) reads.push({ keys, minContextSlot: opts.minContextSlot });
        const head = (k: string) =>
          opts?.whole
            ? whole.get(k)
            : records.some((r) => r.account === k)
              ? nameHead(parent, owner)
              : undefined;
        return {
          slot: 300,
          accounts: keys.map((k) => {
            const found = head(k);
            return found ? { head: found } : null;
          }),
        };
      },
    };
    const lost: string[] = [];
    const feed = new RegistryFeed({
      index,
      rpc,
      logger: createLogger('silent'),
      lost: (why) => lost.push(why),
    });
    // Three long labels in one transaction: the stream carries each record cut at its slice.
    records.forEach((r, i) =>
      feed.onAccount({
        slot: 200 + i,
        pubkey: r.reverse,
        head: r.head.subarray(0, HEAD_SLICE.length),
      }),
    );
    await waitFor(async () => {
      await feed.idle();
      return (await index.members(toBase58(parent))).members.length === 3;
    });
    expect(reads).toEqual([{ keys: records.map((r) => r.reverse), minContextSlot: 202 }]);
    expect(lost).toEqual([]);
    await deletePrefix(redis, prefix);
  });
});
