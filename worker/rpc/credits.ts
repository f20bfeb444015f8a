import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { EndpointLabel, Metrics } from '../../src/core/metrics.js';
import {
  BUDGET_COUNTER_TTL_MS,
  clientFields,
  clientShareFields,
  SHARE_FIELD,
  shareCaps,
  utcDay,
  type CreditBudget,
} from '../../src/core/rpc/budget.js';
import type { RedisClient } from '../../src/core/redis.js';
import { redisKeys } from '../../src/core/redis-keys.js';

/**
 * Who a call is charged to (docs/design.md, "Budget"): a client (a refresh its request started),
 * or the proactive share (everything no request asked for: refreshes ahead, following the chain,
 * the websocket). `reserve`: the client's cold miss is of a parent known to exist, so it may
 * spend the reserve once the client pool is spent; set by the refresh once it knows.
 */
export type CreditAccount =
  | { readonly kind: 'proactive' }
  | { readonly kind: 'client'; readonly client: string; reserve: boolean };

/** Why a reservation was refused: the day or the pools (`budget`), the client's share, the proactive share. */
export type RefusalKind = 'budget' | 'client' | 'proactive';

/**
 * A call refused unmade: it would take the day past `RPC_CREDITS_PER_DAY`, or its account past
 * its share. Final: a retry before the next UTC day meets the same refusal.
 */
export class CreditBudgetRefusal extends Error {
  override readonly name = 'CreditBudgetRefusal';
  constructor(
    readonly method: string,
    readonly credits: number,
    readonly spent: number,
    readonly budget: number,
    readonly kind: RefusalKind = 'budget',
  ) {
    super(
      kind === 'budget'
        ? `${method} (${credits} credits) refused: ${spent} of the ${budget} credits of RPC_CREDITS_PER_DAY spent today`
        : `${method} (${credits} credits) refused: the ${kind === 'client' ? "client's" : 'proactive'} share of RPC_CREDITS_PER_DAY is spent today (${spent} of ${budget} in all)`,
    );
  }
}

const accounts = new AsyncLocalStorage<CreditAccount>();
const PROACTIVE: CreditAccount = Object.freeze({ kind: 'proactive' });

/**
 * Runs `fn` with every credit it spends charged to `account`; whatever runs outside is charged
 * to the proactive share, so no credit is charged to nobody.
 */
export function chargedTo<T>(account: CreditAccount, fn: () => T): T {
  return accounts.run(account, fn);
}

/** The account the current call is charged to. */
export const currentAccount = (): CreditAccount => accounts.getStore() ?? PROACTIVE;

/** Longest shutdown wait for the last spends. */
const CLOSE_WRITE_MS = 1_000;

/**
 * Credits held in today's counter and its account's share fields before a call
 * ({@link CreditMeter.reserve}).
 */
export type Reservation = {
  readonly day: string;
  readonly credits: number;
  readonly fields: readonly string[];
};

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
 * Puts back a day's counter Redis lost (KEYS[1] missing while this process knew a spend, ARGV[1]):
 * a restart of a Redis without persistence must not grant a fresh budget. The counter is never
 * missing otherwise within its day (it outlives the day, and given-back reservations leave 0).
 */
const RESTORE = `
local floor = tonumber(ARGV[1])
if floor > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
`;

/**
 * KEYS[1] today's counter, KEYS[2] today's shares hash. ARGV: floor ({@link RESTORE}), expiry ms,
 * budget, credits, the account (`p` proactive, `c` client), the proactive, pool and reserve caps,
 * whether the reserve may pay (`1`), then the client's fields and caps in pairs. Adds the credits
 * to the counter and to the account's fields unless the day, the client's own fields, or every
 * pool it may use would go past its cap: a client pays from the pool, then (a parent known to
 * exist) from the reserve. Returns {1, total, fields joined by spaces (a client key holds none)}
 * or {0, total, why}; totals as strings (a float reply would be truncated).
 */
const RESERVE = `${RESTORE}
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local credits = tonumber(ARGV[4])
local eps = 1e-9
if spent + credits > tonumber(ARGV[3]) + eps then return {0, tostring(spent), 'budget'} end
local function used(field) return tonumber(redis.call('HGET', KEYS[2], field) or '0') end
local fields = {}
if ARGV[5] == 'p' then
  if used('proactive') + credits > tonumber(ARGV[6]) + eps then
    return {0, tostring(spent), 'proactive'}
  end
  fields[1] = 'proactive'
else
  for i = 10, #ARGV, 2 do
    if used(ARGV[i]) + credits > tonumber(ARGV[i + 1]) + eps then
      return {0, tostring(spent), 'client'}
    end
    fields[#fields + 1] = ARGV[i]
  end
  if used('pool') + credits <= tonumber(ARGV[7]) + eps then
    fields[#fields + 1] = 'pool'
  elseif ARGV[9] == '1' and used('reserve') + credits <= tonumber(ARGV[8]) + eps then
    fields[#fields + 1] = 'reserve'
  else
    return {0, tostring(spent), 'budget'}
  end
end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[4])
for _, field in ipairs(fields) do redis.call('HINCRBYFLOAT', KEYS[2], field, ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {1, total, table.concat(fields, ' ')}
`;

/**
 * KEYS[1] a day's counter, KEYS[2] its shares hash; ARGV floor ({@link RESTORE}), expiry ms,
 * credits (negative: given back), then share fields and their credits in pairs. Returns the
 * total as a string.
 */
const ADD = `${RESTORE}
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 4, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1]) end
if #ARGV >= 4 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return total
`;

type CreditCommands = {
  snsReserveCredits(
    counter: string,
    shares: string,
    ...args: Array<string | number>
  ): Promise<[number, string, string]>;
  snsAddCredits(counter: string, shares: string, ...args: Array<string | number>): Promise<string>;
};

/**
 * Counts worker credit spends: `sns_rpc_credits_total`, and for the configured endpoint today's
 * counter shared by replicas (overrides are the client's server, not the operator's budget).
 * With a budget, calls reserve first ({@link reserve}).
 */
export class CreditMeter {
  private readonly keys: ReturnType<typeof redisKeys> | undefined;
  private readonly now: () => number;
  /** Unwritten spends by UTC day, and by share field. */
  private readonly pending = new Map<string, { total: number; fields: Map<string, number> }>();
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
    this.addPending(day, credits, this.unreservedFields(currentAccount()));
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
    const budgetView = this.opts.budget;
    const budget = budgetView?.creditsPerDay;
    const { redis } = this.opts;
    if (!budgetView || budget === undefined || !redis || !this.keys || credits <= 0) {
      return undefined;
    }
    const now = this.now();
    const day = utcDay(now);
    const account = currentAccount();
    const caps = shareCaps(budget, budgetView.shares, now);
    const clientFields =
      account.kind === 'client' ? clientShareFields(account.client, budget, budgetView.shares) : [];
    const [added, total, detail] = await creditCommands(redis).snsReserveCredits(
      this.keys.rpcCredits(day),
      this.keys.rpcCreditShares(day),
      this.floorOf(day),
      BUDGET_COUNTER_TTL_MS,
      budget,
      credits,
      account.kind === 'client' ? 'c' : 'p',
      caps.proactive,
      caps.pool,
      caps.reserve,
      account.kind === 'client' && account.reserve ? '1' : '0',
      ...clientFields.flatMap((f) => [f.field, f.cap]),
    );
    budgetView.observe(day, Number(total));
    if (added !== 1) {
      const kind: RefusalKind = detail === 'client' || detail === 'proactive' ? detail : 'budget';
      throw new CreditBudgetRefusal(method, credits, Number(total), budget, kind);
    }
    return { day, credits, fields: detail === '' ? [] : detail.split(' ') };
  }

  /** Gives back an unspent reservation, to the counter and to the fields it was charged to. */
  release(reservation: Reservation | undefined): void {
    if (!reservation || !this.opts.redis || !this.keys) return;
    const { day, credits, fields } = reservation;
    creditCommands(this.opts.redis)
      .snsAddCredits(
        this.keys.rpcCredits(day),
        this.keys.rpcCreditShares(day),
        this.floorOf(day),
        BUDGET_COUNTER_TTL_MS,
        -credits,
        ...fields.flatMap((field) => [field, -credits]),
      )
      .catch((err: unknown) => this.warn(err));
  }

  /** The spend of `day` known to the budget's view ({@link CreditBudget.floorOf}); 0 without one. */
  private floorOf(day: string): number {
    return this.opts.budget?.floorOf(day) ?? 0;
  }

  /**
   * The share fields an unreserved spend of `account` goes to (the websocket's, or any spend
   * without a budget): the proactive share, or the client's own fields and the pool.
   */
  private unreservedFields(account: CreditAccount): string[] {
    if (account.kind === 'proactive') return [SHARE_FIELD.proactive];
    return [...clientFields(account.client), SHARE_FIELD.pool];
  }

  private addPending(
    day: string,
    credits: number,
    fields: Iterable<[string, number]> | readonly string[],
  ): void {
    let pending = this.pending.get(day);
    if (!pending) this.pending.set(day, (pending = { total: 0, fields: new Map() }));
    pending.total += credits;
    for (const item of fields) {
      const [field, added] = typeof item === 'string' ? [item, credits] : item;
      pending.fields.set(field, (pending.fields.get(field) ?? 0) + added);
    }
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
    for (const [day, { total: credits, fields }] of days) {
      try {
        const total = await creditCommands(redis).snsAddCredits(
          this.keys.rpcCredits(day),
          this.keys.rpcCreditShares(day),
          this.floorOf(day),
          BUDGET_COUNTER_TTL_MS,
          credits,
          ...[...fields].flat(),
        );
        this.opts.budget?.observe(day, Number(total));
      } catch (err) {
        // Kept for the next write: late, never lost while the process lives.
        this.addPending(day, credits, fields);
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

function creditCommands(redis: RedisClient): CreditCommands {
  const commands = redis as unknown as Partial<CreditCommands>;
  if (!commands.snsReserveCredits) {
    redis.defineCommand('snsReserveCredits', { numberOfKeys: 2, lua: RESERVE });
  }
  if (!commands.snsAddCredits) {
    redis.defineCommand('snsAddCredits', { numberOfKeys: 2, lua: ADD });
  }
  return redis as unknown as CreditCommands;
}
