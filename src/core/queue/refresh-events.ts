import { databaseOf, type RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/** Sent to waiting requests after each attempt: "look now" or "failed, and why". */
export type RefreshEvent = { endpointId: string; parent: string } & (
  { ok: true } | { ok: false; reason: FailureReason }
);

/**
 * Why an attempt failed; `budget`: not made, the day or its pools spent; `share`: not made, the
 * client that started it spent its share of the day (docs/design.md, "Budget").
 */
type FailureReason = 'rpc' | 'internal' | 'disconnected' | 'budget' | 'share';
const FAILURE_REASONS: ReadonlySet<string> = new Set<FailureReason>([
  'rpc',
  'internal',
  'disconnected',
  'budget',
  'share',
]);

/**
 * A large scan's answer is listed before its write ({@link publishEarlyAnswer}): "it can be read
 * now", not "the entry is written". It carries no `ok`, so a listener that does not know it
 * ignores it.
 */
export type EarlyEvent = { endpointId: string; parent: string; early: true };

/** Waiters' and live topics' key of (endpoint, parent); a parent label never holds a space. */
export const waitKey = (endpointId: string, parent: string) => `${endpointId} ${parent}`;

/** The refresh-event channel; it names the database, since channels are server-wide. */
export const refreshChannel = (redis: RedisClient, prefix: string) =>
  redisKeys(prefix).refreshEvents(databaseOf(redis));

/**
 * Publishes an event (at most once, as pub/sub is), naming `prefix` and `db` for the listener to
 * check. An entry written (`ok`) is first counted in `<prefix>:refresh-events-sent`, in the same
 * round trip: a PUBLISH refused or lost after the count leaves the count ahead of what listeners
 * received, which each API process notices ({@link RefreshListener.received}).
 *
 * @throws what Redis throws for any of the commands.
 */
export async function publishRefreshEvent(
  redis: RedisClient,
  prefix: string,
  event: RefreshEvent,
): Promise<void> {
  const db = databaseOf(redis);
  const keys = redisKeys(prefix);
  await Promise.all([
    ...(event.ok ? [redis.incr(keys.refreshEventsSent)] : []),
    redis.publish(keys.refreshEvents(db), JSON.stringify({ ...event, prefix, db })),
  ]);
}

/**
 * Tells the requests waiting on (endpoint, parent) that its scan's early answer is listed
 * (`SubdomainCache.putEarlyAnswer`). Not counted in `<prefix>:refresh-events-sent`: no entry
 * changed, and a listener that misses it still gets the entry's own event.
 *
 * @throws what Redis throws.
 */
export async function publishEarlyAnswer(
  redis: RedisClient,
  prefix: string,
  endpointId: string,
  parent: string,
): Promise<void> {
  const db = databaseOf(redis);
  const event: EarlyEvent = { endpointId, parent, early: true };
  await redis.publish(
    redisKeys(prefix).refreshEvents(db),
    JSON.stringify({ ...event, prefix, db }),
  );
}

/** How many times a failed publish of an entry's change is tried again, and the first wait. */
const PUBLISH_RETRIES = 4;
const PUBLISH_FIRST_WAIT_MS = 100;

/**
 * {@link publishRefreshEvent} of an entry's change, tried again with back-off (0.1, 0.2, 0.4,
 * 0.8 s) when Redis refuses it; a publish still failing is reported to `failed`. Never throws:
 * for the worker's paths that must go on (the follower's patches), where a lost event would keep
 * an API process's copy wrong; the count published before it lets the API notice what is lost.
 */
export async function publishChange(
  redis: RedisClient,
  prefix: string,
  event: RefreshEvent,
  failed: (err: unknown, attempt: number, final: boolean) => void,
): Promise<boolean> {
  for (let attempt = 1, wait = PUBLISH_FIRST_WAIT_MS; ; attempt++, wait *= 2) {
    try {
      await publishRefreshEvent(redis, prefix, event);
      return true;
    } catch (err) {
      const final = attempt > PUBLISH_RETRIES;
      failed(err, attempt, final);
      if (final) return false;
      await new Promise((resolve) => setTimeout(resolve, wait).unref());
    }
  }
}

/**
 * An event of this deployment (`prefix`, `db`), or null for anything else; an unknown failure
 * reason counts as `internal`.
 */
export function parseRefreshEvent(
  message: string,
  prefix: string,
  db: number,
): RefreshEvent | EarlyEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const m = value as Record<string, unknown>;
  if (m.prefix !== prefix || m.db !== db) return null;
  if (typeof m.endpointId !== 'string' || typeof m.parent !== 'string') return null;
  const { endpointId, parent } = m;
  if (m.early === true) return { endpointId, parent, early: true };
  if (m.ok === true) return { endpointId, parent, ok: true };
  if (m.ok !== false) return null;
  const reason =
    typeof m.reason === 'string' && FAILURE_REASONS.has(m.reason)
      ? (m.reason as FailureReason)
      : 'internal';
  return { endpointId, parent, ok: false, reason };
}

type Waiter = ((event: RefreshEvent | null) => void) & {
  /** Called on each early event of the waiter's key; the waiter goes on waiting. */
  early?: () => void;
};

/**
 * One subscription per process, not `job.waitUntilFinished` per request (docs/design.md, "The
 * refresh queue"); requests register a waiter per (endpoint, parent).
 */
export class RefreshListener {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly channel: string;
  private readonly db: number;
  private readonly refreshedHandlers: Array<(endpointId: string, parent: string) => void> = [];
  private readonly lostHandlers: Array<() => void> = [];
  private subscribed = false;
  private started = false;
  private receivedOk = 0;

  /** @param subscriber a connection of its own (put in subscriber mode). */
  constructor(
    private readonly subscriber: RedisClient,
    private readonly prefix: string,
  ) {
    this.db = databaseOf(subscriber);
    this.channel = redisKeys(prefix).refreshEvents(this.db);
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.dispatch(message);
    });
    // Pub/sub is at most once: after a drop the awaited event may be lost, so fail waiters now
    // (500) rather than after SUBDOMAINS_WAIT_MS; the queued refresh still fills the cache.
    subscriber.on('close', () => {
      this.subscribed = false;
      for (const handler of this.lostHandlers) handler();
      this.failAll();
    });
    subscriber.on('ready', () => {
      if (this.started) this.subscribed = true;
    });
  }

  /** Subscribes (ioredis resubscribes after a reconnect). */
  async start(): Promise<void> {
    this.started = true;
    await this.subscriber.subscribe(this.channel);
    this.subscribed = true;
  }

  /** No drop since subscribing: only then is a process-local copy of entries coherent. */
  get live(): boolean {
    return this.subscribed;
  }

  /**
   * How many "entry written" events this process received since it started: compared with
   * `<prefix>:refresh-events-sent`, it tells whether one was lost.
   */
  get received(): number {
    return this.receivedOk;
  }

  /** `handler` runs for every entry written, by any worker. */
  onRefreshed(handler: (endpointId: string, parent: string) => void): void {
    this.refreshedHandlers.push(handler);
  }

  /** `handler` runs when the subscription drops. */
  onLost(handler: () => void): void {
    this.lostHandlers.push(handler);
  }

  /**
   * The next event about (endpoint, parent): null on time-out (`timeoutMs`), `cancel()` or close.
   * Early events ({@link EarlyEvent}) do not end the wait: each calls `onEarly`, when given.
   */
  next(
    endpointId: string,
    parent: string,
    timeoutMs: number,
    onEarly?: () => void,
  ): { event: Promise<RefreshEvent | null>; cancel: () => void } {
    const key = waitKey(endpointId, parent);
    let cancel: () => void = () => undefined;
    const event = new Promise<RefreshEvent | null>((resolve) => {
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      const waiter: Waiter = (ev) => {
        clearTimeout(timer);
        set.delete(waiter);
        if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key);
        resolve(ev);
      };
      if (onEarly) waiter.early = onEarly;
      const timer = setTimeout(() => waiter(null), timeoutMs);
      set.add(waiter);
      cancel = () => waiter(null);
    });
    return { event, cancel };
  }

  /** Releases every waiter with null, unsubscribes. */
  async close(): Promise<void> {
    this.subscribed = false;
    for (const set of [...this.waiters.values()]) for (const w of [...set]) w(null);
    if (this.subscriber.status === 'ready')
      await this.subscriber.unsubscribe(this.channel).catch(() => undefined);
  }

  private failAll(): void {
    for (const set of [...this.waiters.values()]) {
      for (const w of [...set])
        w({ endpointId: '', parent: '', ok: false, reason: 'disconnected' });
    }
  }

  private dispatch(message: string): void {
    // Another deployment's event would send a waiter to an entry that is not there (500).
    const event = parseRefreshEvent(message, this.prefix, this.db);
    if (!event) return;
    if ('early' in event) {
      const set = this.waiters.get(waitKey(event.endpointId, event.parent));
      if (set) for (const w of [...set]) w.early?.();
      return;
    }
    if (event.ok) {
      this.receivedOk++;
      for (const handler of this.refreshedHandlers) handler(event.endpointId, event.parent);
    }
    const set = this.waiters.get(waitKey(event.endpointId, event.parent));
    if (set) for (const w of [...set]) w(event);
  }
}
