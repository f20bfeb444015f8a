import type { RedisClient } from '../redis.js';
import { redisKeys } from '../redis-keys.js';

/**
 * What the worker tells waiting API requests after each attempt. The cache entry is the source of
 * truth; an event only says "look now" (`ok`) or "this attempt failed" and why.
 */
export type RefreshEvent = { endpointId: string; parent: string } & (
  { ok: true } | { ok: false; reason: 'rpc' | 'internal' | 'disconnected' }
);

/** The waiters' key of an (endpoint, parent) pair; a parent is a label, never holding a space. */
const waitKey = (endpointId: string, parent: string) => `${endpointId} ${parent}`;

/** The pub/sub channel of refresh events for one queue prefix. */
export const refreshChannel = (prefix: string) => redisKeys(prefix).refreshEvents;

/**
 * Publishes one event; at-most-once, like any Redis pub/sub message. It also carries the entry's
 * cache `key`, the only field API processes of the release before read (they throw on an event
 * without it): during a rolling deploy new workers and old APIs share the channel. Drop it once
 * no such API can be running.
 */
export async function publishRefreshEvent(
  redis: RedisClient,
  prefix: string,
  event: RefreshEvent,
): Promise<void> {
  const key = redisKeys(prefix).subdomainEntry(event.endpointId, event.parent);
  await redis.publish(refreshChannel(prefix), JSON.stringify({ ...event, key }));
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
  private readonly refreshedHandlers: Array<(endpointId: string, parent: string) => void> = [];
  private readonly lostHandlers: Array<() => void> = [];
  private subscribed = false;
  private started = false;

  /** @param subscriber a connection of its own; it is put in subscriber mode. */
  constructor(
    private readonly subscriber: RedisClient,
    prefix: string,
  ) {
    this.channel = refreshChannel(prefix);
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
    let event: RefreshEvent;
    try {
      event = JSON.parse(message) as RefreshEvent;
    } catch {
      return;
    }
    if (typeof event.endpointId !== 'string' || typeof event.parent !== 'string') return;
    if (event.ok) {
      for (const handler of this.refreshedHandlers) handler(event.endpointId, event.parent);
    }
    const set = this.waiters.get(waitKey(event.endpointId, event.parent));
    if (set) for (const w of [...set]) w(event);
  }
}
