import type { RedisClient } from '../redis.js';
import { LuaScript, replyString } from '../lua-script.js';
import { redisKeys } from '../redis-keys.js';

/**
 * How the worker that owns the chain stream follows it (docs/design.md, "Freshness"):
 * - `program`: one subscription over the whole name program; every cached parent's entry is
 *   patched as the chain changes.
 * - `parents`: per-parent subscriptions of the hottest parents only (a provider refused the
 *   program-wide one); the others are kept fresh by the clock.
 * - `off`: no stream; every entry is kept fresh by the clock.
 */
export type FollowMode = 'program' | 'parents' | 'off';

/** What `<prefix>:follow-status` holds. */
export type FollowStatus = {
  /**
   * Unix ms since which no change was missed: entries fetched before it may lack a change the
   * stream could not heal. Moves forward only.
   */
  readonly epoch: number;
  /** Unix ms until which the stream is known healthy (the owner writes now + a few seconds). */
  readonly healthyUntil: number;
  readonly mode: FollowMode;
  /**
   * Unix ms since when a fact the stream reported has waited for its read past a short bound
   * (`DELETE_READ_GRACE_MS`, worker/follow/deletions.ts): a Delete the logs stream reported,
   * waiting for its transaction's read (which entries it changes is unknown until then), or a fact
   * the registry index's feed holds unwritten (a long label's whole read, an owner read;
   * `RegistryFeed.waitingSince`, worker/registry/feed.ts); the earlier of the two. The stream
   * vouches for nothing after it until the read. Absent: no fact waits. Named for Deletes, which
   * it first held: the name is kept, as every version reads it.
   */
  readonly deletesSince?: number;
  /**
   * Unix ms since when the owner of the `program` stream has been healing a gap (a socket lost,
   * the stream taken over) and so not vouching: written only while `healthyUntil` is 0. A stale
   * entry's refresh waits for that heal for a while ({@link awaitsHeal}). Absent: no heal under
   * way.
   */
  readonly healingSince?: number;
  /**
   * Unix ms of the last beat at which the owner vouched for the stream (a status written with
   * `healthyUntil` > 0), or, on a takeover, the last owner's (its `vouchedAt`, else its
   * `healthyUntil` less the few seconds a status vouches for): nothing has been vouched for since,
   * so what the stream feeds is current up to it and no later. The owner writes it only while
   * `healthyUntil` is 0, beside `healingSince`. The registry index answers through a heal dated
   * from it (`healDated` in ./registry-serving.ts). Absent: the status vouches, or when the stream
   * last vouched is not known (a fresh start, a takeover of a status that never vouched): the index
   * then does not answer through a heal.
   */
  readonly vouchedAt?: number;
};

/**
 * What the worker that owns the stream keeps (worker/follow/status-store.ts): the status, and
 * beside it the anchor from which the next owner heals the gap: the last signature the stream
 * reported while it followed the whole program with its gap healed (docs/design.md, "Gaps").
 */
export type FollowRecord = FollowStatus & { readonly lastSignature?: string };

const MODES: ReadonlySet<string> = new Set<FollowMode>(['program', 'parents', 'off']);

/**
 * Whether `entry` is fresh by following the chain: the stream covers every parent (`program`),
 * is healthy now, has missed nothing since the entry was fetched (`fetchedAt >= epoch`), has no
 * fact waiting for its read (`deletesSince`: a Delete, whose entries are unknown until then, or a
 * registry feed's fact), and owes it no re-read it could not make (`owes`, ./entry.ts). The
 * other half of the rule, the window, is {@link SubdomainCache.freshness}'s.
 *
 * @param now Unix ms.
 */
export function followedFresh(
  entry: { readonly fetchedAt: number; readonly owes?: number },
  status: FollowStatus | null | undefined,
  now: number,
): boolean {
  return (
    status !== null &&
    status !== undefined &&
    status.mode === 'program' &&
    now < status.healthyUntil &&
    entry.fetchedAt >= status.epoch &&
    status.deletesSince === undefined &&
    entry.owes === undefined
  );
}

/**
 * How long after the stream stopped vouching for a heal a stale entry's refresh waits for that
 * heal ({@link awaitsHeal}). A heal begins `GAP_READ_DELAY_MS` after the new socket's
 * subscriptions (worker/follow/follower.ts) and tries a transaction a lagging node lacks a few
 * times (worker/follow/gaps.ts): the bound is several times what a usual heal takes
 * (BENCHMARKS.md, "Freshness of hot parents"), so a heal that has not vouched by then is stuck
 * (a refused socket, a provider failing its reads), and the entries are refreshed as without a
 * stream. Longer would serve those entries `STALE` longer with no refresh under way; shorter
 * would scan every stale parent asked during a slow but sound heal.
 */
export const HEAL_GRACE_MS = 10_000;

/**
 * Whether the refresh of `entry`, not fresh now, waits for the heal under way (docs/design.md,
 * "Freshness"): the whole program is followed, a heal began less than {@link HEAL_GRACE_MS} ago,
 * and once it vouches again the entry would be fresh ({@link followedFresh}'s other terms: fetched
 * since the epoch, no fact waiting for its read, no re-read owed). A scan of it meanwhile would be
 * wasted when the heal succeeds; when the heal fails the epoch moves past the entry and this no
 * longer holds, and past the bound neither. Never makes an entry fresh: it is still answered
 * `STALE`.
 *
 * @param now Unix ms, the clock `healingSince` was written with (src/core/redis-time.ts).
 */
export function awaitsHeal(
  entry: { readonly fetchedAt: number; readonly owes?: number },
  status: FollowStatus | null | undefined,
  now: number,
): boolean {
  const since = status?.healingSince;
  return (
    since !== undefined &&
    status?.mode === 'program' &&
    // A time ahead of this clock (a status of another shape, a skew) waits for nothing.
    now >= since &&
    now - since < HEAL_GRACE_MS &&
    entry.fetchedAt >= status.epoch &&
    status.deletesSince === undefined &&
    entry.owes === undefined
  );
}

/**
 * Sets the status, in one step that never moves `epoch` back (a worker taking the stream over
 * with an older idea of it cannot make entries fresh again).
 */
const WRITE_STATUS = new LuaScript(
  new URL('../lua/write-follow-status.lua', import.meta.url),
  replyString,
);

/** How long a written status lives when its writer stops (it is rewritten every second). */
const STATUS_TTL_MS = 24 * 3_600_000;

/**
 * Writes `<prefix>:follow-status` (the worker that owns the stream, about every second, with
 * `healthyUntil` a few seconds ahead). `epoch` never goes back: a lower one is raised to the
 * stored one.
 *
 * @returns the status as stored.
 * @throws TypeError when `epoch`, `healthyUntil`, `deletesSince`, `healingSince` or `vouchedAt`
 *   is not a safe non-negative integer, or `mode` not a mode.
 */
export async function writeFollowStatus(
  redis: RedisClient,
  prefix: string,
  status: FollowStatus,
): Promise<FollowStatus> {
  for (const field of [
    'epoch',
    'healthyUntil',
    'deletesSince',
    'healingSince',
    'vouchedAt',
  ] as const) {
    const value = status[field];
    if (field !== 'epoch' && field !== 'healthyUntil' && value === undefined) continue;
    if (!Number.isSafeInteger(value) || (value ?? 0) < 0) {
      throw new TypeError(`${field} ${String(value)} is not a time`);
    }
  }
  if (!MODES.has(status.mode)) throw new TypeError(`mode ${String(status.mode)} is not a mode`);
  const stored = await WRITE_STATUS.run(
    redis,
    [redisKeys(prefix).followStatus],
    [
      status.epoch,
      status.healthyUntil,
      status.mode,
      STATUS_TTL_MS,
      status.deletesSince ?? '',
      status.healingSince ?? '',
      status.vouchedAt ?? '',
    ],
  );
  return parseFollowStatus(stored) ?? status;
}

/** The status as stored, or null when absent or of another shape (then: not followed). */
export async function readFollowStatus(
  redis: RedisClient,
  prefix: string,
): Promise<FollowStatus | null> {
  return parseFollowStatus(await redis.get(redisKeys(prefix).followStatus));
}

function parseFollowStatus(raw: string | null): FollowStatus | null {
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    if (
      typeof v.epoch === 'number' &&
      typeof v.healthyUntil === 'number' &&
      typeof v.mode === 'string' &&
      MODES.has(v.mode)
    ) {
      const status: FollowStatus = {
        epoch: v.epoch,
        healthyUntil: v.healthyUntil,
        mode: v.mode as FollowMode,
        // A waiting Delete that is not a time is still a waiting Delete: never read as none.
        ...(v.deletesSince === undefined
          ? {}
          : { deletesSince: typeof v.deletesSince === 'number' ? v.deletesSince : 0 }),
        // A heal whose start is not a time is read as none: its entries are refreshed as before.
        ...(typeof v.healingSince === 'number' ? { healingSince: v.healingSince } : {}),
        // A last vouch that is not a time is read as unknown: nothing is dated by it.
        ...(typeof v.vouchedAt === 'number' ? { vouchedAt: v.vouchedAt } : {}),
      };
      return status;
    }
  } catch {
    // Not JSON: not followed.
  }
  return null;
}

/**
 * How often an API process reads the status at most (ms): a moved epoch or a stream that stopped
 * vouching is seen within it, and the status costs one read per interval whatever the traffic.
 */
export const STATUS_READ_EVERY_MS = 500;

export type FollowStatusReaderOptions = {
  /** Reads at most this often, in ms ({@link STATUS_READ_EVERY_MS}). */
  intervalMs?: number;
  /** The clock (Unix ms). */
  now?: () => number;
  /** Where a failed read is reported (the last status read is kept meanwhile). */
  onError?: (err: unknown) => void;
};

/**
 * The API's view of the follow status: read from Redis at most every `intervalMs` (500 ms), one
 * read in flight shared by every caller, so deciding freshness per request costs nothing more. A
 * status read at most that long ago may be behind the worker's: an epoch that moved is seen within
 * half a second, and `healthyUntil` is compared with the clock at each decision, so a stream that
 * stops is not trusted past it whatever the last read said.
 */
export class FollowStatusReader {
  private status: FollowStatus | null = null;
  private readAt = -Infinity;
  private inflight: Promise<FollowStatus | null> | undefined;
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly options: FollowStatusReaderOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? STATUS_READ_EVERY_MS;
    this.now = options.now ?? Date.now;
  }

  /**
   * The last status read, synchronously (null before the first read, or without a status), and a
   * read begun in the background when it is older than the interval. For paths that cannot wait
   * (the in-process copy's warm hits).
   */
  current(): FollowStatus | null {
    if (this.now() - this.readAt >= this.intervalMs) void this.read();
    return this.status;
  }

  /**
   * The status, read again when the last read is older than the interval (sharing a read in
   * flight). A failed read answers the last status (null when none) and is reported to `onError`.
   */
  async read(): Promise<FollowStatus | null> {
    if (this.now() - this.readAt < this.intervalMs) return this.status;
    this.inflight ??= readFollowStatus(this.redis, this.prefix)
      .then(
        (status) => {
          this.status = status;
          this.readAt = this.now();
          return status;
        },
        (err: unknown) => {
          this.options.onError?.(err);
          return this.status;
        },
      )
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }
}
