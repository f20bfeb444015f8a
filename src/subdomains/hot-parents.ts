import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/**
 * Request counts per parent, for refreshing hot entries ahead of expiry (docs/design.md, "The
 * refresh queue", hot parents). Counted in process and flushed to Redis once a second, so the
 * hot path pays no extra round trip; in Redis one sorted set per freshness window, trimmed to
 * `maxTracked` members and expiring after two windows, so memory stays bounded and parents nobody
 * asks for drop out by themselves.
 */
export class HotParentCounter {
  private counts = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** One counting window, in milliseconds: the freshness lifetime. */
    private readonly windowMs: number,
    /** Most parents counted per window, in process and in Redis. */
    private readonly maxTracked: number,
    private readonly flushMs = 1000,
  ) {}

  /** Counts one request for `parent` on the default endpoint. O(1), no I/O. */
  hit(parent: string): void {
    const n = this.counts.get(parent);
    if (n !== undefined) this.counts.set(parent, n + 1);
    else if (this.counts.size < this.maxTracked) this.counts.set(parent, 1);
  }

  /** Starts the periodic flush (unref'd: it never keeps the process alive). */
  start(): void {
    this.timer ??= setInterval(
      () => void this.flush().catch(() => undefined),
      this.flushMs,
    ).unref();
  }

  /** Writes the counts gathered since the last flush; counts are lost if Redis is down. */
  async flush(now = Date.now()): Promise<void> {
    if (this.counts.size === 0) return;
    const batch = this.counts;
    this.counts = new Map();
    const key = hotParentsWindowKey(this.prefix, this.windowMs, now);
    const pipeline = this.redis.pipeline();
    for (const [parent, n] of batch) pipeline.zincrby(key, n, parent);
    pipeline.zremrangebyrank(key, 0, -(this.maxTracked + 1));
    pipeline.pexpire(key, this.windowMs * 2 + this.flushMs);
    await pipeline.exec();
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush().catch(() => undefined);
  }
}

/** The sorted set of the window holding `now`. */
export function hotParentsWindowKey(prefix: string, windowMs: number, now: number): string {
  return redisKeys(prefix).hotParents(Math.floor(now / windowMs));
}

/**
 * The `topN` most requested parents over the current and the previous window, most requested
 * first.
 */
export async function topHotParents(
  redis: RedisClient,
  prefix: string,
  windowMs: number,
  topN: number,
  now = Date.now(),
): Promise<string[]> {
  const keys = [
    hotParentsWindowKey(prefix, windowMs, now),
    hotParentsWindowKey(prefix, windowMs, now - windowMs),
  ];
  const totals = new Map<string, number>();
  for (const key of keys) {
    const flat = await redis.zrevrange(key, 0, topN - 1, 'WITHSCORES');
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
