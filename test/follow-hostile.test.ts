import { describe, expect, it } from 'vitest';
import { toBase58 } from '../src/core/sns/pda.js';
import type { FollowRecord } from '../src/core/cache/follow-status.js';
import { healGap } from '../worker/follow/gaps.js';
import { Ownership, type Lease } from '../worker/follow/ownership.js';
import { HEAD_SLICE, NAME_PROGRAM } from '../worker/follow/name-program.js';
import { FollowStream } from '../worker/follow/stream.js';
import { logsDelete, logsWrite, nameWrites } from '../worker/follow/transaction.js';
import {
  FakeClock,
  FakeRpc,
  fakeFollower,
  quietDeps,
  settle,
  deleteLogs,
  fakeDeletions,
} from './support/follow-fakes.js';

/**
 * The follower against a hostile or broken provider (docs/design.md, "Freshness"): what a bad
 * frame, transaction or stream costs, and whether the follower vouches for entries it cannot.
 */

/** A transaction as `getTransaction` (json) writes it; `inner[i]` runs during top-level `i`. */
function tx(
  slot: number,
  top: Array<[program: 'name' | 'other', tag: number, account: string]>,
  inner: Array<{ index: number; ixs: Array<[tag: number, account: string]> }> = [],
) {
  const keys = [NAME_PROGRAM, 'payer111', 'Other1111'];
  const at = (account: string) => {
    if (!keys.includes(account)) keys.push(account);
    return keys.indexOf(account);
  };
  const ix = (program: 'name' | 'other', tag: number, account: string) => ({
    programIdIndex: program === 'name' ? 0 : 2,
    accounts: tag === 0 || tag === 4 ? [1, 1, at(account)] : [at(account), 1],
    data: toBase58(Buffer.from(tag === 3 ? [3] : [tag, 1, 2, 3])),
  });
  const instructions = top.map(([p, t, a]) => ix(p, t, a));
  const innerInstructions = inner.map(({ index, ixs }) => ({
    index,
    instructions: ixs.map(([t, a]) => ix('name', t, a)),
  }));
  return {
    slot,
    meta: { err: null, innerInstructions, loadedAddresses: { writable: [], readonly: [] } },
    transaction: { message: { accountKeys: keys, instructions } },
  };
}

/** {@link fakeFollower}, its logs notifications given slot first. */
function followerWith(opts: { rpc?: FakeRpc; stored?: FollowRecord } = {}) {
  const f = fakeFollower(opts);
  return {
    ...f,
    logs: (slot: number, signature: string, lines: string[]) => f.logs(signature, slot, lines),
  };
}

const CREATE_LOGS = [
  `Program ${NAME_PROGRAM} invoke [1]`,
  'Program log: Instruction: Create',
  `Program ${NAME_PROGRAM} success`,
];

describe('a provider that drops the program subscription but keeps the logs', () => {
  it('is noticed: writes the logs report get no account notification, the stream is reopened', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const f = followerWith({ rpc });
    f.follower.start();
    await f.clock.advance(1_000);
    f.confirm();
    await f.clock.advance(2_500);
    expect(f.follower.healthy).toBe(true);
    // Writes keep coming on the logs stream; their accounts never come.
    for (let i = 0; i < 20; i++) {
      f.logs(100 + i, `create${i}`, CREATE_LOGS);
      rpc.sigs.unshift({ signature: `create${i}`, slot: 100 + i, failed: false });
      await f.clock.advance(1_000);
    }
    expect(f.follower.healthy).toBe(false);
    expect(f.statuses.at(-1)?.healthyUntil).toBe(0);
    expect(f.reconnects()).toBeGreaterThan(0);
    await f.follower.close();
  });

  it('is not fooled by the account notification coming before the logs of its transaction', async () => {
    const f = followerWith();
    f.rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    f.follower.start();
    await f.clock.advance(1_000);
    f.confirm();
    await f.clock.advance(2_500);
    for (let i = 0; i < 20; i++) {
      f.account({ slot: 100 + i, pubkey: `acct${i}`, head: Buffer.alloc(HEAD_SLICE.length, 9) });
      f.logs(100 + i, `create${i}`, CREATE_LOGS);
      await f.clock.advance(1_000);
    }
    expect(f.follower.healthy).toBe(true);
    expect(f.reconnects()).toBe(0);
    await f.follower.close();
  });
});

describe('logsWrite', () => {
  it("counts the name program's own write lines, not another program's same words", () => {
    expect(logsWrite(CREATE_LOGS)).toBe(true);
    expect(
      logsWrite([
        'Program Spoof1111 invoke [1]',
        'Program log: Instruction: Create',
        `Program ${NAME_PROGRAM} invoke [2]`,
        'Program log: Instruction: Delete Name',
        `Program ${NAME_PROGRAM} success`,
        'Program log: Instruction: Transfer Ownership',
        'Program Spoof1111 success',
      ]),
    ).toBe(false);
  });
});

describe('logsDelete', () => {
  it("reads only the name program's own Delete line, and logs cut short by the runtime", () => {
    expect(
      logsDelete([
        `Program ${NAME_PROGRAM} invoke [1]`,
        'Program log: Instruction: Delete Name',
        `Program ${NAME_PROGRAM} success`,
      ]),
    ).toBe(true);
    // Any transaction may mention the name program; its own program's words cost nothing.
    expect(
      logsDelete([
        'Program Spoof1111 invoke [1]',
        'Program log: Instruction: Delete Name',
        'Program Spoof1111 success',
      ]),
    ).toBe(false);
    // Past 10 KB of logs the runtime drops the rest: a Delete may be in it.
    expect(
      logsDelete([
        `Program ${NAME_PROGRAM} invoke [1]`,
        'Program log: Entrypoint',
        'Log truncated',
      ]),
    ).toBe(true);
  });
});

describe('a socket that drops while the last gap is still being read', () => {
  it('does not vouch for the new socket before its own gap is read', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [
      { signature: 'ingap', slot: 92, failed: false },
      { signature: 'before', slot: 80, failed: false },
    ];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const transaction = rpc.transaction.bind(rpc);
    rpc.transaction = async (signature: string) => {
      await gate;
      return transaction(signature);
    };
    rpc.setTx('ingap', tx(92, []));
    const f = followerWith({
      rpc,
      stored: {
        epoch: 1_600_000_000_000,
        healthyUntil: 0,
        mode: 'program',
        lastSignature: 'before',
      },
    });
    f.follower.start();
    await f.clock.advance(100);
    f.confirm();
    // The first gap's read begins and hangs on its transaction.
    await f.clock.advance(2_500);
    expect(rpc.count('getTransaction')).toBe(0);
    // The socket drops and another is confirmed; then the first read ends.
    f.reopen();
    f.confirm();
    release();
    await settle();
    // The new socket's gap (since the drop) has not been read: nothing may be vouched for yet.
    expect(f.follower.healthy).toBe(false);
    await f.clock.advance(1_000);
    expect(f.statuses.at(-1)?.healthyUntil).toBe(0);
    // Its own read follows and heals it.
    await f.clock.advance(3_000);
    expect(f.follower.healthy).toBe(true);
    await f.follower.close();
  });
});

describe('a transaction reply that is not a transaction', () => {
  const deletionsWith = (rpc: FakeRpc) => fakeDeletions({ rpc });

  it('loses the deletion (a new epoch) rather than dropping it silently', async () => {
    const rpc = new FakeRpc();
    // A reply with no slot, one with a slot that is no slot, one with no message.
    rpc.setTx('noslot', { meta: { err: null }, transaction: { message: {} } });
    rpc.setTx('badslot', { ...tx(1, [['name', 3, 'x']]), slot: -5 });
    rpc.setTx('empty', {});
    const { deletions, clock, lost } = deletionsWith(rpc);
    for (const s of ['noslot', 'badslot', 'empty']) deletions.onLogs(deleteLogs(s));
    await clock.advance(60_000);
    await deletions.idle();
    expect(lost.sort()).toEqual(['badslot', 'empty', 'noslot']);
  });

  it('in a gap: not healed', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [
      { signature: 'bad', slot: 91, failed: false },
      { signature: 'before', slot: 80, failed: false },
    ];
    rpc.setTx('bad', { slot: 'ninety-one' });
    const outcome = await healGap(
      {
        rpc,
        deletions: { removeDeleted: async () => 0 },
        feed: () => undefined,
        ...quietDeps(),
      },
      'before',
    );
    expect(outcome.healed).toBe(false);
  });

  it('a failed transaction is still nothing to do', async () => {
    const rpc = new FakeRpc();
    rpc.setTx('failed', {
      ...tx(9, [['name', 3, 'x']]),
      meta: { err: { InstructionError: [0, 1] } },
    });
    const { deletions, clock, lost } = deletionsWith(rpc);
    deletions.onLogs(deleteLogs('failed'));
    await clock.advance(60_000);
    await deletions.idle();
    expect(lost).toEqual([]);
    expect(rpc.count('getTransaction')).toBe(1);
  });
});

describe('a transaction that deletes and re-creates a name', () => {
  it('keeps what the last instruction left, inner instructions in the order they ran', () => {
    // Top level: Delete A, then Create A (a re-registration in one transaction).
    expect(
      nameWrites(
        tx(9, [
          ['name', 3, 'A'],
          ['name', 0, 'A'],
        ]),
      ),
    ).toMatchObject({ deleted: [], written: ['A'] });
    // A registrar's instruction 0 deletes B through a CPI; instruction 1 creates it again.
    expect(
      nameWrites(
        tx(
          9,
          [
            ['other', 7, 'B'],
            ['name', 0, 'B'],
          ],
          [{ index: 0, ixs: [[3, 'B']] }],
        ),
      ),
    ).toMatchObject({ deleted: [], written: ['B'] });
    // And the other way round: created, then deleted by a later instruction's CPI.
    expect(
      nameWrites(
        tx(
          9,
          [
            ['name', 0, 'C'],
            ['other', 7, 'C'],
          ],
          [{ index: 1, ixs: [[3, 'C']] }],
        ),
      ),
    ).toMatchObject({ deleted: ['C'], written: [] });
  });
});

describe('a huge transaction', () => {
  it('costs bounded CPU: base58 decoding of instruction data is budgeted per transaction', () => {
    const data = toBase58(Buffer.alloc(2_900, 0xff)); // about 3,960 characters
    const instructions = Array.from({ length: 3_000 }, () => ({
      programIdIndex: 0,
      accounts: [1],
      data,
    }));
    const hostile = {
      slot: 9,
      meta: { err: null, innerInstructions: [], loadedAddresses: { writable: [], readonly: [] } },
      transaction: { message: { accountKeys: [NAME_PROGRAM, 'x'], instructions } },
    };
    const started = performance.now();
    const writes = nameWrites(hostile);
    const ms = performance.now() - started;
    // Not believed: the caller treats it as unreadable (a new epoch), not as "nothing deleted".
    expect(writes).toBeUndefined();
    expect(ms).toBeLessThan(1_000);
  });
});

describe('a provider that ignores the dataSlice', () => {
  it('a kept notification holds its 130-byte head, not the whole account it was cut from', () => {
    const clock = new FakeClock();
    const heads: Buffer[] = [];
    const sent: Array<{ id: number }> = [];
    const stream = new FollowStream({
      clock,
      ...quietDeps(),
      onAccount: (note) => note.head && heads.push(note.head),
      onLogs: () => undefined,
      onSubscribed: () => undefined,
      onMode: () => undefined,
    });
    stream.opened((t) => sent.push(JSON.parse(t) as { id: number }));
    for (const m of sent)
      stream.receive(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: m.id })));
    const whole = Buffer.alloc(45_000, 7).toString('base64'); // a 60 KiB frame
    stream.receive(
      Buffer.from(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'programNotification',
          params: {
            subscription: sent[0]?.id,
            result: {
              context: { slot: 5 },
              value: { pubkey: 'p', account: { data: [whole, 'base64'] } },
            },
          },
        }),
      ),
    );
    expect(heads).toHaveLength(1);
    expect(heads[0]?.length).toBe(HEAD_SLICE.length);
    // 10,000 kept would otherwise pin 450 MB; a slab of Buffer's pool (64 KiB on newer Node
    // lines), pinned by one long-lived head each, nearly as much.
    expect(heads[0]?.buffer.byteLength).toBe(HEAD_SLICE.length);
  });
});

describe('an owner whose lease lapsed', () => {
  it('stops owning when its lease ran out, though the renewal has not answered yet', async () => {
    const clock = new FakeClock();
    let hang = false;
    const lease: Lease = {
      extend: async () => {
        if (hang) await new Promise(() => undefined);
        return lease;
      },
      release: async () => 1,
    };
    const ownership = new Ownership({
      locker: { acquire: async () => lease },
      resource: 'p:follow-lease',
      leaseMs: 1_500,
      clock,
      acquired: () => undefined,
      lost: () => undefined,
    });
    ownership.start();
    await settle();
    expect(ownership.owner).toBe(true);
    await clock.advance(1_000);
    expect(ownership.owner).toBe(true);
    hang = true;
    await clock.advance(3_000);
    expect(ownership.owner).toBe(false);
  });
});
