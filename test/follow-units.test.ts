import { PublicKey } from '@solana/web3.js';
import { describe, expect, it } from 'vitest';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import { Backstop, BACKSTOP_MAX_MS } from '../worker/follow/backstop.js';
import { DELETE_READ_GRACE_MS, Deletions, TRANSACTION_TRIES } from '../worker/follow/deletions.js';
import type { FollowMode, FollowRecord } from '../src/core/cache/follow-status.js';
import { healDated } from '../src/core/cache/registry-serving.js';
import { healGap } from '../worker/follow/gaps.js';
import { Ownership, type Lease } from '../worker/follow/ownership.js';
import { ParentIndex, REPLAY_MAX, REPLAY_MS } from '../worker/follow/parent-index.js';
import { MAX_PENDING_PER_PARENT, PAIRING_MS, Patcher } from '../worker/follow/patcher.js';
import { PROBE_EVERY_MS, PROBE_GRACE_MS, SilenceProbe } from '../worker/follow/silence.js';
import { HEAD_SLICE, NAME_PROGRAM } from '../worker/follow/name-program.js';
import { HEALTHY_FOR_MS, StatusReport, type StreamState } from '../worker/follow/status-report.js';
import { FollowStream } from '../worker/follow/stream.js';
import { nameWrites } from '../worker/follow/transaction.js';
import type { AccountNote } from '../worker/follow/types.js';
import { SimChain, encodeNameAccount } from '../tools/rpc-sim/index.js';
import {
  FakeClock,
  FakeRpc,
  FakeStore,
  fakeFollower,
  quietDeps,
  settle,
  trustingSlots,
  tx,
  deleteLogs,
  fakeDeletions,
} from './support/follow-fakes.js';

/**
 * The follower's units alone (docs/design.md, "Freshness"): no websocket, no Redis; the store,
 * the RPC, the clock and the socket are fakes.
 */

const PARENT = 'parent1';
const PARENT_KEY = toBase58(domainKey(PARENT));
const chain = new SimChain();

/** A subdomain of PARENT on a scratch chain: its keys and the heads the stream would send. */
function sub(label: string, owner = new PublicKey(Buffer.alloc(32, 5))) {
  const keys = chain.addSubdomain(PARENT, label, { owner });
  const head = (key: PublicKey) =>
    Buffer.from((chain.getAccount(key)?.data ?? Buffer.alloc(0)).subarray(0, HEAD_SLICE.length));
  return {
    account: keys.subKey.toBase58(),
    reverse: keys.reverseKey.toBase58(),
    subNote: (slot: number): AccountNote => ({
      slot,
      pubkey: keys.subKey.toBase58(),
      head: head(keys.subKey),
    }),
    reverseNote: (slot: number): AccountNote => ({
      slot,
      pubkey: keys.reverseKey.toBase58(),
      head: head(keys.reverseKey),
    }),
    /** The name account's head with another owner (a transfer). */
    transferNote: (slot: number, to: PublicKey): AccountNote => {
      const data = chain.getAccount(keys.subKey)?.data ?? Buffer.alloc(0);
      const moved = encodeNameAccount(
        { parent: keys.parentKey, owner: to, nameClass: PublicKey.default },
        Buffer.from(data).subarray(96),
      );
      return { slot, pubkey: keys.subKey.toBase58(), head: moved.subarray(0, HEAD_SLICE.length) };
    },
  };
}

function patcherWith(store = new FakeStore(), slots = trustingSlots()) {
  const clock = new FakeClock();
  const rereads: Array<[string, number | undefined]> = [];
  const changed: string[] = [];
  const { metrics, logger } = quietDeps();
  const patcher = new Patcher({
    store,
    clock,
    slots,
    reread: (parent, slot) => rereads.push([parent, slot]),
    changed: (parent) => changed.push(parent),
    metrics,
    logger,
  });
  return { patcher, store, clock, rereads, changed, metrics };
}

describe('stream', () => {
  const make = () => {
    const clock = new FakeClock();
    const sent: Array<{ id: number; method: string; params: unknown[] }> = [];
    const accounts: Array<[AccountNote, string | undefined]> = [];
    const modes: string[] = [];
    const subscribed: string[] = [];
    const { metrics, logger } = quietDeps();
    const stream = new FollowStream({
      clock,
      metrics,
      logger,
      onAccount: (note, key) => accounts.push([note, key]),
      onLogs: () => undefined,
      onSubscribed: (mode) => subscribed.push(mode),
      onMode: (mode) => modes.push(mode),
    });
    const answer = (id: number, result: unknown) =>
      stream.receive(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, result })));
    const refuse = (id: number) =>
      stream.receive(
        Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: 'no' } })),
      );
    stream.opened((text) => sent.push(JSON.parse(text) as (typeof sent)[number]));
    return { stream, clock, sent, accounts, modes, subscribed, answer, refuse, metrics };
  };

  it('subscribes to the whole program (no filter, sliced from byte 0) and its logs', () => {
    const { sent, answer, subscribed, stream } = make();
    expect(sent.map((m) => m.method)).toEqual(['programSubscribe', 'logsSubscribe']);
    expect(sent[0]?.params).toEqual([
      NAME_PROGRAM,
      { encoding: 'base64', commitment: 'confirmed', dataSlice: { offset: 0, length: 130 } },
    ]);
    expect(sent[1]?.params[0]).toEqual({ mentions: [NAME_PROGRAM] });
    answer(sent[0]?.id ?? 0, 11);
    expect(subscribed).toEqual([]);
    answer(sent[1]?.id ?? 0, 12);
    expect(subscribed).toEqual(['program']);
    expect(stream.subscribed).toBe(true);
  });

  it('falls to one subscription per parent when the whole program is refused, then to off', () => {
    const { sent, refuse, answer, modes, stream, subscribed } = make();
    stream.setParents(['alpha', 'beta']);
    refuse(sent[0]?.id ?? 0);
    expect(modes).toEqual(['parents']);
    const perParent = sent.filter(
      (m) => m.method === 'programSubscribe' && JSON.stringify(m.params).includes('memcmp'),
    );
    expect(perParent).toHaveLength(2);
    expect(JSON.stringify(perParent[0]?.params)).toContain(toBase58(domainKey('alpha')));
    const logs = sent.filter((m) => m.method === 'logsSubscribe').at(-1);
    answer(perParent[0]?.id ?? 0, 21);
    answer(logs?.id ?? 0, 22);
    answer(perParent[1]?.id ?? 0, 23);
    expect(subscribed).toEqual(['parents']);
    // A subscription left unanswered past the time-out counts as refused too.
    stream.setParents(['alpha', 'beta', 'gamma']);
    const clock = (stream as unknown as { opts: { clock: FakeClock } }).opts.clock;
    void clock.advance(10_001);
    stream.tick();
    stream.setParents([]);
    expect(modes).toEqual(['parents']);
    // Every parent refused: off.
    const before = sent.length;
    stream.setParents(['delta']);
    refuse(sent[before]?.id ?? 0);
    expect(modes).toEqual(['parents', 'off']);
  });

  it('refuses notifications whose slot is not a slot, and tags whole-program ones with no key', () => {
    const { sent, answer, accounts, stream, metrics } = make();
    answer(sent[0]?.id ?? 0, 11);
    answer(sent[1]?.id ?? 0, 12);
    const note = (slot: string) =>
      Buffer.from(
        `{"jsonrpc":"2.0","method":"programNotification","params":{"subscription":11,"result":{"context":{"slot":${slot}},"value":{"pubkey":"abc","account":{"data":["${Buffer.alloc(200, 1).toString('base64')}","base64"]}}}}}`,
      );
    for (const bad of ['1e309', '9223372036854775808', '-1', '1.5', '"7"'])
      stream.receive(note(bad));
    stream.receive(note('42'));
    expect(accounts).toHaveLength(1);
    expect(accounts[0]?.[1]).toBeUndefined();
    // A provider that ignored the slice: the head is cut to the stream's length.
    expect(accounts[0]?.[0].head?.length).toBe(HEAD_SLICE.length);
    return metrics.wsNotifications.get().then((m) => {
      expect(m.values.find((v) => v.labels.outcome === 'refused')?.value).toBe(5);
    });
  });
});

describe('parent index', () => {
  it('maps parent keys to followed parents and replays what came before a parent joined', async () => {
    const clock = new FakeClock();
    const index = new ParentIndex(clock);
    const note = (slot: number): AccountNote => ({ slot, pubkey: `k${slot}`, head: undefined });
    index.keep(PARENT_KEY, note(1));
    await clock.advance(REPLAY_MS - 1_000);
    index.keep(PARENT_KEY, note(2));
    index.keep('other', note(3));
    await clock.advance(2_000);
    expect(index.add(PARENT).map((n) => n.slot)).toEqual([2]);
    expect(index.parentOf(PARENT_KEY)).toBe(PARENT);
    expect(index.add(PARENT)).toEqual([]);
    index.remove(PARENT);
    expect(index.parentOf(PARENT_KEY)).toBeUndefined();
  });

  it('keeps at most REPLAY_MAX notifications, whatever the rate', () => {
    const index = new ParentIndex(new FakeClock());
    for (let i = 0; i < REPLAY_MAX * 3; i++) {
      index.keep('other', { slot: i, pubkey: `k${i}`, head: undefined });
    }
    expect(index.kept).toBe(REPLAY_MAX);
  });
});

describe('patcher', () => {
  it('adds a subdomain once both its name account and its reverse record came, either order', async () => {
    const { patcher, store, changed } = patcherWith();
    store.put(PARENT, 10, {});
    const a = sub('apple');
    const b = sub('banana');
    patcher.notify(PARENT, PARENT_KEY, a.subNote(20));
    patcher.notify(PARENT, PARENT_KEY, a.reverseNote(21));
    patcher.notify(PARENT, PARENT_KEY, b.reverseNote(22));
    patcher.notify(PARENT, PARENT_KEY, b.subNote(22));
    await patcher.idle();
    expect(store.labels(PARENT)).toEqual(['apple', 'banana']);
    expect(store.entries.get(PARENT)?.members.get(a.account)?.slot).toBe(21);
    expect(changed).toEqual([PARENT, PARENT]);
    expect(await store.parentOfMember(a.reverse)).toEqual({ parent: PARENT, subdomain: a.account });
  });

  it('follows a transfer of a listed subdomain, and never goes back to an older owner', async () => {
    const { patcher, store } = patcherWith();
    const a = sub('cherry');
    const first = new PublicKey(Buffer.alloc(32, 5)).toBase58();
    store.put(PARENT, 10, { [a.account]: ['cherry', first] });
    const next = new PublicKey(Buffer.alloc(32, 6));
    patcher.notify(PARENT, PARENT_KEY, a.transferNote(30, next));
    await patcher.idle();
    expect((await store.member(PARENT, a.account))?.owner).toBe(next.toBase58());
    // An older notification (a lagging node, a gap read) does not move it back.
    patcher.notify(PARENT, PARENT_KEY, a.transferNote(25, new PublicKey(Buffer.alloc(32, 7))));
    await patcher.idle();
    expect((await store.member(PARENT, a.account))?.owner).toBe(next.toBase58());
  });

  it('re-reads at the slot a half whose pair never comes, and a slot ahead at the newest believed', async () => {
    const { patcher, store, clock, rereads } = patcherWith(new FakeStore(), trustingSlots(1_000));
    store.put(PARENT, 10, {});
    const a = sub('date');
    patcher.notify(PARENT, PARENT_KEY, a.subNote(40));
    await patcher.idle();
    expect(rereads).toEqual([]);
    await clock.advance(PAIRING_MS + 1);
    await patcher.idle();
    expect(rereads).toEqual([[PARENT, 40]]);
    patcher.notify(PARENT, PARENT_KEY, a.reverseNote(5_000_000));
    await patcher.idle();
    expect(rereads).toEqual([
      [PARENT, 40],
      [PARENT, 990],
    ]);
    expect(store.labels(PARENT)).toEqual([]);
  });

  it('bounds a flood: past MAX_PENDING_PER_PARENT one re-read covers what waited', async () => {
    const { patcher, store, rereads } = patcherWith();
    store.put(PARENT, 10, {});
    // Nothing applies while the flood comes (the loop is awaiting the store).
    const head = sub('elder').subNote(50).head;
    const n = MAX_PENDING_PER_PARENT * 20;
    for (let i = 0; i < n; i++) {
      const key = Buffer.alloc(32, 9);
      key.writeUInt32LE(i);
      patcher.notify(PARENT, PARENT_KEY, { slot: 50 + i, pubkey: toBase58(key), head });
      expect(patcher.pending).toBeLessThanOrEqual(MAX_PENDING_PER_PARENT);
    }
    await patcher.idle();
    expect(rereads.length).toBeGreaterThan(0);
    expect(rereads.length).toBeLessThan(n / MAX_PENDING_PER_PARENT + 2);
  });
});

/** A `getTransaction` result (json encoding) of the name program's instructions. */
describe('transactions', () => {
  it('finds the first account of each Delete, inner instructions included, and other writes', () => {
    expect(
      nameWrites(
        tx(
          9,
          [
            [3, 'aaa'],
            [2, 'bbb'],
          ],
          [
            [3, 'ccc'],
            [0, 'ddd'],
          ],
        ),
      ),
    ).toEqual({
      slot: 9,
      deleted: ['aaa', 'ccc'],
      // In the order they ran: the inner instructions of the first before the second.
      written: ['ddd', 'bbb'],
    });
    expect(nameWrites({ ...tx(9, [[3, 'aaa']]), meta: { err: { x: 1 } } })).toBe('failed');
    expect(nameWrites(null)).toBeUndefined();
  });
});

describe('deletions', () => {
  const make = () => fakeDeletions();

  it('removes a member whose name account a Delete closed, reading only deleting transactions', async () => {
    const { store, rpc, deletions, changed } = make();
    const a = sub('fig');
    store.put(PARENT, 10, { [a.account]: ['fig', 'o'], other: ['grape', 'o'] });
    rpc.setTx('sig1', tx(60, [[3, a.account]]));
    deletions.onLogs({
      slot: 59,
      signature: 'sig0',
      failed: false,
      logs: ['Program log: Instruction: Create'],
    });
    deletions.onLogs(deleteLogs('sigF', true));
    deletions.onLogs(deleteLogs('sig1'));
    await deletions.idle();
    expect(rpc.calls).toEqual(['getTransaction sig1']);
    expect(store.labels(PARENT)).toEqual(['grape']);
    expect(changed).toEqual([PARENT]);
  });

  it('maps a deleted reverse record to its member', async () => {
    const { store, rpc, deletions } = make();
    const a = sub('guava');
    store.put(PARENT, 10, { [a.account]: ['guava', 'o', a.reverse] });
    rpc.setTx('sig2', tx(61, [], [[3, a.reverse]]));
    deletions.onLogs(deleteLogs('sig2'));
    await deletions.idle();
    expect(store.labels(PARENT)).toEqual([]);
  });

  it('tries a transaction a lagging node does not have yet again, with back-off, then gives up', async () => {
    const { store, rpc, clock, deletions, lost } = make();
    const a = sub('honeydew');
    store.put(PARENT, 10, { [a.account]: ['honeydew', 'o'] });
    rpc.setTx('sig3', null, null, tx(62, [[3, a.account]]));
    deletions.onLogs(deleteLogs('sig3'));
    await settle();
    expect(rpc.count('getTransaction')).toBe(1);
    await clock.advance(250);
    expect(rpc.count('getTransaction')).toBe(2);
    await clock.advance(500);
    await deletions.idle();
    expect(store.labels(PARENT)).toEqual([]);
    deletions.onLogs(deleteLogs('never'));
    await clock.advance(60_000);
    await deletions.idle();
    expect(rpc.count('getTransaction never')).toBe(TRANSACTION_TRIES);
    expect(lost).toEqual(['never']);
  });

  it('says since when a Delete has waited for its read past the grace, until it is read', async () => {
    const { store, rpc, clock, deletions } = make();
    const a = sub('kiwi');
    store.put(PARENT, 10, { [a.account]: ['kiwi', 'o'] });
    rpc.setTx('sig4', null, null, null, null, tx(63, [[3, a.account]]));
    const reportedAt = clock.now();
    deletions.onLogs(deleteLogs('sig4'));
    await settle();
    expect(deletions.waitingSince(clock.now())).toBeUndefined();
    await clock.advance(DELETE_READ_GRACE_MS);
    expect(deletions.waitingSince(clock.now())).toBe(reportedAt);
    await clock.advance(60_000);
    await deletions.idle();
    expect(store.labels(PARENT)).toEqual([]);
    expect(deletions.waitingSince(clock.now())).toBeUndefined();
  });
});

describe('gaps', () => {
  it('reads the transactions since the last one seen and feeds their accounts; deletes removed', async () => {
    const store = new FakeStore();
    const rpc = new FakeRpc();
    const a = sub('kiwi');
    const b = sub('lime');
    store.put(PARENT, 10, { [b.account]: ['lime', 'o'] });
    rpc.sigs = [
      { signature: 's3', slot: 70, failed: false },
      { signature: 's2', slot: 69, failed: false },
      { signature: 'old', slot: 50, failed: false },
    ];
    rpc.setTx(
      's2',
      tx(69, [
        [0, a.account],
        [0, a.reverse],
      ]),
    );
    rpc.setTx('s3', tx(70, [[3, b.account]]));
    rpc.accountsByKey.set(a.account, { owner: NAME_PROGRAM, head: a.subNote(0).head as Buffer });
    rpc.accountsByKey.set(a.reverse, {
      owner: NAME_PROGRAM,
      head: a.reverseNote(0).head as Buffer,
    });
    const fed: Array<[string, string]> = [];
    const deletions = new Deletions({
      rpc,
      store,
      clock: new FakeClock(),
      slots: trustingSlots(),
      reread: () => undefined,
      changed: () => undefined,
      lost: () => undefined,
      ...quietDeps(),
    });
    const outcome = await healGap(
      {
        rpc,
        deletions,
        feed: (note, key) => fed.push([note.pubkey, key]),
        logger: quietDeps().logger,
      },
      'old',
    );
    expect(outcome).toEqual({ healed: true, newest: 's3' });
    expect(fed).toEqual([
      [a.account, PARENT_KEY],
      [a.reverse, PARENT_KEY],
    ]);
    expect(store.labels(PARENT)).toEqual([]);
    expect(rpc.calls).toEqual([
      'getSignaturesForAddress  501',
      'getTransaction s2',
      'getTransaction s3',
      'getMultipleAccounts 2',
    ]);
  });

  it('asks for a new epoch when the gap is too long, refused, or has no start', async () => {
    const rpc = new FakeRpc();
    const deps = {
      rpc,
      deletions: { removeDeleted: async () => 0 },
      feed: () => undefined,
      logger: quietDeps().logger,
      maxSignatures: 2,
    };
    rpc.sigs = [1, 2, 3, 4].map((i) => ({ signature: `s${i}`, slot: i, failed: false }));
    expect((await healGap(deps, 'zzz')).healed).toBe(false);
    expect((await healGap(deps, undefined)).healed).toBe(false);
    rpc.failSignatures = true;
    expect((await healGap(deps, 's1')).healed).toBe(false);
  });
});

describe('silence probe', () => {
  it('reports a transaction the stream did not bring within the grace, and costs one call a probe', async () => {
    const clock = new FakeClock();
    const rpc = new FakeRpc();
    const seen = new Set<string>();
    const silent: string[] = [];
    const probe = new SilenceProbe({
      rpc,
      clock,
      seen: (s) => seen.has(s),
      silent: (s) => silent.push(s),
    });
    probe.start();
    rpc.sigs = [{ signature: 'a', slot: 1, failed: false }];
    seen.add('a');
    await clock.advance(PROBE_EVERY_MS + PROBE_GRACE_MS);
    expect(silent).toEqual([]);
    rpc.sigs = [{ signature: 'b', slot: 2, failed: false }];
    // The next probe runs (at 60 s) and finds 'b'; the stream brings it within the grace.
    await clock.advance(25_000);
    seen.add('b');
    await clock.advance(PROBE_GRACE_MS);
    expect(silent).toEqual([]);
    rpc.sigs = [{ signature: 'c', slot: 3, failed: false }];
    await clock.advance(PROBE_EVERY_MS + PROBE_GRACE_MS);
    expect(silent).toEqual(['c']);
    probe.stop();
    expect(rpc.count('getSignaturesForAddress')).toBe(3);
  });
});

describe('backstop', () => {
  /**
   * A backstop over fakes with a window of `freshMs` (a check costs 1, a scan 10); `changed` lists
   * the parents it put right.
   */
  const backstopWith = (freshMs: number) => {
    const clock = new FakeClock();
    const store = new FakeStore();
    const rpc = new FakeRpc();
    const changed: string[] = [];
    const backstop = new Backstop({
      rpc,
      store,
      clock,
      slots: trustingSlots(),
      freshMs,
      checkCost: 1,
      scanCost: 10,
      reread: () => undefined,
      changed: (parent) => changed.push(parent),
      epoch: () => 0,
      metrics: quietDeps().metrics,
    });
    return { backstop, clock, store, rpc, changed };
  };
  /** Puts `s`'s name account and reverse record on the fake RPC's chain, as of slot 10. */
  const onChain = (rpc: FakeRpc, s: ReturnType<typeof sub>) => {
    rpc.accountsByKey.set(s.account, { owner: NAME_PROGRAM, head: s.subNote(10).head as Buffer });
    rpc.accountsByKey.set(s.reverse, { owner: NAME_PROGRAM, head: Buffer.alloc(0) });
  };

  it('backs off a quiet parent from a window to a day: at most one credit a day once settled', async () => {
    const freshMs = 60_000;
    const { backstop, clock, store, rpc } = backstopWith(freshMs);
    const a = sub('mango');
    const owner = new PublicKey(Buffer.alloc(32, 5)).toBase58();
    store.put(PARENT, 10, { [a.account]: ['mango', owner] });
    onChain(rpc, a);
    backstop.sync([PARENT]);
    const day = 24 * 3600_000;
    for (let t = 0; t < 3 * day; t += 30_000) {
      await backstop.round();
      await clock.advance(30_000);
    }
    const checks = rpc.count('getMultipleAccounts');
    // Doubling from a minute reaches a day after ~11 checks; then one a day.
    expect(checks).toBeLessThanOrEqual(11 + 3);
    const before = rpc.count('getMultipleAccounts');
    for (let t = 0; t < 2 * day; t += 60_000) {
      await backstop.round();
      await clock.advance(60_000);
    }
    expect(rpc.count('getMultipleAccounts') - before).toBeLessThanOrEqual(2);
    expect((backstop.dueAt(PARENT) ?? 0) - clock.now()).toBeLessThanOrEqual(BACKSTOP_MAX_MS);
    // A deletion found: dropped, and checked again within a window.
    rpc.accountsByKey.delete(a.reverse);
    await clock.advance(day);
    await backstop.round();
    expect(store.labels(PARENT)).toEqual([]);
    expect((backstop.dueAt(PARENT) ?? 0) - clock.now()).toBe(freshMs);
  });

  it('reads names and reverse records in one call, and takes no short answer for "gone"', async () => {
    const { backstop, clock, store, rpc } = backstopWith(60_000);
    const owner = new PublicKey(Buffer.alloc(32, 5)).toBase58();
    // Sixty subdomains: their 120 keys in one read (which the RPC client sends 100 a call).
    const subs = Array.from({ length: 60 }, (_, i) => sub(`quince${i}`));
    store.put(
      PARENT,
      10,
      Object.fromEntries(subs.map((s, i) => [s.account, [`quince${i}`, owner]])),
    );
    for (const s of subs) onChain(rpc, s);
    backstop.sync([PARENT]);
    await clock.advance(60_000);
    await backstop.round();
    expect(rpc.calls).toEqual(['getMultipleAccounts 120']);
    expect(store.labels(PARENT)).toHaveLength(60);
    // An answer one entry short proves nothing: every member stays, none read as gone.
    const answer = rpc.accounts.bind(rpc);
    rpc.accounts = async (keys) => {
      const read = await answer(keys);
      return { ...read, accounts: read.accounts.slice(1) };
    };
    rpc.accountsByKey.delete((subs[0] as (typeof subs)[number]).reverse);
    await clock.advance(BACKSTOP_MAX_MS);
    await backstop.round();
    expect(store.labels(PARENT)).toHaveLength(60);
    // The whole answer: the one whose record is gone is dropped.
    rpc.accounts = answer;
    await clock.advance(BACKSTOP_MAX_MS);
    await backstop.round();
    expect(store.labels(PARENT)).toHaveLength(59);
  });

  it('reads owners too: a forged transfer (from the websocket provider) is put right at the check', async () => {
    const { backstop, clock, store, rpc, changed } = backstopWith(60_000);
    const realOwner = new PublicKey(Buffer.alloc(32, 5));
    const a = sub('nectarine', realOwner);
    const b = sub('olive', realOwner);
    // The stream said 'nectarine' went to another owner; the chain (the HTTP provider) says not.
    const forged = new PublicKey(Buffer.alloc(32, 9)).toBase58();
    store.put(PARENT, 10, {
      [a.account]: ['nectarine', forged, a.reverse],
      [b.account]: ['olive', realOwner.toBase58(), b.reverse],
    });
    for (const s of [a, b]) onChain(rpc, s);
    backstop.sync([PARENT]);
    await clock.advance(60_000);
    await backstop.round();
    expect(await store.member(PARENT, a.account)).toMatchObject({
      label: 'nectarine',
      owner: realOwner.toBase58(),
    });
    expect(await store.member(PARENT, b.account)).toMatchObject({ owner: realOwner.toBase58() });
    expect(changed).toEqual([PARENT]);
    // Checked again within a window, as after a deletion.
    expect((backstop.dueAt(PARENT) ?? 0) - clock.now()).toBe(60_000);
    // A second check finds nothing to put right: quiet.
    await clock.advance(60_000);
    await backstop.round();
    expect(changed).toEqual([PARENT]);
  });
});

describe('ownership', () => {
  it('one holder at a time; another takes over when the lease lapses', async () => {
    const held = new Map<string, { until: number; owner: number }>();
    const clock = new FakeClock();
    const locker = (owner: number) => ({
      acquire: async (resource: string, ms: number): Promise<Lease> => {
        const h = held.get(resource);
        if (h && h.until > clock.now() && h.owner !== owner) throw new Error('held');
        held.set(resource, { until: clock.now() + ms, owner });
        const lease: Lease = {
          extend: async (more) => {
            const cur = held.get(resource);
            if (!cur || cur.owner !== owner || cur.until < clock.now()) throw new Error('lapsed');
            cur.until = clock.now() + more;
            return lease;
          },
          release: async () => held.delete(resource),
        };
        return lease;
      },
    });
    const events: string[] = [];
    const make = (n: number) =>
      new Ownership({
        locker: locker(n),
        resource: 'p:follow-lease',
        leaseMs: 1_500,
        clock,
        acquired: () => events.push(`${n}+`),
        lost: () => events.push(`${n}-`),
      });
    const one = make(1);
    const two = make(2);
    one.start();
    await settle();
    two.start();
    await clock.advance(3_000);
    expect([one.owner, two.owner]).toEqual([true, false]);
    // A stall past the lease that nobody used: the owner takes it again and keeps the stream.
    held.delete('p:follow-lease');
    await one.tick();
    expect(one.owner).toBe(true);
    await one.close();
    await clock.advance(600);
    expect(two.owner).toBe(true);
    expect(events).toEqual(['1+', '1-', '2+']);
    await two.close();
  });
});

describe('follower', () => {
  it('writes a healthy status every second while it owns a confirmed program stream', async () => {
    const clock = new FakeClock();
    const store = new FakeStore();

    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const { follower, statuses, sent, confirm, hooks } = fakeFollower({ clock, store, rpc });
    follower.start();
    await clock.advance(1_000);
    expect(follower.owner).toBe(true);
    expect(sent.map((m) => m.method)).toEqual(['programSubscribe', 'logsSubscribe']);
    expect(statuses.at(-1)?.healthyUntil).toBe(0);
    const subscriptions = new Map(sent.map((m) => [m.method, m.id]));
    confirm();
    // The gap is read 2 s after the subscriptions are confirmed.
    await clock.advance(2_500);
    const status = statuses.at(-1);
    expect(status?.mode).toBe('program');
    expect(status?.healthyUntil).toBeGreaterThan(clock.now() + 2_000);
    expect(status?.lastSignature).toBe('last');
    expect(follower.healthy).toBe(true);
    // A parent cached after a change under it was notified: followed within a second, and the
    // notifications kept for it are applied.
    const later = sub('nectarine');
    const frame = (subId: number, note: AccountNote) =>
      Buffer.from(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'programNotification',
          params: {
            subscription: subId,
            result: {
              context: { slot: note.slot },
              value: {
                pubkey: note.pubkey,
                account: { data: [note.head?.toString('base64'), 'base64'] },
              },
            },
          },
        }),
      );
    const program = subscriptions.get('programSubscribe') ?? 0;
    hooks()?.onMessage(frame(program, later.subNote(80)));
    hooks()?.onMessage(frame(program, later.reverseNote(80)));
    await clock.advance(500);
    store.put(PARENT, 70, {});
    store.touched.set(PARENT, clock.now());
    await clock.advance(1_000);
    await follower.patcher.idle();
    expect(store.labels(PARENT)).toEqual(['nectarine']);
    // The socket closes: the status stops vouching at once, not at the next beat.
    hooks()?.onClose();
    await clock.advance(0);
    expect(statuses.at(-1)?.healthyUntil).toBe(0);
    await follower.close();
  });

  it('says since when a heal is under way, from the drop until a gap is healed, across sockets that die first', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const { follower, clock, statuses, open, confirm, reopen, hooks } = fakeFollower({ rpc });
    await open();
    // Taking the stream over is a heal too: the socket is open, its gap not read yet.
    expect(statuses.at(-1)?.healthyUntil).toBe(0);
    expect(statuses.at(-1)?.healingSince).toBeLessThanOrEqual(clock.now());
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)?.healingSince).toBeUndefined();
    await clock.advance(1_000);
    const droppedAt = clock.now();
    hooks()?.onClose();
    await clock.advance(0);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince: droppedAt });
    // No socket for a while, then one that dies before its heal, then one unconfirmed: the heal
    // still counts from the drop, so the bound on waiting for it is not renewed by each try.
    await clock.advance(1_500);
    reopen();
    await clock.advance(1_000);
    reopen();
    await clock.advance(1_000);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince: droppedAt });
    confirm();
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)?.healthyUntil).toBeGreaterThan(clock.now());
    expect(statuses.at(-1)?.healingSince).toBeUndefined();
    await follower.close();
  });

  it('says no heal is under way while no socket ever opened (a provider refusing every upgrade)', async () => {
    const { follower, clock, statuses } = fakeFollower({
      deps: {
        connect: () => ({
          start: () => undefined,
          connected: false,
          reconnect: () => undefined,
          close: async () => undefined,
        }),
      },
    });
    follower.start();
    await clock.advance(5_000);
    expect(follower.owner).toBe(true);
    expect(statuses.length).toBeGreaterThan(2);
    for (const status of statuses) {
      expect(status.healthyUntil).toBe(0);
      expect(status.healingSince).toBeUndefined();
    }
    await follower.close();
  });
});

describe('follower taking the stream over', () => {
  /** A follower on `stored`, started, its first socket's subscriptions confirmed. */
  const confirmed = async (stored: FollowRecord | undefined, rpc: FakeRpc, store: FakeStore) => {
    const fake = fakeFollower({ stored, rpc, store });
    fake.follower.start();
    await fake.clock.advance(100);
    fake.confirm();
    return fake;
  };

  it("heals the gap from the last owner's signature and keeps its epoch", async () => {
    const store = new FakeStore();
    const rpc = new FakeRpc();
    const gone = sub('olive');
    const added = sub('papaya');
    store.put(PARENT, 10, { [gone.account]: ['olive', 'o', gone.reverse] });
    rpc.sigs = [
      { signature: 'del', slot: 91, failed: false },
      { signature: 'add', slot: 90, failed: false },
      { signature: 'before', slot: 80, failed: false },
    ];
    rpc.setTx(
      'add',
      tx(90, [
        [0, added.account],
        [0, added.reverse],
      ]),
    );
    rpc.setTx('del', tx(91, [[3, gone.account]]));
    rpc.accountsByKey.set(added.account, {
      owner: NAME_PROGRAM,
      head: added.subNote(0).head as Buffer,
    });
    rpc.accountsByKey.set(added.reverse, {
      owner: NAME_PROGRAM,
      head: added.reverseNote(0).head as Buffer,
    });
    const epoch = 1_600_000_000_000;
    const { follower, clock, statuses } = await confirmed(
      { epoch, healthyUntil: 0, mode: 'program', lastSignature: 'before' },
      rpc,
      store,
    );
    await clock.advance(2_500);
    await follower.patcher.idle();
    expect(store.labels(PARENT)).toEqual(['papaya']);
    expect(statuses.at(-1)?.epoch).toBe(epoch);
    expect(statuses.at(-1)?.lastSignature).toBe('del');
    expect(follower.healthy).toBe(true);
    expect(rpc.count('getProgramAccounts')).toBe(0);
    await follower.close();
  });

  it('reads a gap from the last signature before it, though the new stream reported newer ones', async () => {
    const store = new FakeStore();
    const rpc = new FakeRpc();
    const added = sub('quince');
    store.put(PARENT, 10, {});
    const { follower, clock, reconnect } = await confirmed(
      { epoch: 1_600_000_000_000, healthyUntil: 0, mode: 'program', lastSignature: 'before' },
      rpc,
      store,
    );
    await clock.advance(2_500);
    // Now the chain moves: the socket drops, 'ingap' happens, and the new stream reports 'newer'
    // before the gap is read.
    rpc.sigs = [
      { signature: 'newer', slot: 95, failed: false },
      { signature: 'ingap', slot: 92, failed: false },
      { signature: 'before', slot: 80, failed: false },
    ];
    rpc.setTx(
      'ingap',
      tx(92, [
        [0, added.account],
        [0, added.reverse],
      ]),
    );
    rpc.setTx('newer', tx(95, []));
    rpc.accountsByKey.set(added.account, {
      owner: NAME_PROGRAM,
      head: added.subNote(0).head as Buffer,
    });
    rpc.accountsByKey.set(added.reverse, {
      owner: NAME_PROGRAM,
      head: added.reverseNote(0).head as Buffer,
    });
    reconnect(['newer']);
    await clock.advance(2_500);
    await follower.patcher.idle();
    // Read back to the anchor 'before', so the transaction between it and 'newer' was read.
    expect(rpc.calls).toContain('getTransaction ingap');
    expect(store.labels(PARENT)).toEqual(['quince']);
    await follower.close();
  });

  it('starts a new epoch when the gap cannot be healed', async () => {
    const rpc = new FakeRpc();
    rpc.failSignatures = true;
    const { follower, clock, statuses } = await confirmed(
      { epoch: 1_600_000_000_000, healthyUntil: 0, mode: 'program', lastSignature: 'before' },
      rpc,
      new FakeStore(),
    );
    const confirmedAt = clock.now();
    await clock.advance(2_500);
    expect(statuses.at(-1)?.epoch).toBe(confirmedAt);
    expect(follower.healthy).toBe(true);
    // The heal is over, failed: no refresh waits for it any more.
    expect(statuses.at(-1)?.healingSince).toBeUndefined();
    await follower.close();
  });

  it('takes the newest transaction for the anchor after a gap it could not heal: the next heal reads from it', async () => {
    const rpc = new FakeRpc();
    // The anchor is not among the node's signatures (too old, or of another cluster).
    rpc.sigs = [{ signature: 'now', slot: 90, failed: false }];
    const { follower, clock, statuses, reconnect } = await confirmed(
      { epoch: 1_600_000_000_000, healthyUntil: 0, mode: 'program', lastSignature: 'gone' },
      rpc,
      new FakeStore(),
    );
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    const epoch = statuses.at(-1)?.epoch;
    expect(statuses.at(-1)).toMatchObject({ lastSignature: 'now' });
    // A drop before the stream reported anything: its gap is healed from 'now', no new epoch.
    rpc.sigs = [{ signature: 'later', slot: 95, failed: false }, ...rpc.sigs];
    rpc.setTx('later', tx(95, []));
    await clock.advance(1_000);
    reconnect([]);
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)).toMatchObject({ epoch, lastSignature: 'later' });
    await follower.close();
  });

  it('heals a return to the whole program from where it was last followed, past the logs of parents mode', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const first = fakeFollower({ rpc });
    await first.open();
    await first.clock.advance(2_500);
    expect(first.follower.healthy).toBe(true);
    first.logs('followed');
    // The socket drops; the next one takes the logs but refuses the whole program: `parents`.
    first.reopen();
    const whole = first.sent.findIndex((m) => m.method === 'programSubscribe');
    const id = first.sent.splice(whole, 1)[0]?.id;
    const error = { code: -32602, message: 'a filter is required' };
    first.hooks()?.onMessage(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, error })));
    first.confirm();
    first.logs('away');
    await first.clock.advance(1_000);
    const away = first.statuses.at(-1);
    expect(away).toMatchObject({ mode: 'parents', lastSignature: 'followed' });
    await first.follower.close();

    // Another worker takes the whole program over: it reads the gap back to 'followed'.
    const store = new FakeStore();
    const added = sub('rambutan');
    store.put(PARENT, 10, {});
    rpc.sigs = [
      { signature: 'away', slot: 92, failed: false },
      { signature: 'followed', slot: 90, failed: false },
      { signature: 'last', slot: 5, failed: false },
    ];
    rpc.setTx(
      'away',
      tx(92, [
        [0, added.account],
        [0, added.reverse],
      ]),
    );
    rpc.accountsByKey.set(added.account, {
      owner: NAME_PROGRAM,
      head: added.subNote(0).head as Buffer,
    });
    rpc.accountsByKey.set(added.reverse, {
      owner: NAME_PROGRAM,
      head: added.reverseNote(0).head as Buffer,
    });
    const second = await confirmed(away, rpc, store);
    // Logs before its gap is healed do not move the anchor either.
    second.logs('early');
    await second.clock.advance(1_000);
    expect(second.statuses.at(-1)?.lastSignature).toBe('followed');
    await second.clock.advance(1_500);
    await second.follower.patcher.idle();
    expect(rpc.calls).toContain('getTransaction away');
    expect(store.labels(PARENT)).toEqual(['rambutan']);
    expect(second.statuses.at(-1)).toMatchObject({ epoch: away?.epoch, lastSignature: 'away' });
    expect(second.follower.healthy).toBe(true);
    await second.follower.close();
  });
});

/**
 * A status report on fakes (clock, status store), owning the stream: `beat` writes one status and
 * returns it; `stored` is what a takeover reads (`'fails'`: the read fails).
 */
function reportOn(stored?: FollowRecord | 'fails') {
  const clock = new FakeClock();
  const statuses: FollowRecord[] = [];
  const report = new StatusReport({
    clock,
    slots: { newest: undefined },
    store: { markOwed: async () => false },
    changed: () => undefined,
    status: {
      read: async () => {
        if (stored === 'fails') throw new Error('Redis down');
        return stored;
      },
      write: async (status) => void statuses.push(status),
    },
    deletesSince: () => undefined,
    ...quietDeps(),
  });
  const beat = async (
    healthy: boolean,
    gap: StreamState['gap'] = healthy ? 'healed' : 'healing',
    mode: FollowMode = 'program',
  ) => {
    await report.write({ owner: true, healthy, mode, gap });
    const status = statuses.at(-1);
    if (!status) throw new Error('no status written');
    return status;
  };
  return { report, clock, statuses, beat };
}

/**
 * When the stream last vouched (the status's `vouchedAt`): what the registry index's answers
 * through a heal are dated from (`healDated`), so never later than the last beat that vouched.
 */
describe('status report: when the stream last vouched', () => {
  /** The date the index's answers would take under `status` (a complete build, a long window). */
  const datedBy = (status: FollowRecord, now: number) =>
    healDated({ status: 'complete', startedAt: status.epoch }, status, now, () => true);

  it('is the last beat that vouched when the socket closes, and is not said while vouching', async () => {
    const { report, clock, beat } = reportOn();
    const vouching = [await beat(true)];
    await clock.advance(1_000);
    vouching.push(await beat(true));
    const lastVouch = clock.now();
    for (const status of vouching) {
      expect(status.healthyUntil).toBeGreaterThan(0);
      expect(status.vouchedAt).toBeUndefined();
    }
    await clock.advance(400);
    report.socketClosed();
    const closed = await beat(false, 'closed');
    expect(closed).toMatchObject({
      healthyUntil: 0,
      healingSince: clock.now(),
      vouchedAt: lastVouch,
    });
    await clock.advance(1_000);
    expect(await beat(false, 'healing')).toMatchObject({
      healingSince: closed.healingSince,
      vouchedAt: lastVouch,
    });
    expect(datedBy(closed, clock.now())).toBe(lastVouch);
  });

  it('is the last beat that vouched, not the close, when the vouching stopped well before it', async () => {
    const { report, clock, beat } = reportOn();
    await beat(true);
    await clock.advance(1_000);
    await beat(true);
    const lastVouch = clock.now();
    // A refused silence probe: the socket stays open, its gap healed, and nothing is vouched for.
    for (let i = 0; i < 20; i++) {
      await clock.advance(1_000);
      const status = await beat(false, 'healed');
      expect(status).toEqual({
        epoch: status.epoch,
        healthyUntil: 0,
        mode: 'program',
        vouchedAt: lastVouch,
      });
    }
    await clock.advance(500);
    report.socketClosed();
    const closed = await beat(false, 'closed');
    expect(closed).toMatchObject({ healingSince: clock.now(), vouchedAt: lastVouch });
    expect(datedBy(closed, clock.now())).toBe(lastVouch);
  });

  it('is cleared by a beat that vouches again, and is that beat once the vouching stops again', async () => {
    const { report, clock, beat } = reportOn();
    await beat(true);
    const firstVouch = clock.now();
    await clock.advance(1_000);
    report.socketClosed();
    expect(await beat(false, 'closed')).toMatchObject({ vouchedAt: firstVouch });
    await clock.advance(3_000);
    const healed = await beat(true);
    expect(healed.healthyUntil).toBeGreaterThan(clock.now());
    expect(healed.vouchedAt).toBeUndefined();
    expect(healed.healingSince).toBeUndefined();
    const againVouch = clock.now();
    await clock.advance(1_000);
    report.socketClosed();
    expect(await beat(false, 'closed')).toMatchObject({ vouchedAt: againVouch });
  });

  it("is the last owner's on a takeover: its vouchedAt, else the beat of its vouching status", async () => {
    const now = new FakeClock().now();
    const base = { epoch: 1_600_000_000_000, mode: 'program' as const, lastSignature: 'last' };
    for (const [stored, vouchedAt, healingSince] of [
      // A heal under way, its last vouch said: both go on.
      [
        { ...base, healthyUntil: 0, healingSince: now - 4_000, vouchedAt: now - 9_000 },
        now - 9_000,
        now - 4_000,
      ],
      // A last vouch said with no heal (a refused probe): it goes on, and the heal starts here.
      [{ ...base, healthyUntil: 0, vouchedAt: now - 9_000 }, now - 9_000, now],
      // The last owner died while it vouched: its last beat, not the horizon it wrote.
      [{ ...base, healthyUntil: now - 10_000 }, now - 10_000 - HEALTHY_FOR_MS, now - 10_000],
      // Its status still vouches (its lease lost a moment ago): the beat that wrote it.
      [{ ...base, healthyUntil: now + 1_000 }, now + 1_000 - HEALTHY_FOR_MS, now],
      // A beat ahead of this clock (a skew): no later than now.
      [{ ...base, healthyUntil: now + 60_000 }, now, now],
    ] as const) {
      const { report, beat } = reportOn(stored);
      await report.resume();
      expect({ stored, status: await beat(false, 'healing') }).toMatchObject({
        stored,
        status: { healthyUntil: 0, vouchedAt, healingSince },
      });
    }
  });

  it('is not said on a takeover of a status that never vouched, nor when none could be read', async () => {
    const base = { epoch: 1_600_000_000_000, healthyUntil: 0, lastSignature: 'last' };
    for (const stored of [
      { ...base, mode: 'program' as const },
      { ...base, mode: 'parents' as const },
      { ...base, mode: 'off' as const },
      // A heal under way whose last vouch was never known: the heal goes on, the vouch stays unknown.
      { ...base, mode: 'program' as const, healingSince: base.epoch + 5 },
      // A status vouching for some parents only never vouched for the whole program.
      { ...base, healthyUntil: new FakeClock().now() + 1_000, mode: 'parents' as const },
      undefined,
      'fails' as const,
    ]) {
      const { report, clock, beat } = reportOn(stored);
      await report.resume();
      const status = await beat(false, 'healing');
      expect({ stored, vouchedAt: status.vouchedAt }).toEqual({ stored, vouchedAt: undefined });
      expect(datedBy(status, clock.now())).toBeUndefined();
    }
  });

  it('is not said when the whole-program stream is tried again after off, never having vouched', async () => {
    const { clock, beat } = reportOn();
    for (const mode of ['parents', 'off'] as const) {
      await clock.advance(1_000);
      expect((await beat(false, 'closed', mode)).vouchedAt).toBeUndefined();
    }
    await clock.advance(3_600_000);
    const retried = await beat(false, 'healing');
    expect(retried).toMatchObject({ mode: 'program', healingSince: clock.now() });
    expect(retried.vouchedAt).toBeUndefined();
    expect(datedBy(retried, clock.now())).toBeUndefined();
  });

  it('stays the last whole-program vouch across hours in another mode', async () => {
    const { clock, beat } = reportOn();
    await beat(true);
    const lastVouch = clock.now();
    for (const mode of ['parents', 'off'] as const) {
      await clock.advance(1_000);
      expect(await beat(false, 'closed', mode)).toMatchObject({ vouchedAt: lastVouch });
    }
    await clock.advance(3_600_000);
    // An hour after it: the index's window has long passed (the per-parent path answers).
    expect(await beat(false, 'healing')).toMatchObject({ vouchedAt: lastVouch });
  });
});
