import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/**
 * One client takes at most this share of a process's (parent, client) pairs in a window, so one
 * address that asks for thousands of cached parents cannot fill the bound and leave the parents
 * of everyone else uncounted until the window turns.
 */
const CLIENT_SHARE = 100;
/** Pairs written per script call. */
const FLUSH_PAIRS = 1000;

/**
 * Adds the pairs of one flush to a window's counts. KEYS[1]: the sorted set of distinct clients
 * per parent; KEYS[2]: the set of `client parent` pairs already counted in that window (across
 * every API process). ARGV: the expiry of both (ms), the most parents kept, the most pairs kept,
 * then a parent and its pair, repeated. A pair counts once per window whichever process saw it;
 * past the pair bound new pairs are not counted.
 */
const ADD_PAIRS = `
local ttl, maxParents, maxPairs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  if redis.call('SCARD', KEYS[2]) < maxPairs and redis.call('SADD', KEYS[2], ARGV[i + 1]) == 1 then
    redis.call('ZINCRBY', KEYS[1], 1, ARGV[i])
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(maxParents + 1))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 0
`;

type PairCommands = { snsHotParentPairs(...args: Array<string | number>): Promise<number> };

function pairCommands(redis: RedisClient): PairCommands {
  const commands = redis as unknown as Partial<PairCommands>;
  if (!commands.snsHotParentPairs) {
    redis.defineCommand('snsHotParentPairs', { numberOfKeys: 2, lua: ADD_PAIRS });
  }
  return redis as unknown as PairCommands;
}

/** Pairs seen first in one window and not yet written: parent, then `client parent`. */
type Batch = { window: number; flat: string[] };

/**
 * Distinct clients per parent, for keeping hot entries fresh ahead of expiry and following them on
 * the chain (docs/design.md, "The refresh queue", hot parents). The score of a parent in a window
 * is how many distinct clients (the cold-miss limit's key: the address, `TRUST_PROXY` honoured)
 * were answered for it, so one address asking a parent a thousand times weighs as one.
 *
 * Pairs are found in process (a pair already seen this window costs two map lookups, no I/O, no
 * allocation) and written once a second; in Redis a pair counts once per window across every API
 * process (a set of pairs beside the sorted set of scores, both expiring after two windows), so a
 * load balancer that sends one client to several replicas does not multiply it. Bounds per window:
 * `maxTracked` parents in Redis, `maxTracked` pairs in process and in Redis, and a hundredth of
 * the pairs per client in process; past them new pairs go uncounted until the window turns.
 */
export class HotParentCounter {
  /** Window number (time / window length) of {@link seen}. */
  private window = Number.NEGATIVE_INFINITY;
  /** Clients counted this window in this process, per parent. */
  private seen = new Map<string, Set<string>>();
  /** Pairs counted this window in this process, per client. */
  private perClient = new Map<string, number>();
  private pairs = 0;
  private batches: Batch[] = [];
  private readonly maxPerClient: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** One counting window, in milliseconds: the freshness lifetime. */
    private readonly windowMs: number,
    /** Most parents kept per window in Redis, and most (parent, client) pairs per window. */
    private readonly maxTracked: number,
    private readonly flushMs = 1000,
  ) {
    this.maxPerClient = Math.max(1, Math.ceil(maxTracked / CLIENT_SHARE));
  }

  /**
   * Counts `client` for `parent` (on the default endpoint) in the window holding `now`, unless it
   * is counted already. Called only for requests that were answered from an entry, never for
   * refused ones. O(1), no I/O.
   *
   * @param client the cold-miss limit's key of the request (`clientKey`, src/http/subdomain-answers.ts).
   * @param now the clock, in milliseconds since the epoch.
   */
  hit(parent: string, client: string, now = Date.now()): void {
    const window = Math.floor(now / this.windowMs);
    if (window !== this.window) this.turn(window);
    let clients = this.seen.get(parent);
    if (clients?.has(client)) return;
    if (this.pairs >= this.maxTracked) return;
    const counted = this.perClient.get(client) ?? 0;
    if (counted >= this.maxPerClient) return;
    if (!clients) {
      clients = new Set();
      this.seen.set(parent, clients);
    }
    clients.add(client);
    this.perClient.set(client, counted + 1);
    this.pairs++;
    let batch = this.batches[this.batches.length - 1];
    if (batch?.window !== window) {
      batch = { window, flat: [] };
      this.batches.push(batch);
    }
    // A client key never holds a space (an address), so the pair is unambiguous.
    batch.flat.push(parent, `${client} ${parent}`);
  }

  /** A new window: every client may count again, for every parent. */
  private turn(window: number): void {
    this.window = window;
    this.seen = new Map();
    this.perClient = new Map();
    this.pairs = 0;
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
    const keys = redisKeys(this.prefix);
    const add = pairCommands(this.redis);
    for (const { window, flat } of batches) {
      // In slices: a script's arguments are spread into one call.
      for (let i = 0; i < flat.length; i += 2 * FLUSH_PAIRS) {
        await add.snsHotParentPairs(
          keys.hotParents(window),
          keys.hotParentClients(window),
          this.windowMs * 2 + this.flushMs,
          this.maxTracked,
          this.maxTracked,
          ...flat.slice(i, i + 2 * FLUSH_PAIRS),
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
