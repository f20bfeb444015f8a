import ipaddr from 'ipaddr.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/**
 * The daily credit budget of the configured endpoint (`RPC_CREDITS_PER_DAY`; docs/design.md,
 * "Budget"): the rule that turns today's spend into a state, and the view of that spend API and
 * worker processes read from Redis. The spend itself is written by the worker's credit meter
 * (worker/rpc/credits.ts), the one place credits are counted.
 */

/** `normal`: nothing changes; `stretched`: freshness stretched, nothing refreshed ahead; `exhausted`: no new refresh. */
export type BudgetState = 'normal' | 'stretched' | 'exhausted';

/** `sns_rpc_budget_state`'s value of each state. */
const BUDGET_STATE_VALUE: Readonly<Record<BudgetState, number>> = Object.freeze({
  normal: 0,
  stretched: 1,
  exhausted: 2,
});

/**
 * The share of the day's budget that may be spent ahead of an even pace before freshness is
 * stretched: lets a day begin with a burst of cold misses (a deploy, a cold cache) at full
 * freshness.
 */
const BUDGET_BURST_SHARE = 0.2;

/**
 * The share of the day's budget past which freshness is stretched whatever the time: the rest is
 * kept for cold misses, which have no cached answer to fall back on.
 */
const BUDGET_STRETCH_CAP = 0.8;

/** How many fresh windows a stale entry waits for its refresh while stretched. */
export const BUDGET_STRETCH_FACTOR = 4;

/** How long a day's counter lives after its last write: the day, and the next (late reads). */
export const BUDGET_COUNTER_TTL_MS = 2 * 86_400_000;

const DAY_MS = 86_400_000;

/** The UTC day of `now` (Unix milliseconds), as the counter's key names it: `YYYY-MM-DD`. */
export const utcDay = (now: number): string => new Date(now).toISOString().slice(0, 10);

/** Milliseconds from `now` to the start of the next UTC day (at least 1). */
export const msToNextUtcDay = (now: number): number => Math.max(1, DAY_MS - (now % DAY_MS));

/**
 * The spend past which freshness is stretched at `now`: the even pace (the budget times the share
 * of the UTC day gone) plus {@link BUDGET_BURST_SHARE} of the budget, at most
 * {@link BUDGET_STRETCH_CAP} of it. So 20% at midnight, 70% at noon, 80% from 14:24 on.
 */
export function softThreshold(budget: number, now: number): number {
  const dayGone = (now % DAY_MS) / DAY_MS;
  return budget * Math.min(BUDGET_STRETCH_CAP, dayGone + BUDGET_BURST_SHARE);
}

/**
 * The state of a day's `spent` credits against `budget` at `now`: `exhausted` from the budget on,
 * `stretched` from {@link softThreshold} on, else `normal` (always without a budget).
 */
export function budgetState(spent: number, budget: number | undefined, now: number): BudgetState {
  if (budget === undefined) return 'normal';
  if (spent >= budget) return 'exhausted';
  if (spent >= softThreshold(budget, now)) return 'stretched';
  return 'normal';
}

/**
 * How the day's budget is shared (docs/design.md, "Budget"), each a fraction of it: `client` the
 * most one client may spend, `network` the most one IPv6 /48 may (its /64s together),
 * `proactive` what is spent for no request (refresh ahead, following the chain), `reserve` what
 * is kept for cold misses of parents known to exist. The client pool is the rest.
 */
export type CreditShares = {
  readonly client: number;
  readonly network: number;
  readonly proactive: number;
  readonly reserve: number;
};

/** The defaults of `RPC_CREDITS_*_SHARE` (src/core/config.ts). */
const DEFAULT_CREDIT_SHARES: CreditShares = Object.freeze({
  client: 0.02,
  network: 0.05,
  proactive: 0.3,
  reserve: 0.2,
});

/** The shares as the configuration sets them. */
const creditSharesOf = (config: {
  RPC_CREDITS_CLIENT_SHARE: number;
  RPC_CREDITS_NETWORK_SHARE: number;
  RPC_CREDITS_PROACTIVE_SHARE: number;
  RPC_CREDITS_RESERVE_SHARE: number;
}): CreditShares =>
  Object.freeze({
    client: config.RPC_CREDITS_CLIENT_SHARE,
    network: config.RPC_CREDITS_NETWORK_SHARE,
    proactive: config.RPC_CREDITS_PROACTIVE_SHARE,
    reserve: config.RPC_CREDITS_RESERVE_SHARE,
  });

/**
 * The configured endpoint's budget as both processes build it: `RPC_CREDITS_PER_DAY` shared as
 * the `RPC_CREDITS_*_SHARE` settings say, counted in Redis under `QUEUE_PREFIX`, a stretched
 * window multiplying `CACHE_FRESH_MS` (docs/design.md, "Budget").
 */
export const creditBudgetOf = (
  config: Parameters<typeof creditSharesOf>[0] &
    Pick<Config, 'QUEUE_PREFIX' | 'RPC_CREDITS_PER_DAY' | 'CACHE_FRESH_MS'>,
  redis: RedisClient,
  metrics: Metrics,
): CreditBudget =>
  new CreditBudget({
    redis,
    prefix: config.QUEUE_PREFIX,
    creditsPerDay: config.RPC_CREDITS_PER_DAY,
    shares: creditSharesOf(config),
    freshMs: config.CACHE_FRESH_MS,
    metrics,
  });

/** Fields of the day's shares hash (`rpcCreditShares`) that are no client's. */
export const SHARE_FIELD = Object.freeze({
  proactive: 'proactive',
  pool: 'pool',
  reserve: 'reserve',
} as const);

/**
 * The share fields a client's spend is charged to, each with its cap in credits: its own
 * (`client:<key>`), and for an IPv6 /64 its /48 too (`network:<prefix>/48`): one site is given a
 * /48 (RFC 6177), 65,536 /64s that would otherwise be as many clients.
 *
 * @param client the client key (`clientKeyOf`: an IPv4 address, or an IPv6 `<prefix>/64`).
 */
export function clientShareFields(
  client: string,
  budget: number,
  shares: CreditShares,
): Array<{ field: string; cap: number }> {
  return clientFields(client).map((field, i) => ({
    field,
    cap: budget * (i === 0 ? shares.client : shares.network),
  }));
}

/** The names of {@link clientShareFields}: the client's own, then its /48's if any. */
export function clientFields(client: string): string[] {
  const network = networkOf(client);
  return network === undefined ? [`client:${client}`] : [`client:${client}`, `network:${network}`];
}

/** The /48 of an IPv6 /64 client key, else undefined. */
function networkOf(client: string): string | undefined {
  if (!client.endsWith('/64')) return undefined;
  try {
    const parts = ipaddr.IPv6.parse(client.slice(0, -3)).parts;
    return `${new ipaddr.IPv6([...parts.slice(0, 3), 0, 0, 0, 0, 0]).toString()}/48`;
  } catch {
    return undefined;
  }
}

/**
 * The caps of the day's accounts at `now`, in credits: the proactive share is paced like the
 * soft threshold (its share of the day gone plus {@link BUDGET_BURST_SHARE}, at most all of it),
 * so refreshes ahead cannot burn it in the morning; the pool and the reserve are whole from
 * midnight (a cold miss has nothing to fall back on).
 */
export function shareCaps(
  budget: number,
  shares: CreditShares,
  now: number,
): { proactive: number; pool: number; reserve: number } {
  const dayGone = (now % DAY_MS) / DAY_MS;
  const pool = budget * Math.max(0, 1 - shares.proactive - shares.reserve);
  return {
    proactive: budget * shares.proactive * Math.min(1, dayGone + BUDGET_BURST_SHARE),
    pool,
    reserve: budget * shares.reserve,
  };
}

export type CreditBudgetOptions = {
  redis: RedisClient;
  prefix: string;
  /** `RPC_CREDITS_PER_DAY`; undefined: no budget (the spend is still read, for the gauge). */
  creditsPerDay: number | undefined;
  /** How the day is shared; {@link DEFAULT_CREDIT_SHARES} when absent. */
  shares?: CreditShares;
  /** `CACHE_FRESH_MS`: what a stretched window multiplies. */
  freshMs: number;
  metrics: Metrics;
  /** The clock, in Unix milliseconds. */
  now?: () => number;
  /** Least time between two reads of the counter (one in flight at a time). */
  readEveryMs?: number;
};

/**
 * A process's view of today's spend across replicas: the counter is read at most every
 * `readEveryMs` (1 s), one read in flight, when the state is asked for; the answer is the last
 * read's (a spend is at most that late). Writers hand in the totals their writes return
 * ({@link observe}), so the worker's view follows its own spend at once. Sets the budget gauges.
 */
export class CreditBudget {
  readonly creditsPerDay: number | undefined;
  readonly shares: CreditShares;
  private readonly now: () => number;
  private readonly readEveryMs: number;
  private readonly keys: ReturnType<typeof redisKeys>;
  private day = '';
  private spentToday = 0;
  /** The proactive share's spend of {@link day}, as last read. */
  private proactiveToday = 0;
  /**
   * Whether reads fetch the proactive share's spend: from the first {@link proactiveAffordable}
   * on. Only the follower asks it, so the API's reads and the worker's without a follower make
   * none.
   */
  private proactiveWanted = false;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;
  /** Totals observed from writes: a read that saw none meanwhile is the newest value known. */
  private observed = 0;

  constructor(private readonly opts: CreditBudgetOptions) {
    this.creditsPerDay = opts.creditsPerDay;
    this.shares = opts.shares ?? DEFAULT_CREDIT_SHARES;
    this.now = opts.now ?? Date.now;
    this.readEveryMs = opts.readEveryMs ?? 1_000;
    this.keys = redisKeys(opts.prefix);
    opts.metrics.rpcBudget.set(opts.creditsPerDay ?? 0);
    opts.metrics.setBudgetSource(async () => {
      await this.read();
      const now = this.now();
      return { spent: this.spent(now), state: BUDGET_STATE_VALUE[this.state(now)] };
    });
  }

  /** Today's spend as last read or observed (0 on a new day until read), in credits. */
  spent(now = this.now()): number {
    return this.day === utcDay(now) ? this.spentToday : 0;
  }

  /**
   * The state now ({@link budgetState}) from the last spend known; starts a read of the counter
   * when the last one is older than `readEveryMs`. Without a budget: `normal`, and no read.
   */
  state(now = this.now()): BudgetState {
    if (this.creditsPerDay === undefined) return 'normal';
    if (now - this.readAt >= this.readEveryMs) void this.read().catch(() => undefined);
    return budgetState(this.spent(now), this.creditsPerDay, now);
  }

  /**
   * Whether a call of `credits` no request asked for fits the proactive share now: its spend, as
   * last read, plus `credits` within the share's cap at `now` ({@link shareCaps}: paced through
   * the day; the reservation's tolerance), and the day not exhausted. What the followed chain's reads for Deletes ask before each call, so they are
   * paced like every other proactive spend instead of being refused one by one by the
   * reservation (which is what holds the share exactly). Always true without a budget; reads the
   * counter as {@link state} does. The first call starts a read that includes the share's spend
   * (none does before), and answers as a process does before its first read: no spend known.
   */
  proactiveAffordable(credits = 1, now = this.now()): boolean {
    const budget = this.creditsPerDay;
    if (budget === undefined) return true;
    if (!this.proactiveWanted) {
      this.proactiveWanted = true;
      this.readAt = Number.NEGATIVE_INFINITY;
    }
    if (this.state(now) === 'exhausted') return false;
    const spent = this.day === utcDay(now) ? this.proactiveToday : 0;
    return spent + credits <= shareCaps(budget, this.shares, now).proactive + 1e-9;
  }

  /**
   * Whether a stale entry fetched at `fetchedAt` may be refreshed now: always while `normal`;
   * while `stretched` only once it is {@link BUDGET_STRETCH_FACTOR} fresh windows old; never
   * once `exhausted` (it is served stale).
   */
  staleRefreshAllowed(fetchedAt: number, now = this.now()): boolean {
    const state = this.state(now);
    if (state === 'normal') return true;
    if (state === 'exhausted') return false;
    return now - fetchedAt >= BUDGET_STRETCH_FACTOR * this.opts.freshMs;
  }

  /** Whole seconds to the next UTC day, when the budget starts again (`Retry-After`). */
  retryAfterSeconds(now = this.now()): number {
    return Math.ceil(msToNextUtcDay(now) / 1000);
  }

  /**
   * Whether `client` has spent its share of today (or its /48 has): read from Redis, one round
   * trip. The API asks before it queues a refresh for the client, so a client past its share is
   * refused at once (the worker's reservation is what holds it exactly). False without a budget.
   *
   * @throws the Redis error.
   */
  async clientShareSpent(client: string, now = this.now()): Promise<boolean> {
    const budget = this.creditsPerDay;
    if (budget === undefined) return false;
    const fields = clientShareFields(client, budget, this.shares);
    const spent = await this.opts.redis.hmget(
      this.keys.rpcCreditShares(utcDay(now)),
      ...fields.map((f) => f.field),
    );
    return fields.some((f, i) => Number(spent[i] ?? 0) >= f.cap - 1e-9);
  }

  /**
   * The spend of `day` this process knows of (0 for another day), in credits: what a writer puts
   * back into the day's counter when Redis lost it, so a restart of a Redis without persistence
   * does not grant a fresh budget. Reservations another replica gave back after this process last
   * saw the counter may be counted again: the error is on the side of spending less.
   */
  floorOf(day: string): number {
    return day === this.day ? this.spentToday : 0;
  }

  /** Takes a total of `day`'s counter learned from a write of it (INCRBYFLOAT's answer). */
  observe(day: string, total: number): void {
    this.observed++;
    this.take(day, total, false);
  }

  /**
   * Sets the day's spend. A lower total of the same day is taken only when `lower` (a read no
   * write answered after): the counter goes down when reservations are given back, and a view
   * that kept its highest total would stay stretched or exhausted for the rest of the day.
   */
  private take(day: string, total: number, lower: boolean): void {
    if (!Number.isFinite(total)) return;
    if (day === this.day && total < this.spentToday && !lower) return;
    if (day < this.day) return;
    if (day !== this.day) this.proactiveToday = 0;
    this.day = day;
    this.spentToday = total;
    this.opts.metrics.rpcBudgetSpent.set(total);
  }

  /** Reads today's counter now, unless a read is under way (then waits for that one). */
  read(): Promise<void> {
    this.reading ??= (async () => {
      const now = this.now();
      this.readAt = now;
      const day = utcDay(now);
      const observed = this.observed;
      const [raw, proactive] = await Promise.all([
        this.opts.redis.get(this.keys.rpcCredits(day)),
        this.proactiveWanted
          ? this.opts.redis.hget(this.keys.rpcCreditShares(day), SHARE_FIELD.proactive)
          : undefined,
      ]);
      // No counter within a day that had one is Redis having lost its data (the counter outlives
      // its day, and reservations given back leave it at 0, not gone): not a fresh budget. The
      // spend known is kept, and the worker writes it back (`floorOf`).
      if (raw === null && day === this.day && this.spentToday > 0) return;
      // A write's total that arrived meanwhile may be newer than this read's.
      this.take(day, raw === null ? 0 : Number(raw), this.observed === observed);
      if (proactive === undefined) return;
      const share = Number(proactive ?? 0);
      if (day === this.day && Number.isFinite(share)) this.proactiveToday = share;
    })().finally(() => (this.reading = undefined));
    return this.reading;
  }
}
