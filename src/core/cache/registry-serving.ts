import type { FollowStatus } from './follow-status.js';
import type { RegistryState } from './registry-index.js';

/**
 * Whether the registry index answers `/subdomains/:parent` now, and how its answers are dated
 * (docs/design.md, "The registry index", "Serving"): from the build's state
 * (./registry-index.ts) and the follow status (./follow-status.ts), both read from Redis.
 */

/**
 * What the registry index is to a process (`/readyz`'s `index`, `sns_registry_state`):
 * - `serving`: built, and the stream has followed the whole program with no unhealed gap since
 *   the build began: every `/subdomains/:parent` is answered from it;
 * - `building`: a build runs (the per-parent path answers meanwhile);
 * - `unfollowed`: built, but the stream is not whole-program and healthy now (while it heals a
 *   gap, for a window, the index still answers, dated: {@link healDated});
 * - `behind`: the stream missed something since the build began: a rebuild is due;
 * - `none`: no build yet; `off`: `SUBDOMAIN_INDEX=parents`.
 */
export type RegistryServing = 'off' | 'none' | 'building' | 'serving' | 'unfollowed' | 'behind';

/** `sns_registry_state`'s value of each {@link RegistryServing}. */
export const REGISTRY_SERVING_VALUE: Readonly<Record<RegistryServing, number>> = Object.freeze({
  off: 0,
  none: 0,
  building: 1,
  serving: 2,
  unfollowed: 3,
  behind: 4,
});

/**
 * Decides whether the index answers, from its build's state and the follow status (both read from
 * Redis at most every `intervalMs`, one read in flight): complete, the stream whole-program and
 * healthy now, and its epoch (since when nothing was missed) no later than the build's start.
 */
export function registryServing(
  state: Pick<RegistryState, 'status' | 'startedAt'> | null,
  status: FollowStatus | null,
  now: number,
): RegistryServing {
  if (!state || state.status === 'none') return 'none';
  if (state.status === 'behind') return 'behind';
  if (status && status.epoch > state.startedAt) return 'behind';
  if (state.status === 'building') return 'building';
  if (!status || status.mode !== 'program' || now >= status.healthyUntil) return 'unfollowed';
  return 'serving';
}

/**
 * Until when `status` says the index is current, at most `now` (Unix ms): the date of its answers.
 * A waiting fact's `deletesSince` (a Delete, or a fact the feed holds unwritten) or the stream's
 * last vouch (`vouchedAt`, said while it does not vouch), whichever is earlier; `now` when neither
 * is said.
 */
export function indexCurrentUpTo(status: FollowStatus | null, now: number): number {
  return Math.min(now, status?.deletesSince ?? now, status?.vouchedAt ?? now);
}

/**
 * When the index, not serving because the stream heals a gap, answers all the same, and the date
 * of its answers (docs/design.md, "The registry index", "Serving"): the build complete and no
 * epoch past its start (what {@link registryServing} asks but for the stream's health), the whole
 * program followed, a heal under way (`healingSince`) and when the stream last vouched known
 * (`vouchedAt`; the owner writes both only while it does not vouch), `now` at or past both, and an
 * answer dated `vouchedAt` still fresh by the window (`fresh`: the cache's freshness with no
 * status, `CACHE_FRESH_SECONDS`). The index was current up to the last vouch, and what changed
 * after is what the heal reads: answering it dated then is honest, where a scan per parent asked
 * would cost each asker a charged scan of a list the index holds, wasted once the heal vouches.
 * Dated from the heal's start instead, an answer would be dated later than its data whenever the
 * vouching stopped before the heal began (a refused silence probe, a takeover of a status that
 * neither vouched nor healed). With the last vouch unknown it does not answer; past the window the
 * heal is stuck; either way the per-parent path answers. Like a fact waiting for its read (a
 * Delete, a feed's fact: {@link FollowStatus.deletesSince}, which may date answers earlier), it
 * makes no value of {@link RegistryServing}: the index stays `unfollowed` to `/readyz` and
 * `sns_registry_state`.
 *
 * @param now Unix ms, the clock the status was written with (src/core/redis-time.ts).
 * @param fresh whether an answer dated at `fetchedAt` (Unix ms) is fresh by the window now.
 * @returns the date of the index's answers (Unix ms, {@link indexCurrentUpTo}); or undefined when
 *   it does not answer through a heal (then {@link registryServing} decides).
 */
export function healDated(
  state: Pick<RegistryState, 'status' | 'startedAt'> | null,
  status: FollowStatus | null,
  now: number,
  fresh: (fetchedAt: number) => boolean,
): number | undefined {
  const since = status?.healingSince;
  const vouchedAt = status?.vouchedAt;
  if (since === undefined || vouchedAt === undefined || status?.mode !== 'program') {
    return undefined;
  }
  if (state?.status !== 'complete' || status.epoch > state.startedAt) return undefined;
  // A time ahead of this clock (a skew, a status of another shape) is no heal to answer through.
  if (now < since || now < vouchedAt || !fresh(vouchedAt)) return undefined;
  return indexCurrentUpTo(status, now);
}
