import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { EndpointLabel, Metrics } from '../../core/metrics.js';
import { BUDGET_COUNTER_TTL_MS, utcDay, type CreditBudget } from '../../core/rpc/budget.js';
import type { RedisClient } from '../../core/redis.js';
import { redisKeys } from '../../core/redis-keys.js';

/**
 * A call refused before it was made: its credits would take the configured endpoint's spend past
 * `RPC_CREDITS_PER_DAY` (docs/design.md, "Budget"). Final: retrying before the next UTC day
 * meets the same refusal, so the refresh fails at once (no BullMQ retry).
 */
export class CreditBudgetRefusal extends Error {
  override readonly name = 'CreditBudgetRefusal';
  constructor(
    readonly method: string,
    readonly credits: number,
    readonly spent: number,
    readonly budget: number,
  ) {
    super(
      `${method} (${credits} credits) refused: ${spent} of the ${budget} credits of RPC_CREDITS_PER_DAY spent today`,
    );
  }
}

/** Longest a shutdown waits for the last spends to be written. */
const CLOSE_WRITE_MS = 1_000;

/** Credits a call holds in today's counter before it is made ({@link CreditMeter.reserve}). */
export type Reservation = { readonly day: string; readonly credits: number };

export type CreditMeterOptions = {
  metrics: Metrics;
  /** Where today's counter lives; without it only the metric counts (unit tests). */
  redis?: RedisClient;
  prefix?: string;
  /** The budget's view: reads the state, takes the totals writes return. */
  budget?: CreditBudget;
  logger?: Logger;
  /** Longest a spend waits before it is added to the counter (one write in flight). */
  flushMs?: number;
  now?: () => number;
};

/**
 * KEYS[1] today's counter. ARGV: the budget, the call's credits, the counter's expiry (ms).
 * Adds the credits unless the total would pass the budget. Returns {1, total} when added,
 * {0, total} when refused (totals as strings: a float would be cut to an integer).
 */
const RESERVE = `
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent + tonumber(ARGV[2]) > tonumber(ARGV[1]) + 1e-9 then return {0, tostring(spent)} end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, total}
`;

type ReserveCommand = {
  snsReserveCredits(
    key: string,
    budget: number,
    credits: number,
    ttlMs: number,
  ): Promise<[number, string]>;
};

/**
 * Counts the credits the worker spends (`RPC_CREDITS`), in one place: `sns_rpc_credits_total`
 * and, for the configured endpoint, today's counter in Redis shared by every replica
 * (`<prefix>:rpc-credits:<UTC day>`, INCRBYFLOAT; `?rpc=` overrides are the client's server, not
 * the operator's budget, and are not added). With `RPC_CREDITS_PER_DAY` set, an HTTP call first
 * reserves its credits ({@link reserve}): refused when they would pass the budget.
 */
export class CreditMeter {
  private readonly keys: ReturnType<typeof redisKeys> | undefined;
  private readonly now: () => number;
  /** Spends not yet added to the counter, by UTC day. */
  private readonly pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private warned = false;

  constructor(private readonly opts: CreditMeterOptions) {
    this.keys = opts.prefix === undefined ? undefined : redisKeys(opts.prefix);
    this.now = opts.now ?? Date.now;
  }

  /**
   * Counts `credits` spent on a call or a websocket (`method` as in `RPC_CREDITS`: a JSON-RPC
   * method, `wsConnection`, `wsMegabyte`) of `endpoint`: the one function every spend goes
   * through. The configured endpoint's spend is added to today's counter within `flushMs`, unless
   * it was reserved (then it is there already).
   */
  spend(method: string, endpoint: EndpointLabel, credits: number, reserved?: Reservation): void {
    this.opts.metrics.rpcCredits.inc({ method, endpoint }, credits);
    if (endpoint !== 'default' || reserved || credits <= 0 || !this.opts.redis) return;
    const day = utcDay(this.now());
    this.pending.set(day, (this.pending.get(day) ?? 0) + credits);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.opts.flushMs ?? 250).unref();
  }

  /**
   * Before a call of `method` to the configured endpoint: holds its `credits` in today's counter,
   * or refuses the call when they would take the day past `RPC_CREDITS_PER_DAY`. Undefined (and
   * nothing held) without a budget. A held reservation is either {@link spend}'s `reserved`, or
   * given back with {@link release} when the call spent nothing (no reply, a 429).
   *
   * @throws CreditBudgetRefusal when the day's budget cannot take the call.
   * @throws the Redis error when the counter cannot be written (the call is not made).
   */
  async reserve(method: string, credits: number): Promise<Reservation | undefined> {
    const budget = this.opts.budget?.creditsPerDay;
    const { redis } = this.opts;
    if (budget === undefined || !redis || !this.keys || credits <= 0) return undefined;
    const day = utcDay(this.now());
    const [added, total] = await reserveCommand(redis).snsReserveCredits(
      this.keys.rpcCredits(day),
      budget,
      credits,
      BUDGET_COUNTER_TTL_MS,
    );
    this.opts.budget?.observe(day, Number(total));
    if (added !== 1) throw new CreditBudgetRefusal(method, credits, Number(total), budget);
    return { day, credits };
  }

  /** Gives back a reservation whose call spent nothing. */
  release(reservation: Reservation | undefined): void {
    if (!reservation || !this.opts.redis || !this.keys) return;
    this.opts.redis
      .incrbyfloat(this.keys.rpcCredits(reservation.day), -reservation.credits)
      .catch((err: unknown) => this.warn(err));
  }

  /** Adds the pending spends to their days' counters; one write at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /**
   * Writes what is pending and stops the timer (at shutdown). Waits {@link CLOSE_WRITE_MS} at
   * most, and not at all while Redis is not connected: a shutdown is never held by a Redis that is
   * gone (what was pending is lost with the process then).
   */
  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.opts.redis && this.opts.redis.status !== 'ready') return;
    const written = (async () => {
      await this.flushing;
      await this.flush();
    })();
    await Promise.race([written, sleep(CLOSE_WRITE_MS, undefined, { ref: false })]);
  }

  private async write(): Promise<void> {
    const { redis } = this.opts;
    if (!redis || !this.keys) return;
    const days = [...this.pending];
    this.pending.clear();
    for (const [day, credits] of days) {
      const key = this.keys.rpcCredits(day);
      try {
        const replies = await redis
          .pipeline()
          .incrbyfloat(key, credits)
          .pexpire(key, BUDGET_COUNTER_TTL_MS)
          .exec();
        const [error, total] = replies?.[0] ?? [new Error('no reply')];
        if (error) throw error;
        this.opts.budget?.observe(day, Number(total));
      } catch (err) {
        // Kept for the next write: a spend is late, never lost while the process lives.
        this.pending.set(day, (this.pending.get(day) ?? 0) + credits);
        this.warn(err);
      }
    }
  }

  private warn(err: unknown): void {
    if (this.warned) return;
    this.warned = true;
    this.opts.logger?.warn({ err: String(err) }, 'could not add RPC credits to the daily counter');
  }
}

function reserveCommand(redis: RedisClient): ReserveCommand {
  const commands = redis as unknown as Partial<ReserveCommand>;
  if (!commands.snsReserveCredits) {
    redis.defineCommand('snsReserveCredits', { numberOfKeys: 1, lua: RESERVE });
  }
  return redis as unknown as ReserveCommand;
}
