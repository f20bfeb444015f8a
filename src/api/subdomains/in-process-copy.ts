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
};

/**
 * This process's copy of fresh entries of the default endpoint, so a warm hit costs no Redis round
 * trip; kept coherent by the refresh events (docs/design.md, "The subdomain cache"), never served
 * past its freshness (the window, or the follow status while the chain is followed). Keyed by parent alone, freshness checked on `fetchedAt`: both cheaper on the
 * warm path than the cache key and lru-cache's TTL (BENCHMARKS.md).
 */
export class InProcessCopy {
  private readonly entries: LRUCache<string, CacheEntry>;
  private events = 0;

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
    });
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
}
