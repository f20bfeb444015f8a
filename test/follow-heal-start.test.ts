import { describe, expect, it } from 'vitest';
import type { FollowRecord } from '../src/core/cache/follow-status.js';
import type { Lease } from '../worker/follow/ownership.js';
import { healDated } from '../src/core/cache/registry-serving.js';
import { PROBE_EVERY_MS } from '../worker/follow/silence.js';
import { FakeClock, FakeRpc, fakeFollower } from './support/follow-fakes.js';

/**
 * Since when a heal is under way (the status's `healingSince`, docs/design.md, "Waiting for a
 * heal") counts from when the stream stopped vouching: a stale entry's refresh waits for the heal
 * at most `HEAL_GRACE_MS` from then. Neither a worker taking the stream over nor an owner whose
 * lease lapsed for a moment may start that count again, or a flaky Redis (leases lost and taken
 * back) would hold the refreshes back for as long as it lasts.
 */

const EPOCH = 1_600_000_000_000;

/** A follower on `stored`, its first socket open and its subscriptions not confirmed yet. */
async function takingOver(clock: FakeClock, stored: FollowRecord) {
  const rpc = new FakeRpc();
  rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
  const fake = fakeFollower({ clock, rpc, stored });
  fake.follower.start();
  await clock.advance(1_000);
  expect(fake.follower.owner).toBe(true);
  return fake;
}

describe('since when a heal is under way', () => {
  it("is the last owner's when a worker takes a heal under way over", async () => {
    const clock = new FakeClock();
    const healingSince = clock.now() - 4_000;
    const { follower, statuses } = await takingOver(clock, {
      epoch: EPOCH,
      healthyUntil: 0,
      mode: 'program',
      healingSince,
      lastSignature: 'last',
    });
    await clock.advance(1_000);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince });
    await follower.close();
  });

  it('is when the last owner stopped vouching, when it stopped while it vouched', async () => {
    const clock = new FakeClock();
    // The last owner died while it vouched: the stream has vouched for nothing since.
    const healthyUntil = clock.now() - 2_000;
    const { follower, statuses } = await takingOver(clock, {
      epoch: EPOCH,
      healthyUntil,
      mode: 'program',
      lastSignature: 'last',
    });
    await clock.advance(1_000);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince: healthyUntil });
    await follower.close();
  });

  it('is the takeover when the last status still vouched then, and is over once healed', async () => {
    const clock = new FakeClock();
    const takenAt = clock.now();
    const { follower, statuses, confirm } = await takingOver(clock, {
      epoch: EPOCH,
      healthyUntil: takenAt + 60_000,
      mode: 'program',
      lastSignature: 'last',
    });
    expect(statuses.at(-1)?.healthyUntil).toBe(0);
    expect(statuses.at(-1)?.healingSince).toBeGreaterThanOrEqual(takenAt);
    expect(statuses.at(-1)?.healingSince).toBeLessThanOrEqual(clock.now());
    confirm();
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    expect(statuses.at(-1)?.healingSince).toBeUndefined();
    await follower.close();
  });

  it('is kept while the lease lapses for a moment and is renewed', async () => {
    const clock = new FakeClock();
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    // A lease whose renewal goes unanswered while `stalled` (a stalled Redis, a busy event loop).
    let stalled = false;
    let answer: (() => void) | undefined;
    const lease: Lease = {
      extend: () =>
        stalled
          ? new Promise<Lease>((resolve) => (answer = () => resolve(lease)))
          : Promise.resolve(lease),
      release: async () => 1,
    };
    const { follower, statuses, open, reopen } = fakeFollower({
      clock,
      rpc,
      deps: { locker: { acquire: async () => lease } },
    });
    await open();
    await clock.advance(2_500);
    expect(follower.healthy).toBe(true);
    // The socket drops; the next one is not confirmed: a heal under way since the drop.
    const droppedAt = clock.now();
    reopen();
    await clock.advance(1_000);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince: droppedAt });
    stalled = true;
    await clock.advance(2_500);
    expect(follower.owner).toBe(false);
    stalled = false;
    answer?.();
    await clock.advance(1_500);
    expect(follower.owner).toBe(true);
    const written = statuses.length;
    await clock.advance(1_000);
    expect(statuses.length).toBeGreaterThan(written);
    expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, healingSince: droppedAt });
    await follower.close();
  });
});

/**
 * The registry index answers through a heal dated by the status (`healDated`,
 * src/core/cache/registry-index.ts): the index is claimed current up to that date. It holds only
 * if the stream vouched right up to it, so the date is the last vouch (`vouchedAt`), never the
 * heal's start (`healingSince`), which may be much later; and with the last vouch unknown, none.
 */
describe('since when a heal is under way, as the date of the registry index', () => {
  const WINDOW_MS = 60_000;
  const dated = (status: FollowRecord | undefined, now: number) =>
    healDated(
      { status: 'complete', startedAt: (status?.epoch ?? 0) + 1 },
      status ?? null,
      now,
      (fetchedAt) => now - fetchedAt < WINDOW_MS,
    );

  it('is never later than the last vouch, after a refused probe stopped the vouching', async () => {
    const rpc = new FakeRpc();
    rpc.sigs = [{ signature: 'last', slot: 5, failed: false }];
    const f = fakeFollower({ rpc });
    await f.open();
    await f.clock.advance(2_500);
    expect(f.follower.healthy).toBe(true);
    // The provider refuses the probe: the stream vouches for nothing from here.
    rpc.failSignatures = true;
    await f.clock.advance(PROBE_EVERY_MS + 1_000);
    expect(f.statuses.at(-1)?.healthyUntil).toBe(0);
    const vouchedUntil = Math.max(...f.statuses.map((s) => s.healthyUntil));
    await f.clock.advance(20_000);
    // The socket closes well after: the heal it opens begins now, the vouching ended before.
    f.reopen();
    await f.clock.advance(500);
    const status = f.statuses.at(-1);
    expect(status?.healthyUntil).toBe(0);
    const date = dated(status, f.clock.now());
    // Within the window of the last vouch the index answers, dated no later than it.
    expect(date).toBeDefined();
    expect(date).toBeLessThanOrEqual(vouchedUntil);
    await f.follower.close();
  });

  it('says nothing of a takeover from a status that neither vouched nor healed', async () => {
    for (const mode of ['program', 'parents'] as const) {
      const clock = new FakeClock();
      const { follower, statuses } = await takingOver(clock, {
        epoch: EPOCH,
        healthyUntil: 0,
        mode,
        lastSignature: 'last',
      });
      await clock.advance(1_000);
      expect(statuses.at(-1)).toMatchObject({ healthyUntil: 0, mode: 'program' });
      // When the stream last vouched is unknown: no date can be given to the index's answers.
      expect({ mode, date: dated(statuses.at(-1), clock.now()) }).toEqual({
        mode,
        date: undefined,
      });
      await follower.close();
    }
  });
});
