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
import { LuaScript, replyList, replyNumber, replyString } from '../../src/core/lua-script.js';

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
const currentAccount = (): CreditAccount => accounts.getStore() ?? PROACTIVE;

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
 * Adds a call's credits to today's counter and its account's share fields unless past the budget
 * or a share (after putting back a counter Redis lost: the floor, see the file): added (1 or 0),
 * the total, and the fields charged or why not.
 */
const RESERVE = new LuaScript(new URL('../lua/reserve-credits.lua', import.meta.url), (raw) => {
  const [added, total, detail, totals] = replyList(raw);
  return {
    added: replyNumber(added),
    total: Number(replyString(total)),
    detail: replyString(detail),
    totals: totals === undefined ? '' : replyString(totals),
  };
});

/**
 * Adds credits (negative: given back) to a day's counter and share fields, the floors first: the
 * total, and the fields' new totals joined by spaces.
 */
const ADD = new LuaScript(new URL('../lua/add-credits.lua', import.meta.url), (raw) => {
  const [total, totals] = replyList(raw);
  return { total: Number(replyString(total)), totals: replyString(totals) };
});

/**
 * Share fields whose last total a meter remembers at most (the proactive share, the pool and the
 * reserve among them): a field forgotten is put back at 0 if Redis loses the day, so an attacker
 * with more addresses than this could spend their shares again after a loss, never more than the
 * day's counter (which is put back whole) allows.
 */
const KNOWN_SHARES_MAX = 100_000;
/** The fields no client owns: always remembered, whatever the clients. */
const SHARED_FIELDS: ReadonlySet<string> = new Set(Object.values(SHARE_FIELD));

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
  /**
   * The last total seen of each share field of `knownDay` (the answers of this meter's writes),
   * least recently seen first: what a write puts back when Redis lost the field.
   */
  private knownDay = '';
  private readonly known = new Map<string, number>();

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
    const { added, total, detail, totals } = await RESERVE.run(
      redis,
      [this.keys.rpcCredits(day), this.keys.rpcCreditShares(day)],
      [
        this.floorOf(day),
        BUDGET_COUNTER_TTL_MS,
        budget,
        credits,
        account.kind === 'client' ? 'c' : 'p',
        caps.proactive,
        caps.pool,
        caps.reserve,
        account.kind === 'client' && account.reserve ? '1' : '0',
        this.knownOf(day, SHARE_FIELD.proactive),
        this.knownOf(day, SHARE_FIELD.pool),
        this.knownOf(day, SHARE_FIELD.reserve),
        ...clientFields.flatMap((f) => [f.field, f.cap, this.knownOf(day, f.field)]),
      ],
    );
    budgetView.observe(day, total);
    if (added !== 1) {
      const kind: RefusalKind = detail === 'client' || detail === 'proactive' ? detail : 'budget';
      throw new CreditBudgetRefusal(method, credits, total, budget, kind);
    }
    const fields = detail === '' ? [] : detail.split(' ');
    this.remember(day, fields, totals);
    return { day, credits, fields };
  }

  /** Gives back an unspent reservation, to the counter and to the fields it was charged to. */
  release(reservation: Reservation | undefined): void {
    if (!reservation || !this.opts.redis || !this.keys) return;
    const { day, credits, fields } = reservation;
    ADD.run(
      this.opts.redis,
      [this.keys.rpcCredits(day), this.keys.rpcCreditShares(day)],
      [
        this.floorOf(day),
        BUDGET_COUNTER_TTL_MS,
        -credits,
        ...fields.flatMap((field) => [field, -credits, this.knownOf(day, field)]),
      ],
    )
      .then(({ totals }) => this.remember(day, fields, totals))
      .catch((err: unknown) => this.warn(err));
  }

  /** The last total this meter saw of `day`'s share `field` (0 if none): its floor. */
  private knownOf(day: string, field: string): number {
    return day === this.knownDay ? (this.known.get(field) ?? 0) : 0;
  }

  /**
   * Remembers the totals a write of `day` answered for `fields` (space-separated, in order),
   * forgetting the least recently seen past {@link KNOWN_SHARES_MAX}; a new day forgets the last.
   */
  private remember(day: string, fields: readonly string[], totals: string): void {
    if (day < this.knownDay) return;
    if (day !== this.knownDay) {
      this.knownDay = day;
      this.known.clear();
    }
    const values = totals === '' ? [] : totals.split(' ');
    fields.forEach((field, i) => {
      const total = Number(values[i]);
      if (!Number.isFinite(total)) return;
      this.known.delete(field);
      this.known.set(field, total);
    });
    for (const field of this.known.keys()) {
      if (this.known.size <= KNOWN_SHARES_MAX) break;
      if (!SHARED_FIELDS.has(field)) this.known.delete(field);
    }
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

  /** Adds a spend to the day's pending writes: `credits` to each field, or each pair's own. */
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
        const { total, totals } = await ADD.run(
          redis,
          [this.keys.rpcCredits(day), this.keys.rpcCreditShares(day)],
          [
            this.floorOf(day),
            BUDGET_COUNTER_TTL_MS,
            credits,
            ...[...fields].flatMap(([field, added]) => [field, added, this.knownOf(day, field)]),
          ],
        );
        this.opts.budget?.observe(day, total);
        this.remember(day, [...fields.keys()], totals);
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
