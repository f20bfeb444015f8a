import type { RedisClient } from '../redis.js';
import { LuaScript, replyNumber } from '../lua-script.js';
import { redisKeys } from '../redis-keys.js';

/**
 * Distinct clients counted per parent and window (in process and in Redis): past it a parent is as
 * hot as it gets. Small, so a table full of parents stays small; `HOT_KEYS_MIN_CLIENTS` is bounded
 * by it (src/core/config.ts), or no parent could ever reach the bar.
 */
export const HOT_PARENT_CLIENT_CAP = 16;
/** Pairs written per script call. */
const FLUSH_PAIRS = 1000;

/** Adds the pairs of one flush to a window's counts (the file says how). */
const ADD_PAIRS = new LuaScript(
  new URL('../lua/add-hot-parent-pairs.lua', import.meta.url),
  replyNumber,
);

/** Pairs seen first in one window and not yet written: parent, then client, repeated. */
type Batch = { window: number; flat: string[] };

/** A parent counted in this process's window, and its clients (at most the cap). */
type Tracked = { readonly parent: string; readonly clients: string[] };

/**
 * Distinct clients per parent and window (docs/design.md, "The refresh queue", hot parents): a
 * parent's score is how many distinct clients (the cold-miss limit's key) were answered for it,
 * capped at {@link HOT_PARENT_CLIENT_CAP}. Pairs are found in process without I/O and written once
 * a second, so Redis counts a pair once per window across processes. Bounded to `maxTracked`
 * parents; a full table replaces one with the fewest clients (space-saving), so a crowd of one-off
 * parents never locks out a popular one.
 */
export class HotParentCounter {
  /** Window number (time / window length) of {@link seen}. */
  private window = Number.NEGATIVE_INFINITY;
  /** Parents counted this window in this process. */
  private seen = new Map<string, Tracked>();
  /** The tracked parents by how many clients they have (index), each set oldest first. */
  private byCount = emptyBuckets();
  private batches: Batch[] = [];
  /** Pairs in {@link batches}: bounded; past it a new pair is not counted, and counts if asked again after the flush. */
  private pendingPairs = 0;
  private readonly maxPending: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** One counting window, in milliseconds: the freshness lifetime. */
    private readonly windowMs: number,
    /** Most parents counted per window, in process and in Redis. */
    private readonly maxTracked: number,
    private readonly flushMs = 1000,
  ) {
    this.maxPending = maxTracked * HOT_PARENT_CLIENT_CAP;
  }

  /**
   * Counts `client` for `parent` (on the default endpoint) in the window holding `now`, unless it
   * is counted already or the parent has the cap's clients. Called only for requests that were
   * answered from an entry, never for refused ones. O(1) (the cap is a constant), no I/O.
   *
   * @param client the cold-miss limit's key of the request (`req.client`,
   *   src/api/http/plugins/client-identity.ts).
   * @param now the clock, in milliseconds since the epoch.
   */
  hit(parent: string, client: string, now = Date.now()): void {
    const window = Math.floor(now / this.windowMs);
    if (window !== this.window) this.turn(window);
    const tracked = this.seen.get(parent);
    if (tracked) {
      const { clients } = tracked;
      if (clients.length >= HOT_PARENT_CLIENT_CAP || clients.includes(client)) return;
      if (this.pendingPairs >= this.maxPending) return;
      this.byCount[clients.length]?.delete(tracked);
      clients.push(client);
      this.byCount[clients.length]?.add(tracked);
    } else {
      if (this.pendingPairs >= this.maxPending) return;
      if (this.seen.size >= this.maxTracked) this.replaceFewest();
      const added: Tracked = { parent, clients: [client] };
      this.seen.set(parent, added);
      this.byCount[1]?.add(added);
    }
    this.pendingPairs++;
    let batch = this.batches[this.batches.length - 1];
    if (batch?.window !== window) {
      batch = { window, flat: [] };
      this.batches.push(batch);
    }
    batch.flat.push(parent, client);
  }

  /** Forgets the oldest of the parents with the fewest clients, to make room for a new one. */
  private replaceFewest(): void {
    for (const bucket of this.byCount) {
      for (const fewest of bucket) {
        bucket.delete(fewest);
        this.seen.delete(fewest.parent);
        return;
      }
    }
  }

  /** A new window: every client may count again, for every parent. */
  private turn(window: number): void {
    this.window = window;
    this.seen = new Map();
    this.byCount = emptyBuckets();
  }

  /** Starts the periodic flush (unref'd: it never keeps the process alive). */
  start(): void {
    this.timer ??= setInterval(
      () => void this.flush().catch(() => undefined),
      this.flushMs,
    ).unref();
  }

  /** Writes the pairs found since the last flush, each to its window; lost if Redis is down. */
  async flush(): Promise<void> {
    if (this.batches.length === 0) return;
    const batches = this.batches;
    this.batches = [];
    this.pendingPairs = 0;
    const keys = redisKeys(this.prefix);
    for (const { window, flat } of batches) {
      // In slices: one script call holds Redis while it runs.
      for (let i = 0; i < flat.length; i += 2 * FLUSH_PAIRS) {
        await ADD_PAIRS.run(
          this.redis,
          [keys.hotParents(window), keys.hotParentClients(window)],
          [
            this.windowMs * 2 + this.flushMs,
            this.maxTracked,
            HOT_PARENT_CLIENT_CAP,
            ...flat.slice(i, i + 2 * FLUSH_PAIRS),
          ],
        );
      }
    }
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush().catch(() => undefined);
  }
}

/** One set per count of clients, 0 (never used) to the cap. */
function emptyBuckets(): Array<Set<Tracked>> {
  return Array.from({ length: HOT_PARENT_CLIENT_CAP + 1 }, () => new Set<Tracked>());
}

/** The sorted set of the window holding `now`. */
export function hotParentsWindowKey(prefix: string, windowMs: number, now: number): string {
  return redisKeys(prefix).hotParents(Math.floor(now / windowMs));
}

/**
 * The `topN` parents the most distinct clients asked for over the current and the previous window,
 * first the most asked, among those that `minClients` distinct clients asked for in one of the two
 * windows (`HOT_KEYS_MIN_CLIENTS`): proactive refreshes are charged to no client, so one client
 * alone never gets them. A parent's rank is the sum of its counts in the windows where it reached
 * `minClients`; equal sums keep the order Redis gives (the current window's first, then by name).
 *
 * @param minClients at least 1.
 * @returns parent labels, at most `topN`.
 */
export async function topHotParents(
  redis: RedisClient,
  prefix: string,
  windowMs: number,
  topN: number,
  minClients: number,
  now = Date.now(),
): Promise<string[]> {
  const keys = [
    hotParentsWindowKey(prefix, windowMs, now),
    hotParentsWindowKey(prefix, windowMs, now - windowMs),
  ];
  const totals = new Map<string, number>();
  for (const key of keys) {
    const flat = await redis.zrevrangebyscore(
      key,
      '+inf',
      Math.max(1, minClients),
      'WITHSCORES',
      'LIMIT',
      0,
      topN,
    );
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const parent = flat[i] as string;
      totals.set(parent, (totals.get(parent) ?? 0) + Number(flat[i + 1]));
    }
  }
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, topN)
    .map(([parent]) => parent);
}
