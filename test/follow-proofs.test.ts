import { describe, expect, it } from 'vitest';
import { GAP_MAX_PAGES, healGap } from '../worker/follow/gaps.js';
import { PROBE_EVERY_MS, PROBE_RETRY_MS } from '../worker/follow/silence.js';
import { FakeRpc, fakeFollower, quietDeps } from './support/follow-fakes.js';

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
