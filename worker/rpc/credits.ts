import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { EndpointLabel, Metrics } from '../../src/core/metrics.js';
import { BUDGET_COUNTER_TTL_MS, utcDay, type CreditBudget } from '../../src/core/rpc/budget.js';
import type { RedisClient } from '../../src/core/redis.js';
import { redisKeys } from '../../src/core/redis-keys.js';
import { LuaScript, replyList, replyNumber, replyString } from '../../src/core/lua-script.js';

/**
 * A call refused unmade: it would take the day past `RPC_CREDITS_PER_DAY`. Final: a retry before
 * the next UTC day meets the same refusal.
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

/** Longest shutdown wait for the last spends. */
const CLOSE_WRITE_MS = 1_000;

/** Credits held in today's counter before a call ({@link CreditMeter.reserve}). */
export type Reservation = { readonly day: string; readonly credits: number };

/** Options of {@link CreditMeter}. */
export type CreditMeterOptions = {
  metrics: Metrics;
  /** Today's counter; absent: the metric only (unit tests). */
  redis?: RedisClient;
  prefix?: string;
  /** Reads the budget state, takes the totals writes return. */
  budget?: CreditBudget;
  logger?: Logger;
  /** Longest a spend waits to be written (one write in flight). */
  flushMs?: number;
  now?: () => number;
};

/**
 * Adds a call's credits to today's counter unless past the budget (after putting back a counter
 * Redis lost: the floor, see the file): added (1 or 0), and the total.
 */
const RESERVE = new LuaScript(new URL('../lua/reserve-credits.lua', import.meta.url), (raw) => {
  const [added, total] = replyList(raw);
  return { added: replyNumber(added), total: Number(replyString(total)) };
});

/** Adds credits (negative: given back) to a day's counter, the floor first: the total. */
const ADD = new LuaScript(new URL('../lua/add-credits.lua', import.meta.url), (raw) =>
  Number(replyString(raw)),
);

/**
 * Counts worker credit spends: `sns_rpc_credits_total`, and for the configured endpoint today's
 * counter shared by replicas (overrides are the client's server, not the operator's budget).
 * With a budget, calls reserve first ({@link reserve}).
 */
export class CreditMeter {
  private readonly keys: ReturnType<typeof redisKeys> | undefined;
  private readonly now: () => number;
  /** Unwritten spends by UTC day. */
  private readonly pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private warned = false;

  constructor(private readonly opts: CreditMeterOptions) {
    this.keys = opts.prefix === undefined ? undefined : redisKeys(opts.prefix);
    this.now = opts.now ?? Date.now;
  }

  /**
   * The one function every spend goes through (`method` as in `RPC_CREDITS`). Unreserved
   * configured-endpoint spends reach today's counter within `flushMs`.
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
   * Holds a call's credits in today's counter, or refuses it; undefined without a budget. The
   * reservation goes to {@link spend}, or back via {@link release} if nothing was spent (no reply,
   * a 429).
   *
   * @throws CreditBudgetRefusal when the day's budget cannot take the call.
   * @throws the Redis error when the counter cannot be written (the call is not made).
   */
  async reserve(method: string, credits: number): Promise<Reservation | undefined> {
    const budget = this.opts.budget?.creditsPerDay;
    const { redis } = this.opts;
    if (budget === undefined || !redis || !this.keys || credits <= 0) return undefined;
    const day = utcDay(this.now());
    const { added, total } = await RESERVE.run(
      redis,
      [this.keys.rpcCredits(day)],
      [this.floorOf(day), BUDGET_COUNTER_TTL_MS, budget, credits],
    );
    this.opts.budget?.observe(day, total);
    if (added !== 1) throw new CreditBudgetRefusal(method, credits, total, budget);
    return { day, credits };
  }

  /** Gives back an unspent reservation. */
  release(reservation: Reservation | undefined): void {
    if (!reservation || !this.opts.redis || !this.keys) return;
    const { day, credits } = reservation;
    ADD.run(
      this.opts.redis,
      [this.keys.rpcCredits(day)],
      [this.floorOf(day), BUDGET_COUNTER_TTL_MS, -credits],
    ).catch((err: unknown) => this.warn(err));
  }

  /** The spend of `day` known to the budget's view ({@link CreditBudget.floorOf}); 0 without one. */
  private floorOf(day: string): number {
    return this.opts.budget?.floorOf(day) ?? 0;
  }

  /** Writes pending spends; one write at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /**
   * Final write at shutdown, {@link CLOSE_WRITE_MS} at most, none if Redis is not connected: a
   * gone Redis never holds a shutdown (pending spends are lost then).
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
        const total = await ADD.run(
          redis,
          [key],
          [this.floorOf(day), BUDGET_COUNTER_TTL_MS, credits],
        );
        this.opts.budget?.observe(day, total);
      } catch (err) {
        // Kept for the next write: late, never lost while the process lives.
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
