import { databaseOf, type RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/**
 * What the worker tells waiting API requests after each attempt. The cache entry is the source of
 * truth; an event only says "look now" (`ok`) or "this attempt failed" and why.
 */
export type RefreshEvent = { endpointId: string; parent: string } & (
  { ok: true } | { ok: false; reason: FailureReason }
);

/**
 * Why an attempt failed: the RPC, a fault of ours, the listener's connection, or the daily credit
 * budget (`budget`: the refresh was not made, docs/design.md, "Budget").
 */
type FailureReason = 'rpc' | 'internal' | 'disconnected' | 'budget';
const FAILURE_REASONS: ReadonlySet<string> = new Set<FailureReason>([
  'rpc',
  'internal',
  'disconnected',
  'budget',
]);

/**
 * The waiters' key of an (endpoint, parent) pair, for the refresh listener's waiters and the live
 * updates' topics alike; a parent is a label, never holding a space.
 */
export const waitKey = (endpointId: string, parent: string) => `${endpointId} ${parent}`;

/**
 * The pub/sub channel of refresh events of the deployment that `redis` (a connection of it) and
 * `prefix` make: it names the connection's database, since channels are global to a server.
 */
export const refreshChannel = (redis: RedisClient, prefix: string) =>
  redisKeys(prefix).refreshEvents(databaseOf(redis));

/**
 * Publishes one event on the channel of the deployment `redis` and `prefix` make; at-most-once,
 * like any Redis pub/sub message. The message also names that space (`prefix`, `db`), which a
 * listener checks on receipt. During a rolling upgrade API processes of the release before listen
 * on the former channel (one per prefix, whatever the database) and read only the entry's cache
 * `key` (they throw on an event without it): the event goes there too, with it. Drop that second
 * publish once no such API can be running.
 */
export async function publishRefreshEvent(
  redis: RedisClient,
  prefix: string,
  event: RefreshEvent,
): Promise<void> {
  const keys = redisKeys(prefix);
  const db = databaseOf(redis);
  const key = keys.subdomainEntry(event.endpointId, event.parent);
  await Promise.all([
    redis.publish(keys.refreshEvents(db), JSON.stringify({ ...event, prefix, db })),
    redis.publish(keys.legacyRefreshEvents, JSON.stringify({ ...event, key })),
  ]);
}

/**
 * A refresh event as received, if it is one of the deployment `prefix` on database `db`; null for
 * anything else (not JSON, another shape, another deployment's), which the listener ignores. A
 * failure of a reason this release does not know counts as `internal`.
 */
export function parseRefreshEvent(
  message: string,
  prefix: string,
  db: number,
): RefreshEvent | null {
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
  if (m.ok === true) return { endpointId, parent, ok: true };
  if (m.ok !== false) return null;
  const reason =
    typeof m.reason === 'string' && FAILURE_REASONS.has(m.reason)
      ? (m.reason as FailureReason)
      : 'internal';
  return { endpointId, parent, ok: false, reason };
}

type Waiter = (event: RefreshEvent | null) => void;

/**
 * One shared subscription per process to the refresh events, not `job.waitUntilFinished` per
 * request (docs/design.md, "The refresh queue"). Requests register a waiter per (endpoint,
 * parent); the watcher's patches publish the same events as refreshes.
 */
export class RefreshListener {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly channel: string;
  private readonly db: number;
  private readonly refreshedHandlers: Array<(endpointId: string, parent: string) => void> = [];
  private readonly lostHandlers: Array<() => void> = [];
  private subscribed = false;
  private started = false;

  /**
   * @param subscriber a connection of its own, to the deployment's database; it is put in
   *   subscriber mode.
   * @param prefix the deployment's key prefix (`QUEUE_PREFIX`).
   */
  constructor(
    private readonly subscriber: RedisClient,
    private readonly prefix: string,
  ) {
    this.db = databaseOf(subscriber);
    this.channel = redisKeys(prefix).refreshEvents(this.db);
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.dispatch(message);
    });
    // Pub/sub is at-most-once: once the subscription's connection drops, the event a request
    // waits for may be lost, and while Redis is down no refresh can finish. Fail the waiters at
    // once (their requests answer 500, as for any Redis fault) instead of leaving them to wait
    // out SUBDOMAINS_WAIT_MS; the refresh itself stays queued and fills the cache later.
    subscriber.on('close', () => {
      this.subscribed = false;
      for (const handler of this.lostHandlers) handler();
      this.failAll();
    });
    // ioredis subscribes again by itself once the connection is ready after a reconnect.
    subscriber.on('ready', () => {
      if (this.started) this.subscribed = true;
    });
  }

  /** Subscribes; ioredis subscribes again by itself after a reconnect. */
  async start(): Promise<void> {
    this.started = true;
    await this.subscriber.subscribe(this.channel);
    this.subscribed = true;
  }

  /**
   * True while every event reaches this process: subscribed, and no drop since. A process-local
   * copy of cache entries is coherent only then (see SubdomainLookup).
   */
  get live(): boolean {
    return this.subscribed;
  }

  /** Calls `handler` with the endpoint id and parent of every entry written, by any worker. */
  onRefreshed(handler: (endpointId: string, parent: string) => void): void {
    this.refreshedHandlers.push(handler);
  }

  /** Calls `handler` when the subscription drops: events may be lost from then on. */
  onLost(handler: () => void): void {
    this.lostHandlers.push(handler);
  }

  /**
   * Waits for the next event about the entry of (endpoint, parent).
   *
   * @param timeoutMs after this many milliseconds `event` resolves with null.
   * @returns `event`: the event, or null on time-out, on `cancel()` or when the listener closes.
   */
  next(
    endpointId: string,
    parent: string,
    timeoutMs: number,
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
      const timer = setTimeout(() => waiter(null), timeoutMs);
      set.add(waiter);
      cancel = () => waiter(null);
    });
    return { event, cancel };
  }

  /** Releases every waiter with null and unsubscribes. */
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
    // Only our own: another deployment's event read as ours would send a waiter to an entry that
    // is not there (an answer of 500).
    const event = parseRefreshEvent(message, this.prefix, this.db);
    if (!event) return;
    if (event.ok) {
      for (const handler of this.refreshedHandlers) handler(event.endpointId, event.parent);
    }
    const set = this.waiters.get(waitKey(event.endpointId, event.parent));
    if (set) for (const w of [...set]) w(event);
  }
}
