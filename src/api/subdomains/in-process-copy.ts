import { LRUCache } from 'lru-cache';
import type { FollowStatus } from '../../core/cache/follow-status.js';
import type { CacheEntry, SubdomainCache } from '../../core/cache/subdomain-cache.js';
import type { RefreshListener } from '../../core/queue/refresh-events.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';

export type InProcessCopyOptions = {
  /** Decides freshness, on the same clock and window as every other reader. */
  cache: SubdomainCache;
  /** The refresh events every API process already listens to: what keeps the copy coherent. */
  listener: RefreshListener;
  /** The one endpoint whose entries are kept: the default one. */
  endpointId: string;
  /** Bytes of labels kept (`LOCAL_CACHE_BYTES`), counted as label length + 8 per label + 64. */
  maxBytes: number;
  /**
   * The follow status as last read (synchronous; `FollowStatusReader.current`): entries followed
   * on the chain stay fresh past the window. Window only when absent.
   */
  status?: () => FollowStatus | null;
  /**
   * Reads `<prefix>:refresh-events-sent` (0 when absent): how many "entry written" events the
   * workers published. Compared with what the listener received, it tells a lost event (a PUBLISH
   * refused after its count, a message dropped), and the copy is dropped. None: events are trusted.
   */
  sent?: () => Promise<number>;
  /** A loss was found and the copy dropped (counted in `sns_refresh_events_lost_total`). */
  onLost?: () => void;
  /** Where a failed read of the count goes (the copy is dropped then too: nothing is proven). */
  onError?: (err: unknown) => void;
};

/** How often the count of events published is compared with the events received, at most. */
export const SENT_CHECK_MS = 500;

/**
 * This process's copy of fresh entries of the default endpoint, so a warm hit costs no Redis round
 * trip; kept coherent by the refresh events (docs/design.md, "The subdomain cache"), never served
 * past its freshness (the window, or the follow status while the chain is followed). Keyed by parent alone, freshness checked on `fetchedAt`: both cheaper on the
 * warm path than the cache key and lru-cache's TTL (BENCHMARKS.md).
 */
export class InProcessCopy {
  private readonly entries: LRUCache<string, CacheEntry>;
  private events = 0;
  /** Events published and received when the comparison began (undefined: not begun). */
  private base: { sent: number; received: number } | undefined;
  /** The count of events published at the last comparison: all of them must have come by the next. */
  private lastSent: number | undefined;
  private checkedAt = -Infinity;
  private checking = false;
  private readonly dropHooks: Array<() => void> = [];

  constructor(private readonly opts: InProcessCopyOptions) {
    this.entries = new LRUCache<string, CacheEntry>({
      maxSize: opts.maxBytes,
      sizeCalculation: (entry) => entry.labels.reduce((n, label) => n + label.length + 8, 64),
    });
    opts.listener.onRefreshed((endpointId, parent) => {
      this.events++;
      if (endpointId === opts.endpointId) this.entries.delete(parent);
    });
    opts.listener.onLost(() => {
      this.events++;
      this.entries.clear();
      this.base = undefined;
      this.lastSent = undefined;
      for (const hook of this.dropHooks) hook();
    });
  }

  /**
   * Calls `hook` whenever this copy is dropped whole (the subscription lost, a lost event found
   * by the count, the count unreadable): a copy kept beside it by the same events (the registry
   * index's answers) drops itself too.
   */
  whenDropped(hook: () => void): void {
    this.dropHooks.push(hook);
  }

  /**
   * Whether events of `endpoint` are flowing and kept (the default endpoint, the subscription
   * up), starting the comparison of the events' count when due ({@link checkSent}): what a copy
   * kept beside this one by the same events calls before serving.
   */
  flowing(endpoint: RpcEndpoint): boolean {
    if (!this.serves(endpoint)) return false;
    this.checkSent();
    return true;
  }

  /**
   * Counts refresh events and subscription losses. A Redis read that began before one of them may
   * return the entry that event replaced (the event comes on another connection): take this
   * before the read and hand it to {@link remember}, which then keeps nothing.
   */
  get generation(): number {
    return this.events;
  }

  /**
   * The kept entry of `parent` while it is fresh, or `undefined`: none kept, not fresh any more
   * (then dropped), events not flowing, or `endpoint` not the default one.
   *
   * @param parent a normalized single label.
   * @param now the clock, in milliseconds since the epoch.
   */
  peek(parent: string, endpoint: RpcEndpoint, now: number): CacheEntry | undefined {
    if (!this.serves(endpoint)) return undefined;
    this.checkSent();
    const entry = this.entries.get(parent);
    if (!entry) return undefined;
    if (this.opts.cache.freshness(entry, now, this.opts.status?.()) !== 'fresh') {
      this.entries.delete(parent);
      return undefined;
    }
    return entry;
  }

  /**
   * Keeps `entry` of `parent` if it is fresh, `endpoint` is the default one, events are flowing,
   * and none came since its read began.
   *
   * @param generation {@link generation} as it was when the read of `entry` began.
   */
  remember(parent: string, endpoint: RpcEndpoint, entry: CacheEntry, generation: number): void {
    if (!this.serves(endpoint) || generation !== this.events) return;
    if (this.opts.cache.freshMsLeft(entry, this.opts.cache.now(), this.opts.status?.()) > 0) {
      this.entries.set(parent, entry);
    }
  }

  private serves(endpoint: RpcEndpoint): boolean {
    return endpoint.id === this.opts.endpointId && this.opts.listener.live;
  }

  /**
   * Compares, at most every {@link SENT_CHECK_MS} and only while the copy is used, the events the
   * workers counted with those received: every event counted at the last comparison (half a
   * second ago at least) must have come by now. One short is one lost: the copy is dropped, so a
   * missed event cannot keep an entry wrong while traffic flows (docs/design.md, "The subdomain
   * cache").
   */
  private checkSent(): void {
    const { sent } = this.opts;
    if (!sent || this.checking || Date.now() - this.checkedAt < SENT_CHECK_MS) return;
    this.checking = true;
    this.checkedAt = Date.now();
    sent()
      .then(
        (count) => this.compare(count, this.opts.listener.received),
        (err: unknown) => {
          this.drop();
          this.opts.onError?.(err);
        },
      )
      .finally(() => (this.checking = false));
  }

  private compare(sent: number, received: number): void {
    const base = this.base;
    // No comparison yet, or the count went back (Redis lost it): start from here.
    if (!base || sent < base.sent) {
      if (base) this.drop();
      this.base = { sent, received };
      this.lastSent = undefined;
      return;
    }
    const got = received - base.received;
    if (this.lastSent !== undefined && got < this.lastSent - base.sent) {
      this.drop();
      this.opts.onLost?.();
      this.base = { sent, received };
      this.lastSent = undefined;
      return;
    }
    // More received than counted (a count refused, its PUBLISH not): start again from here, so
    // the surplus cannot hide a later loss.
    if (got > sent - base.sent) this.base = { sent, received };
    this.lastSent = sent;
  }

  /** Drops every kept entry, and any read under way (its generation is gone). */
  private drop(): void {
    this.events++;
    this.entries.clear();
    for (const hook of this.dropHooks) hook();
  }
}
