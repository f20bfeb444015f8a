import { describe, expect, it } from 'vitest';
import type { FollowRecord } from '../src/core/cache/follow-status.js';
import type { Lease } from '../worker/follow/ownership.js';
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
