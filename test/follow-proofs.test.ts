import { describe, expect, it } from 'vitest';
import { GAP_MAX_PAGES, healGap } from '../worker/follow/gaps.js';
import { PROBE_EVERY_MS, PROBE_RETRY_MS } from '../worker/follow/silence.js';
import { MAX_READS_PER_MINUTE } from '../worker/follow/deletions.js';
import { CreditBudgetRefusal } from '../worker/rpc/credits.js';
import { MAX_INSTRUCTIONS, nameWrites } from '../worker/follow/transaction.js';
import { every } from '../worker/follow/types.js';
import {
  FakeClock,
  FakeRpc,
  FakeStore,
  fakeFollower,
  quietDeps,
  settle,
  tx,
  deleteLogs,
  fakeDeletions,
} from './support/follow-fakes.js';

/**
 * An entry is marked fresh only when the follower can prove it (docs/design.md, "Freshness"): a
 * refused or short read is never taken for "nothing new". Units on fakes: no socket, no Redis.
 */

const sigs = (n: number, prefix = 's') =>
  Array.from({ length: n }, (_, i) => ({
    signature: `${prefix}${n - i}`,
    slot: 100 - i,
    failed: false,
  }));

describe('a refused silence probe', () => {
  it('stops the status vouching until a probe succeeds again', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const f = fakeFollower({ rpc });
    await f.open();
    await f.clock.advance(2_500);
    expect(f.follower.healthy).toBe(true);
    expect(f.statuses.at(-1)?.healthyUntil).toBeGreaterThan(f.clock.now());
    // The provider refuses the probe: that is not "nothing new".
    rpc.failSignatures = true;
    await f.clock.advance(PROBE_EVERY_MS);
    await f.clock.advance(1_000);
    expect(f.follower.healthy).toBe(false);
    expect(f.statuses.at(-1)?.healthyUntil).toBe(0);
    // Tried again sooner; once it answers (with what the stream brought) the status vouches again.
    rpc.failSignatures = false;
    const calls = rpc.count('getSignaturesForAddress');
    await f.clock.advance(PROBE_RETRY_MS + 1_000);
    expect(rpc.count('getSignaturesForAddress')).toBe(calls + 1);
    expect(f.follower.healthy).toBe(true);
    expect(f.statuses.at(-1)?.healthyUntil).toBeGreaterThan(f.clock.now());
    await f.follower.close();
  });
});

describe('a spent budget', () => {
  it('stops vouching for the one entry whose re-read it cannot pay for, not every entry', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const store = new FakeStore();
    store.put('owing', 10, { acct1: ['a', 'o'] });
    store.put('quiet', 10, { acct2: ['b', 'o'] });
    let state: 'normal' | 'exhausted' = 'normal';
    let owed: Array<[string, number]> = [];
    const budget = { state: () => state, proactiveAffordable: () => state !== 'exhausted' };
    const f = fakeFollower({ rpc, store, deps: { budget, owed: () => owed } });
    await f.open();
    await f.clock.advance(2_500);
    expect(f.follower.healthy).toBe(true);
    const epoch = f.statuses.at(-1)?.epoch ?? Infinity;
    // A re-read is owed while the budget is normal: it will be made, nothing is marked.
    owed = [['owing', 40]];
    await f.clock.advance(1_000);
    expect(store.owed.size).toBe(0);
    // The budget is spent: the re-read will be refused, so the entry it would correct is no
    // longer vouched for, and only that one: the epoch stays, the other entries stay fresh.
    state = 'exhausted';
    await f.clock.advance(1_000);
    expect([...store.owed]).toEqual([['owing', 40]]);
    expect(f.changed).toContain('owing');
    // Marked once, not every second.
    await f.clock.advance(3_000);
    expect(store.calls.filter((c) => c.startsWith('owed'))).toEqual(['owed owing 40']);
    expect(f.statuses.at(-1)?.epoch).toBe(epoch);
    await f.follower.close();
  });

  it("marks at once the entry whose re-read the store asks for (an 'unsound' change)", async () => {
    const store = new FakeStore();
    store.put('far-ahead', 10, { acct1: ['a', 'o'] });
    const budget = { state: () => 'exhausted' as const, proactiveAffordable: () => false };
    // The store is given the follower's own re-read: the one the units ask for.
    let storeReread: ((parent: string, slot: number | undefined) => void) | undefined;
    const f = fakeFollower({
      store,
      deps: {
        budget,
        store: (reread) => {
          storeReread = reread;
          return store;
        },
      },
    });
    storeReread?.('far-ahead', 40);
    expect(f.rereads).toEqual([['far-ahead', 40]]);
    await settle();
    expect([...store.owed]).toEqual([['far-ahead', 40]]);
    expect(f.changed).toContain('far-ahead');
  });

  it('gives every entry up when the owed entry cannot be marked', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const store = new FakeStore();
    store.markOwed = async () => {
      throw new Error('Redis refused');
    };
    const budget = { state: () => 'exhausted' as const, proactiveAffordable: () => false };
    const f = fakeFollower({ rpc, store, deps: { budget, owed: () => [['owing', 40]] } });
    await f.open();
    await f.clock.advance(2_500);
    const epoch = f.statuses.at(0)?.epoch ?? Infinity;
    await f.clock.advance(2_000);
    expect(f.statuses.at(-1)?.epoch).toBeGreaterThan(epoch);
    await f.follower.close();
  });
});

describe('a gap read', () => {
  const deps = (rpc: FakeRpc) => ({
    rpc,
    deletions: { removeDeleted: async () => 0 },
    feed: () => undefined,
    logger: quietDeps().logger,
  });

  it('pages with `before` past a provider that caps `limit`, until it sees its anchor', async () => {
    const rpc = new FakeRpc();
    rpc.pageCap = 3;
    // Six transactions in the gap, then the anchor: pages of 3 would lose three of them.
    rpc.sigs = [...sigs(6), { signature: 'anchor', slot: 1, failed: false }];
    for (const s of rpc.sigs)
      rpc.setTx(s.signature, {
        slot: s.slot,
        meta: { err: null },
        transaction: { message: { accountKeys: [], instructions: [] } },
      });
    const outcome = await healGap(deps(rpc), 'anchor');
    expect(outcome).toEqual({ healed: true, newest: 's6' });
    expect(rpc.count('getTransaction')).toBe(6);
    expect(rpc.calls.filter((c) => c.startsWith('getSignaturesForAddress'))).toEqual([
      'getSignaturesForAddress  501',
      'getSignaturesForAddress  498 before s4',
      'getSignaturesForAddress  495 before s1',
    ]);
  });

  it('gives the entries up when the anchor is never reached, within a bound of pages', async () => {
    const rpc = new FakeRpc();
    rpc.pageCap = 1;
    rpc.sigs = [...sigs(GAP_MAX_PAGES + 5), { signature: 'anchor', slot: 1, failed: false }];
    const outcome = await healGap(deps(rpc), 'anchor');
    expect(outcome.healed).toBe(false);
    expect(rpc.count('getSignaturesForAddress')).toBe(GAP_MAX_PAGES);
    expect(rpc.count('getTransaction')).toBe(0);
    // A node that does not know the anchor answers pages that end without it.
    const lost = new FakeRpc();
    lost.sigs = sigs(4);
    expect((await healGap(deps(lost), 'anchor')).healed).toBe(false);
  });
});

describe('reads for Deletes', () => {
  const make = (affordable = () => true) => fakeDeletions({ affordable });
  const forged = (signature: string) => deleteLogs(signature);

  it('spends at most MAX_READS_PER_MINUTE on a flood of forged Delete lines', async () => {
    const { rpc, clock, lost, deletions } = make();
    // 600 forged lines in 30 s, each naming a transaction no node has.
    for (let i = 0; i < 600; i++) {
      deletions.onLogs(forged(`forged${i}`));
      if (i % 20 === 19) await clock.advance(1_000);
    }
    await clock.advance(60_000);
    await deletions.idle();
    const reads = rpc.count('getTransaction');
    // The allowance: a minute's worth at once, then refilled at its rate over the 90 s.
    expect(reads).toBeLessThanOrEqual(MAX_READS_PER_MINUTE * (1 + 90 / 60));
    // Every one is given up, never taken for "nothing deleted".
    expect(new Set(lost).size).toBe(600);
  });

  it('reads a Delete soon after a burst spent the allowance, rather than giving it up', async () => {
    const { store, rpc, clock, lost, deletions } = make();
    // A burst of honest Deletes, read at once, spends the whole allowance.
    for (let i = 0; i < MAX_READS_PER_MINUTE; i++) {
      rpc.setTx(`burst${i}`, tx(50, [[3, `gone${i}`]]));
      deletions.onLogs(forged(`burst${i}`));
    }
    await deletions.idle();
    expect(rpc.count('getTransaction')).toBe(MAX_READS_PER_MINUTE);
    // Twenty seconds later (within the same minute) a member is deleted: it is read and removed.
    await clock.advance(20_000);
    store.put('p1', 10, { acct1: ['a', 'o'] });
    rpc.setTx('later', tx(61, [[3, 'acct1']]));
    deletions.onLogs(forged('later'));
    await clock.advance(1_000);
    await deletions.idle();
    expect(lost).toEqual([]);
    expect(store.labels('p1')).toEqual([]);
  });

  it('reads a signature reported again once, and none the budget cannot pay for', async () => {
    const { store, rpc, deletions } = make();
    store.put('p1', 10, { acct1: ['a', 'o'] });
    rpc.setTx('once', tx(61, [[3, 'acct1']]));
    deletions.onLogs(forged('once'));
    await deletions.idle();
    deletions.onLogs(forged('once'));
    await deletions.idle();
    expect(rpc.count('getTransaction once')).toBe(1);
    expect(store.labels('p1')).toEqual([]);
    const poor = make(() => false);
    poor.deletions.onLogs(forged('dear'));
    await settle();
    await poor.deletions.idle();
    expect(poor.rpc.count('getTransaction')).toBe(0);
    expect(poor.lost).toEqual(['dear']);
  });

  it('gives a Delete up at the first call the budget refuses, without trying it again', async () => {
    const { rpc, lost, deletions } = make();
    rpc.transaction = async (signature: string) => {
      rpc.calls.push(`getTransaction ${signature}`);
      throw new CreditBudgetRefusal('getTransaction', 1, 90, 1000, 'proactive');
    };
    deletions.onLogs(forged('refused'));
    await deletions.idle();
    expect(rpc.calls).toEqual(['getTransaction refused']);
    expect(lost).toEqual(['refused']);
  });

  it('refuses a reply of more instructions than a transaction runs, and looks Deletes up at once', async () => {
    const many = Array.from({ length: MAX_INSTRUCTIONS + 1 }, (_, i): [number, string] => [
      3,
      `acct${i}`,
    ]);
    expect(nameWrites(tx(70, many))).toBeUndefined();
    const fits = many.slice(0, 60);
    const writes = nameWrites(tx(70, fits));
    expect(writes === undefined || writes === 'failed' ? [] : writes.deleted).toHaveLength(60);
    const { store, deletions } = make();
    const members: Record<string, string[]> = {};
    for (const [, account] of fits) members[account] = [account, 'o'];
    store.put('p2', 10, members);
    await deletions.removeDeleted(
      fits.map(([, a]) => a),
      71,
    );
    expect(store.labels('p2')).toEqual([]);
    expect(store.calls.filter((c) => c.startsWith('parentsOfMembers'))).toEqual([
      'parentsOfMembers 60',
    ]);
  });
});

describe('the one scheduler', () => {
  it('runs every beat on the clock, never two runs at once, and stops when told', async () => {
    const clock = new FakeClock();
    let runs = 0;
    let release = () => {};
    const errors: unknown[] = [];
    const stop = every(
      clock,
      1_000,
      () => {
        runs++;
        return new Promise<void>((resolve) => (release = resolve));
      },
      (err) => errors.push(err),
    );
    await clock.advance(1_000);
    expect(runs).toBe(1);
    // The run is still under way: the next beats are skipped, not piled up.
    await clock.advance(3_000);
    expect(runs).toBe(1);
    release();
    await clock.advance(1_000);
    expect(runs).toBe(2);
    stop();
    release();
    await clock.advance(5_000);
    expect(runs).toBe(2);
    expect(clock.pending).toBe(0);
    expect(errors).toEqual([]);
  });
});
