import { PublicKey } from '@solana/web3.js';
import { describe, expect, it } from 'vitest';
import type { FollowRecord } from '../src/core/cache/follow-status.js';
import { HEAD_SLICE, NAME_PROGRAM } from '../worker/follow/name-program.js';
import { PAIRING_MS, Patcher } from '../worker/follow/patcher.js';
import { StatusReport } from '../worker/follow/status-report.js';
import type { ApplyVerdict, MemberChange } from '../worker/follow/types.js';
import { SimChain } from '../tools/rpc-sim/index.js';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import {
  FakeClock,
  FakeRpc,
  FakeStore,
  fakeFollower,
  quietDeps,
  settle,
  trustingSlots,
  tx,
} from './support/follow-fakes.js';

/**
 * A heal hands the accounts its gap read to the patcher, whose writes to the entries are
 * asynchronous (docs/design.md, "Gaps"): the stream vouches for the entries again only once each
 * is written, or its parent's re-read asked. Vouching before would answer an entry `HIT`, current,
 * without a change the heal had already found.
 */

const PARENT = 'parent1';
const chain = new SimChain();
const EPOCH = 1_600_000_000_000;
const STORED: FollowRecord = {
  epoch: EPOCH,
  healthyUntil: 0,
  mode: 'program',
  lastSignature: 'before',
};

/** A store whose member writes and owed marks wait, while `held`, until `release` is called. */
class GatedStore extends FakeStore {
  held = true;
  private waiting: Array<() => void> = [];
  /** Member writes begun (waiting or done). */
  writes = 0;
  /** Owed marks begun (waiting or done). */
  marks = 0;

  release(): void {
    this.held = false;
    for (const go of this.waiting.splice(0)) go();
  }

  override async markOwed(parent: string, slot: number): Promise<boolean> {
    this.marks++;
    if (this.held) await new Promise<void>((go) => this.waiting.push(go));
    return super.markOwed(parent, slot);
  }

  override async applyChanges(
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
  ): Promise<ApplyVerdict> {
    this.writes++;
    if (this.held) await new Promise<void>((go) => this.waiting.push(go));
    return super.applyChanges(parent, changes, slot);
  }
}

/** The gap holds `signature` at `slot`, writing `accounts` (read back as the chain holds them). */
function gapWrites(rpc: FakeRpc, signature: string, slot: number, accounts: PublicKey[]) {
  rpc.sigs = [
    { signature, slot, failed: false },
    { signature: 'before', slot: 80, failed: false },
  ];
  rpc.setTx(
    signature,
    tx(
      slot,
      accounts.map((a) => [0, a.toBase58()]),
    ),
  );
  for (const key of accounts) {
    const data = chain.getAccount(key)?.data ?? Buffer.alloc(0);
    rpc.accountsByKey.set(key.toBase58(), {
      owner: NAME_PROGRAM,
      head: Buffer.from(data.subarray(0, HEAD_SLICE.length)),
    });
  }
}

/** A follower taking a heal over, its socket confirmed: the heal begins within a few seconds. */
async function healing(store: FakeStore, rpc: FakeRpc) {
  const fake = fakeFollower({ stored: STORED, rpc, store });
  fake.follower.start();
  await fake.clock.advance(100);
  fake.confirm();
  return fake;
}

describe('a heal vouches only once the entries hold what its gap read', () => {
  it('does not vouch while the write of a subdomain made in the gap waits', async () => {
    const store = new GatedStore();
    const rpc = new FakeRpc();
    store.put(PARENT, 10, {});
    const made = chain.addSubdomain(PARENT, 'papaya', {
      owner: new PublicKey(Buffer.alloc(32, 5)),
    });
    gapWrites(rpc, 'add', 90, [made.subKey, made.reverseKey]);
    const { follower, clock, statuses } = await healing(store, rpc);

    await clock.advance(2_500);
    // The heal read the gap and handed both halves over; their write waits.
    expect(rpc.count('getMultipleAccounts')).toBe(1);
    expect(store.writes).toBe(1);
    const healedAt = statuses.length;
    await clock.advance(3_000);
    expect(store.labels(PARENT)).toEqual([]);
    expect(follower.healthy).toBe(false);
    expect(statuses.slice(healedAt).filter((s) => s.healthyUntil > 0)).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ epoch: EPOCH, healthyUntil: 0 });

    store.release();
    await clock.advance(1_000);
    expect(store.labels(PARENT)).toEqual(['papaya']);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)?.healthyUntil).toBeGreaterThan(clock.now());
    expect(statuses.at(-1)).toMatchObject({ epoch: EPOCH, lastSignature: 'add' });
    await follower.close();
  });

  it("does not vouch before a half read without its pair has its parent's re-read asked", async () => {
    const store = new GatedStore();
    store.release();
    const rpc = new FakeRpc();
    store.put(PARENT, 10, {});
    // Only the name account was written in the gap: nothing proves its label but a scan.
    const made = chain.addSubdomain(PARENT, 'quince', {
      owner: new PublicKey(Buffer.alloc(32, 5)),
    });
    gapWrites(rpc, 'alone', 90, [made.subKey]);
    const { follower, clock, rereads } = await healing(store, rpc);

    await clock.advance(2_500);
    expect(rpc.count('getMultipleAccounts')).toBe(1);
    expect(rereads).toEqual([]);
    expect(follower.healthy).toBe(false);
    await clock.advance(PAIRING_MS);
    expect(rereads).toEqual([[PARENT, 100]]);
    expect(follower.healthy).toBe(true);
    await follower.close();
  });

  it('marks owed, before it vouches, an entry whose change the heal left to a re-read', async () => {
    const store = new GatedStore();
    const rpc = new FakeRpc();
    store.put(PARENT, 10, {});
    // Longer than the stream's slice: its reverse record proves nothing, the parent is re-read.
    const long = 'a-label-made-in-the-gap-longer-than-the-slice';
    const made = chain.addSubdomain(PARENT, long, { owner: new PublicKey(Buffer.alloc(32, 5)) });
    gapWrites(rpc, 'long', 90, [made.reverseKey]);
    const { follower, clock, rereads, statuses } = await healing(store, rpc);

    await clock.advance(2_500);
    expect(rereads).toEqual([[PARENT, 100]]);
    expect(store.labels(PARENT)).toEqual([]);
    // The re-read is a scan that may take seconds: until it is stored the entry is not vouched
    // for, so the heal vouches only once the entry says so.
    await clock.advance(3_000);
    expect(store.marks).toBe(1);
    expect(follower.healthy).toBe(false);
    store.release();
    await clock.advance(1_000);
    expect(store.owed.get(PARENT)).toBe(100);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)).toMatchObject({ epoch: EPOCH, lastSignature: 'long' });
    await follower.close();
  });
});

describe('what the patcher settles', () => {
  /** The head of `key` as the stream slices it. */
  const head = (key: PublicKey) =>
    Buffer.from((chain.getAccount(key)?.data ?? Buffer.alloc(0)).subarray(0, HEAD_SLICE.length));
  const note = (key: PublicKey, slot: number) => ({
    slot,
    pubkey: key.toBase58(),
    head: head(key),
  });

  it('is what was handed in before it, not what comes after, nor what a parent let go waits for', async () => {
    const store = new GatedStore();
    store.put(PARENT, 10, {});
    const clock = new FakeClock();
    const rereads: Array<[string, number | undefined]> = [];
    const patcher = new Patcher({
      store,
      clock,
      slots: trustingSlots(),
      reread: (parent, slot) => rereads.push([parent, slot]),
      changed: () => undefined,
      ...quietDeps(),
    });
    const parentKey = toBase58(domainKey(PARENT));
    const owner = new PublicKey(Buffer.alloc(32, 5));
    const a = chain.addSubdomain(PARENT, 'rambutan', { owner });
    const b = chain.addSubdomain(PARENT, 'salak', { owner });
    patcher.notify(PARENT, parentKey, note(a.subKey, 20));
    patcher.notify(PARENT, parentKey, note(a.reverseKey, 20));
    let first = false;
    void patcher.settled().then(() => (first = true));
    // After the call: its name account waits for its pair once the write before it is done.
    patcher.notify(PARENT, parentKey, note(b.subKey, 21));
    await settle();
    expect(first).toBe(false);
    store.release();
    await settle();
    expect(store.labels(PARENT)).toEqual(['rambutan']);
    expect(first).toBe(true);
    expect(rereads).toEqual([]);

    let second = false;
    void patcher.settled().then(() => (second = true));
    await settle();
    expect(second).toBe(false);
    patcher.forget(PARENT);
    await settle();
    expect(second).toBe(true);
    await clock.advance(PAIRING_MS);
    expect(rereads).toEqual([]);
  });
});

describe('a re-read asked during a heal', () => {
  it('marks its entry owed at its slot, and marks nothing, with no new epoch, at no slot known', async () => {
    const store = new FakeStore();
    store.put(PARENT, 10, {});
    const statuses: FollowRecord[] = [];
    const report = new StatusReport({
      clock: new FakeClock(),
      slots: { newest: undefined },
      store,
      changed: () => undefined,
      status: { read: async () => STORED, write: async (s) => void statuses.push(s) },
      deletesSince: () => undefined,
      ...quietDeps(),
    });
    await report.resume();
    report.asked(PARENT, undefined, true);
    report.asked(PARENT, 40, false);
    await report.marked();
    expect(store.owed.size).toBe(0);
    report.asked(PARENT, 50, true);
    await report.marked();
    expect(store.owed.get(PARENT)).toBe(50);
    expect(report.epoch).toBe(EPOCH);
  });
});
