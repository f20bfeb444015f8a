import type { Queue } from 'bullmq';
import type { FastifyBaseLogger } from 'fastify';
import { LRUCache } from 'lru-cache';
import type {
  CacheEntry,
  EntryAccounts,
  SubdomainCache,
} from '../../core/cache/subdomain-cache.js';
import { InternalError, ShuttingDownError } from '../../core/errors.js';
import { REFRESH_EVENT_LOSS, type Metrics } from '../../core/metrics.js';
import type { RefreshListener } from '../../core/queue/refresh-events.js';
import type { RefreshJobData } from '../../core/queue/refresh-queue.js';
import type { CreditBudget } from '../../core/rpc/budget.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { HotParentCounter } from '../../core/cache/hot-parents.js';
import {
  awaitsHeal,
  type FollowStatus,
  type FollowStatusReader,
} from '../../core/cache/follow-status.js';
import { InProcessCopy } from './in-process-copy.js';
import type { ParentTouches } from './parent-touches.js';
import { budgetSpent } from './refresh-charge.js';
import { RefreshFlights, type EntryRead } from './refresh-flights.js';
import { RegistryCopy } from './registry-copy.js';
import type { RegistryAnswers, RegistryRead, RegistrySource } from './registry-source.js';

/** `HIT` fresh from cache, `STALE` served while a refresh runs, `MISS` waited for a refresh. */
export type CacheState = 'HIT' | 'STALE' | 'MISS';
/**
 * A lookup's answer; `accounts` and `rowAt` when it came from the registry index (`/details`
 * renders them, no second read).
 */
export type LookupResult = {
  entry: CacheEntry;
  state: CacheState;
  accounts?: EntryAccounts;
  /** Row `i` of `/details`, in answer order ({@link RegistryRead.rowAt}). */
  rowAt?: RegistryRead['rowAt'];
};

/** An answer of the registry index, its accounts read through (only `/details` builds them). */
const registryResult = (
  entry: CacheEntry,
  state: CacheState,
  read: Pick<RegistryRead, 'accounts' | 'rowAt'>,
): LookupResult => ({
  entry,
  state,
  get accounts() {
    return read.accounts;
  },
  rowAt: read.rowAt,
});

/**
 * Who a lookup is for: the client it is counted as for the hot-parent ranking, and the charge of
 * its new refreshes.
 */
export type Requester = {
  /**
   * The cold-miss limit's key of the request (`req.client`,
   * src/api/http/plugins/client-identity.ts).
   */
  readonly client: string;
  /**
   * Called only when this request would start a new refresh (a cold miss or a stale hit that joins
   * no job); throws to refuse it, e.g. the per-client limit's RateLimitedError. Once per request.
   */
  readonly charge: () => Promise<void>;
};

/** How a lookup's answer is used. */
export type LookupOptions = {
  /**
   * The answer renders its labels only (`/subdomains`): a cold miss may then be answered from its
   * scan before the write is done (docs/design.md, "Early answers"). `/details`, which renders
   * the entry's accounts too, waits for the entry.
   */
  readonly labelsOnly?: boolean;
};

export type SubdomainLookupDeps = {
  cache: SubdomainCache;
  /** Where refreshes are queued: the configured endpoint's queue, and the overrides' own. */
  queues: { readonly default: Queue<RefreshJobData>; readonly override: Queue<RefreshJobData> };
  listener: RefreshListener;
  metrics: Metrics;
  logger: FastifyBaseLogger;
  /** How long a miss waits for its refresh (`SUBDOMAINS_WAIT_MS`). */
  waitMs: number;
  /** Cold misses shed with 503 past this many waiting jobs (`QUEUE_MAX_WAITING`). */
  maxWaiting: number;
  /** Counts clients per parent so the worker keeps hot parents fresh; off when absent. */
  hotParents?: HotParentCounter;
  /** Bytes of labels kept in the process-local copy of fresh entries (0: none). */
  localCacheBytes?: number;
  /** The endpoint whose fresh entries are kept in process: the default one (none when absent). */
  localEndpointId?: string;
  /**
   * The configured endpoint's daily credit budget (docs/design.md, "Budget"): stretched, a stale
   * entry's refresh waits for the stretched window; exhausted, stale entries are served with no
   * refresh and cold misses refused (503). Overrides are never held to it.
   */
  budget?: CreditBudget;
  /**
   * How the worker follows the chain: the configured endpoint's entries are fresh past the window
   * while it is followed (docs/design.md, "Freshness"). Window only when absent.
   */
  follow?: FollowStatusReader;
  /**
   * Reads how many "entry written" events the workers published (`<prefix>:refresh-events-sent`):
   * the in-process copy drops itself when fewer came. None: the copy trusts the events alone.
   */
  eventsSent?: () => Promise<number>;
  /** Notes uses of the configured endpoint's entries (sliding expiry); none when absent. */
  touches?: ParentTouches;
  /**
   * The registry index (`SUBDOMAIN_INDEX=registry`): while it serves, and for a window while the
   * stream heals a gap, every parent of the configured endpoint is answered from it, no refresh,
   * no charge (docs/design.md, "The registry index"). Absent: per-parent entries only.
   */
  registry?: RegistrySource;
};

/**
 * The API side of the subdomain cache (docs/design.md, "The subdomain cache"): fresh entries are
 * hits, stale ones are served while one refresh is queued, misses queue one and wait for the
 * worker's event (one wait per key in process, one job across processes). Every refresh a request
 * starts is charged to its client ({@link Requester.charge}). The API never calls the RPC.
 */
export class SubdomainLookup {
  private readonly recentlyQueued = new LRUCache<string, true>({ max: 10_000, ttl: 1_000 });
  /** The refreshes this process starts and waits for (./refresh-flights.ts). */
  private readonly refreshes: RefreshFlights;
  /** Fresh entries of the default endpoint kept in process; none when not configured. */
  private readonly local: InProcessCopy | undefined;
  /** The registry index's answers kept in process, beside {@link local} and by its events. */
  private readonly registryCopy: RegistryCopy | undefined;

  constructor(private readonly deps: SubdomainLookupDeps) {
    this.refreshes = new RefreshFlights({
      ...deps,
      read: (key) => this.read(key),
      readEarly: (endpoint, parent) => this.readEarly(endpoint, parent),
    });
    const maxBytes = deps.localCacheBytes ?? 0;
    if (maxBytes > 0 && deps.localEndpointId !== undefined) {
      const follow = deps.follow;
      this.local = new InProcessCopy({
        cache: deps.cache,
        listener: deps.listener,
        endpointId: deps.localEndpointId,
        maxBytes,
        status: follow ? () => follow.current() : undefined,
        sent: deps.eventsSent,
        onLost: () => deps.metrics.refreshEventsLost.inc({ stage: REFRESH_EVENT_LOSS.receive }),
        onError: (err) => deps.logger.warn({ err }, 'could not read the count of refresh events'),
      });
      const { registry } = deps;
      const local = this.local;
      if (registry) {
        this.registryCopy = new RegistryCopy({
          listener: deps.listener,
          maxBytes,
          generation: () => local.generation,
          stateVersion: () => registry.stateVersion,
          status: () => follow?.current() ?? null,
        });
        local.whenDropped(() => this.registryCopy?.clear());
      }
    }
  }

  /** The deployment's one clock (the cache's), Unix ms: what every freshness here is decided on. */
  now(): number {
    return this.deps.cache.now();
  }

  /**
   * The answer from this process's copy of fresh entries, synchronously, or `undefined` when the
   * copy has none (or events are not flowing, or `endpoint` is not the default one): then
   * {@link lookup} decides. Counted as a hit like any other. Lets the route answer a warm parent
   * without a promise.
   *
   * @param parent a normalized single label.
   * @param client the request's {@link Requester.client}.
   * @param now the clock, in milliseconds since the epoch.
   */
  peek(
    parent: string,
    endpoint: RpcEndpoint,
    client: string,
    now = this.now(),
  ): LookupResult | undefined {
    const from = this.fromRegistry(endpoint);
    if (from === 'serving') return this.registryKept(parent, endpoint, now);
    // Answers through a heal are dated, never kept: each is read by `lookup`.
    if (from === 'healing') return undefined;
    const entry = this.local?.peek(parent, endpoint, now);
    if (!entry) return undefined;
    this.deps.hotParents?.hit(parent, client, now);
    this.deps.touches?.used(endpoint.id, parent, now);
    this.deps.metrics.countCacheLookup('hit');
    return { entry, state: 'HIT' };
  }

  /**
   * @param parent a normalized single label.
   * @param requester who asks: counted for the hot-parent ranking once answered, and charged for a
   *   new refresh (a stale hit over its limit is still answered, with no refresh queued).
   * @param options how the answer is used ({@link LookupOptions}).
   * @throws RpcUnavailableError when the refresh failed on the RPC side or took longer than the wait.
   * @throws OverloadedError when the queue is full and this miss would start a new refresh.
   * @throws BudgetExhaustedError (503) for a miss of the configured endpoint once the day's
   *   credit budget is spent, or whose refresh the worker refused for it.
   * @throws RateLimitedError (from `requester.charge`) when this client started too many.
   * @throws UnavailableError (503) when Redis dropped while the request waited on its refresh.
   * @throws InternalError for other Redis or worker faults.
   */
  async lookup(
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
    options: LookupOptions = {},
  ): Promise<LookupResult> {
    const from = this.fromRegistry(endpoint);
    if (from) return this.registryAnswer(parent, endpoint, from);
    const kept = this.peek(parent, endpoint, requester.client);
    if (kept) return kept;
    const { cache, metrics } = this.deps;
    const key = cache.keyOf(endpoint, parent);
    const [read, status] = await Promise.all([this.read(key), this.followStatus(endpoint)]);
    const { entry } = read;
    if (entry) {
      this.counted(parent, endpoint, requester);
      const now = this.now();
      if (cache.freshness(entry, now, status) === 'fresh') {
        metrics.countCacheLookup('hit');
        this.local?.remember(parent, endpoint, entry, read.generation);
        return { entry, state: 'HIT' };
      }
      metrics.countCacheLookup('stale');
      // A popular stale key would otherwise run BullMQ's scripts on every request; one try per
      // key per second and process is enough (the job is deduplicated anyway). A try its client's
      // limit refused leaves the next request for the key free to try. Past the budget's soft
      // threshold the refresh waits for the stretched window, and none once it is spent. While
      // the follow stream heals a gap that would vouch for the entry again, none either, for a
      // bounded time: the heal costs the deployment a few reads, a scan per parent asked would
      // cost each of them one, wasted once the heal vouches.
      if (
        !this.recentlyQueued.has(key) &&
        !awaitsHeal(entry, status, now) &&
        this.mayRefreshStale(endpoint, entry)
      ) {
        this.recentlyQueued.set(key, true);
        this.refreshes
          .refreshStale(key, parent, endpoint, requester)
          .then((queued) => {
            if (!queued) this.recentlyQueued.delete(key);
          })
          .catch((err: unknown) =>
            this.deps.logger.warn({ err, parent }, 'could not queue a stale refresh'),
          );
      }
      return { entry, state: 'STALE' };
    }
    metrics.countCacheLookup('miss');
    if (this.refreshes.closingStarted) throw new ShuttingDownError('shutting down', 1);
    if (endpoint.kind === 'default' && this.deps.budget?.state() === 'exhausted') {
      // Charged like the refresh it would have started: a client asking on past its limit gets
      // 429s, not a 503 per request.
      await requester.charge();
      throw budgetSpent(parent, this.deps.budget);
    }
    const early = options.labelsOnly === true;
    const fetched = await this.refreshes.wait(key, parent, endpoint, requester, early);
    this.counted(parent, endpoint, requester);
    if (!fetched.early) this.local?.remember(parent, endpoint, fetched.entry, fetched.generation);
    return { entry: fetched.entry, state: 'MISS' };
  }

  /** Whether, and how, `endpoint`'s lookups are answered from the registry index now. */
  private fromRegistry(endpoint: RpcEndpoint): RegistryAnswers | undefined {
    return endpoint.kind === 'default' ? this.deps.registry?.answers() : undefined;
  }

  /**
   * `parent`'s answer from the registry index: one Redis read, whatever the parent (a made-up one
   * lists nothing, as `findSubdomains`). A hit, save while a Delete waits for its read or the
   * stream heals a gap (`from` `healing`): the answer is then dated when that Delete was reported
   * or the stream last vouched ({@link RegistrySource.read}), a hit within the window of it
   * and stale past it, never refreshed (the worker's read of the Delete, or the heal, settles it).
   * @throws InternalError when Redis fails.
   */
  private async registryAnswer(
    parent: string,
    endpoint: RpcEndpoint,
    from: RegistryAnswers,
  ): Promise<LookupResult> {
    const kept = from === 'serving' ? this.registryKept(parent, endpoint, this.now()) : undefined;
    if (kept) return kept;
    const registry = this.deps.registry as RegistrySource;
    const start = this.registryCopy?.begin();
    let read: RegistryRead;
    try {
      read = await registry.read(parent);
    } catch (err) {
      throw new InternalError('registry index read failed', { cause: err });
    }
    const state = this.deps.cache.freshness(read.entry, this.now()) === 'fresh' ? 'HIT' : 'STALE';
    this.deps.metrics.countCacheLookup(state === 'HIT' ? 'hit' : 'stale');
    if (start && state === 'HIT') this.registryCopy?.remember(parent, read, start);
    return registryResult(read.entry, state, read);
  }

  /**
   * `parent`'s answer from the registry index's copy in process, while events flow (the
   * per-parent copy's rule: the subscription up, the events' count checked), or `undefined`.
   */
  private registryKept(
    parent: string,
    endpoint: RpcEndpoint,
    now: number,
  ): LookupResult | undefined {
    if (!this.registryCopy || !this.local?.flowing(endpoint)) return undefined;
    const kept = this.registryCopy.get(parent, now);
    if (!kept) return undefined;
    this.deps.metrics.countCacheLookup('hit');
    return registryResult(kept.entry, 'HIT', kept.read);
  }

  /** Whether the daily credit budget lets a stale entry of `endpoint` be refreshed now. */
  private mayRefreshStale(endpoint: RpcEndpoint, entry: CacheEntry): boolean {
    const { budget } = this.deps;
    return endpoint.kind !== 'default' || !budget || budget.staleRefreshAllowed(entry.fetchedAt);
  }

  /**
   * Counts an answered request for the hot-parent ranking, and notes the entry's use (default
   * endpoint only).
   */
  private counted(parent: string, endpoint: RpcEndpoint, requester: Requester): void {
    if (endpoint.kind !== 'default') return;
    this.deps.hotParents?.hit(parent, requester.client);
    this.deps.touches?.used(endpoint.id, parent);
  }

  /**
   * The follow status that decides the freshness of `endpoint`'s entries: the configured
   * endpoint's only (an override's entries are never patched). Never throws: a failed read
   * leaves the window alone to decide.
   */
  private async followStatus(endpoint: RpcEndpoint): Promise<FollowStatus | null> {
    if (endpoint.kind !== 'default' || !this.deps.follow) return null;
    return this.deps.follow.read();
  }

  /**
   * Shutdown has begun: no new refresh is waited for, and requests already waiting get `graceMs`
   * to see theirs finish, then answer 503 `Shutting down` instead of outliving the process's
   * shutdown bound (a wait can last `SUBDOMAINS_WAIT_MS`). Hits are still served while the server
   * drains.
   *
   * @param graceMs milliseconds waiting requests may still wait.
   */
  close(graceMs = 0): void {
    this.refreshes.close(graceMs);
  }

  /**
   * Reads the early answer of (endpoint, parent) as an entry read (`early`), undefined when there
   * is none. @throws what Redis throws.
   */
  private async readEarly(
    endpoint: RpcEndpoint,
    parent: string,
  ): Promise<EntryRead<CacheEntry> | undefined> {
    const generation = this.local?.generation ?? 0;
    const answer = await this.deps.cache.earlyAnswer(endpoint.id, parent);
    return answer ? { entry: answer, generation, early: true } : undefined;
  }

  /** Reads the entry, with the in-process copy's generation of when the read began. */
  private async read(key: string): Promise<EntryRead> {
    const generation = this.local?.generation ?? 0;
    try {
      return { entry: await this.deps.cache.get(key), generation };
    } catch (err) {
      throw new InternalError('cache read failed', { cause: err });
    }
  }
}
