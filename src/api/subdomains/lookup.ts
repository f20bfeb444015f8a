import type { Queue } from 'bullmq';
import type { FastifyBaseLogger } from 'fastify';
import { LRUCache } from 'lru-cache';
import type {
  CacheEntry,
  EntryAccounts,
  SubdomainCache,
} from '../../core/cache/subdomain-cache.js';
import {
  BudgetExhaustedError,
  GatewayError,
  InternalError,
  OverloadedError,
  RateLimitedError,
  RpcUnavailableError,
  REDIS_RETRY_AFTER_S,
  ShuttingDownError,
  UnavailableError,
} from '../../core/errors.js';
import { REFRESH_EVENT_LOSS, type Metrics } from '../../core/metrics.js';
import type { RefreshListener } from '../../core/queue/refresh-events.js';
import {
  addRefreshJob,
  refreshDedupId,
  waitingRefreshes,
  type RefreshJobData,
} from '../../core/queue/refresh-queue.js';
import type { CreditBudget } from '../../core/rpc/budget.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { HotParentCounter } from '../../core/cache/hot-parents.js';
import type { FollowStatus, FollowStatusReader } from '../../core/cache/follow-status.js';
import { InProcessCopy } from './in-process-copy.js';
import type { ParentTouches } from './parent-touches.js';
import type { RegistrySource } from './registry-source.js';

/** `HIT` fresh from cache, `STALE` served while a refresh runs, `MISS` waited for a refresh. */
export type CacheState = 'HIT' | 'STALE' | 'MISS';
/**
 * A lookup's answer; `accounts` when it came from the registry index (`/details` renders them, no
 * second read).
 */
export type LookupResult = { entry: CacheEntry; state: CacheState; accounts?: EntryAccounts };

/**
 * Who a lookup is for: the client it is counted as for the hot-parent ranking, and the charge of
 * its new refreshes.
 */
export type Requester = {
  /** The cold-miss limit's key of the request (`clientKey`, src/api/http/client-identity.ts). */
  readonly client: string;
  /**
   * Called only when this request would start a new refresh (a cold miss or a stale hit that joins
   * no job); throws to refuse it, e.g. the per-client limit's RateLimitedError. Once per request.
   */
  readonly charge: () => Promise<void>;
};

/**
 * An entry read from Redis (null: none), and the in-process copy's generation of when the read
 * began ({@link InProcessCopy.generation}).
 */
type EntryRead<E extends CacheEntry | null = CacheEntry | null> = { entry: E; generation: number };

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
   * The registry index (`SUBDOMAIN_INDEX=registry`): while it serves, every parent of the
   * configured endpoint is answered from it, no refresh, no charge (docs/design.md, "The registry
   * index"). Absent: per-parent entries only.
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
  private readonly inflight = new Map<string, Promise<EntryRead<CacheEntry>>>();
  private readonly recentlyQueued = new LRUCache<string, true>({ max: 10_000, ttl: 1_000 });
  /** Aborted by {@link close}: requests waiting for a refresh then answer 503 at once. */
  private readonly closing = new AbortController();
  private closingStarted = false;
  private readonly closed = new Promise<'closed'>((resolve) =>
    this.closing.signal.addEventListener('abort', () => resolve('closed'), { once: true }),
  );
  /** Fresh entries of the default endpoint kept in process; none when not configured. */
  private readonly local: InProcessCopy | undefined;

  constructor(private readonly deps: SubdomainLookupDeps) {
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
    // The index's answers are read from Redis each time: the copy follows refresh events, which
    // the index's changes do not send.
    if (this.fromRegistry(endpoint)) return undefined;
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
   * @throws RpcUnavailableError when the refresh failed on the RPC side or took longer than the wait.
   * @throws OverloadedError when the queue is full and this miss would start a new refresh.
   * @throws BudgetExhaustedError (503) for a miss of the configured endpoint once the day's
   *   credit budget is spent, or whose refresh the worker refused for it.
   * @throws RateLimitedError (from `requester.charge`) when this client started too many.
   * @throws UnavailableError (503) when Redis dropped while the request waited on its refresh.
   * @throws InternalError for other Redis or worker faults.
   */
  async lookup(parent: string, endpoint: RpcEndpoint, requester: Requester): Promise<LookupResult> {
    if (this.fromRegistry(endpoint)) return this.registryAnswer(parent);
    const kept = this.peek(parent, endpoint, requester.client);
    if (kept) return kept;
    const { cache, metrics } = this.deps;
    const key = cache.keyOf(endpoint, parent);
    const [read, status] = await Promise.all([this.read(key), this.followStatus(endpoint)]);
    const { entry } = read;
    if (entry) {
      this.counted(parent, endpoint, requester);
      if (cache.freshness(entry, this.now(), status) === 'fresh') {
        metrics.countCacheLookup('hit');
        this.local?.remember(parent, endpoint, entry, read.generation);
        return { entry, state: 'HIT' };
      }
      metrics.countCacheLookup('stale');
      // A popular stale key would otherwise run BullMQ's scripts on every request; one try per
      // key per second and process is enough (the job is deduplicated anyway). A try its client's
      // limit refused leaves the next request for the key free to try. Past the budget's soft
      // threshold the refresh waits for the stretched window, and none once it is spent.
      if (!this.recentlyQueued.has(key) && this.mayRefreshStale(endpoint, entry)) {
        this.recentlyQueued.set(key, true);
        this.refreshStale(key, parent, endpoint, requester).catch((err: unknown) =>
          this.deps.logger.warn({ err, parent }, 'could not queue a stale refresh'),
        );
      }
      return { entry, state: 'STALE' };
    }
    metrics.countCacheLookup('miss');
    if (this.closingStarted) throw new ShuttingDownError('shutting down', 1);
    if (endpoint.kind === 'default' && this.deps.budget?.state() === 'exhausted') {
      // Charged like the refresh it would have started: a client asking on past its limit gets
      // 429s, not a 503 per request.
      await requester.charge();
      throw this.budgetSpent(parent);
    }
    let fetched: EntryRead<CacheEntry>;
    try {
      fetched = await this.flight(key, parent, endpoint, requester);
    } catch (err) {
      // A joiner refused with the starter's 429 tries again with its own charge: the first to
      // resume finds no flight and starts one (no I/O between the flight's end and the resumes),
      // the others join it. Only the starter's own request was over its limit.
      if (!(err instanceof JoinedRefusal)) throw err;
      fetched = await this.flight(key, parent, endpoint, requester).catch((again: unknown) => {
        throw again instanceof JoinedRefusal ? again.refusal : again;
      });
    }
    this.counted(parent, endpoint, requester);
    this.local?.remember(parent, endpoint, fetched.entry, fetched.generation);
    return { entry: fetched.entry, state: 'MISS' };
  }

  /** Whether `endpoint`'s lookups are answered from the registry index now. */
  private fromRegistry(endpoint: RpcEndpoint): boolean {
    return endpoint.kind === 'default' && this.deps.registry?.serving() === 'serving';
  }

  /**
   * `parent`'s answer from the registry index: one Redis read, a hit whatever the parent (a
   * made-up one lists nothing, as `findSubdomains`).
   * @throws InternalError when Redis fails.
   */
  private async registryAnswer(parent: string): Promise<LookupResult> {
    const registry = this.deps.registry as RegistrySource;
    let read: Awaited<ReturnType<RegistrySource['read']>>;
    try {
      read = await registry.read(parent);
    } catch (err) {
      throw new InternalError('registry index read failed', { cause: err });
    }
    this.deps.metrics.countCacheLookup('hit');
    // Read through, so only `/details` builds them.
    return {
      entry: read.entry,
      state: 'HIT',
      get accounts() {
        return read.accounts;
      },
    };
  }

  /**
   * Joins the single flight of `key`, or starts it charged to `requester`. A joiner whose flight
   * failed because the starter's charge was refused gets a {@link JoinedRefusal}, never the 429
   * itself: that refusal was the starter's.
   */
  private async flight(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
  ): Promise<EntryRead<CacheEntry>> {
    const joined = this.inflight.get(key);
    if (joined) {
      try {
        return await joined;
      } catch (err) {
        if (err instanceof RateLimitedError) throw new JoinedRefusal(err);
        throw err;
      }
    }
    const started = this.refreshAndWait(key, parent, endpoint, requester).finally(() =>
      this.inflight.delete(key),
    );
    this.inflight.set(key, started);
    return started;
  }

  /** Whether the daily credit budget lets a stale entry of `endpoint` be refreshed now. */
  private mayRefreshStale(endpoint: RpcEndpoint, entry: CacheEntry): boolean {
    const { budget } = this.deps;
    return endpoint.kind !== 'default' || !budget || budget.staleRefreshAllowed(entry.fetchedAt);
  }

  /** The 503 of a cold miss the day's credit budget cannot pay for. */
  private budgetSpent(parent: string): BudgetExhaustedError {
    return new BudgetExhaustedError(
      `no refresh of ${parent}: the daily credit budget is spent`,
      this.deps.budget?.retryAfterSeconds() ?? 60,
      {
        detail:
          "the gateway's daily RPC credit budget is spent: cached answers are still served, new ones from the next UTC day (Retry-After)",
      },
    );
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
   * The refresh of a stale entry, in the background: nothing when one is queued or running already;
   * else charged to the client, and not queued when the charge refuses it (the stale answer is
   * served anyway).
   */
  private async refreshStale(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
  ): Promise<void> {
    const queue = this.deps.queues[endpoint.kind];
    if ((await queue.getDeduplicationJobId(refreshDedupId(key))) !== null) return;
    try {
      await this.admit(endpoint, requester);
    } catch (err) {
      if (!(err instanceof RateLimitedError)) throw err;
      this.recentlyQueued.delete(key);
      return;
    }
    await addRefreshJob(queue, jobData(key, parent, endpoint, requester.client), 'stale');
  }

  /**
   * Charges a new refresh to `requester`: a unit of its cold-miss limit, then, on the configured
   * endpoint with a budget, a look at its share of the day's credits (docs/design.md, "Budget").
   *
   * @throws RateLimitedError past the limit, or with the share spent (to the next UTC day).
   */
  private async admit(endpoint: RpcEndpoint, requester: Requester): Promise<void> {
    await requester.charge();
    const { budget } = this.deps;
    if (endpoint.kind !== 'default' || budget?.creditsPerDay === undefined) return;
    let spent: boolean;
    try {
      spent = await budget.clientShareSpent(requester.client);
    } catch {
      // The worker's reservation holds the share exactly; a failed look refuses nothing.
      return;
    }
    if (spent) throw this.shareSpent();
  }

  /** The 429 of a client that spent its share of the day's credits. */
  private shareSpent(): RateLimitedError {
    return new RateLimitedError(
      "client spent its share of the day's credits",
      this.deps.budget?.retryAfterSeconds() ?? 60,
      {
        reason: 'client_share',
        detail:
          "this client spent its share of the gateway's daily RPC credits: cached answers are still served, new refreshes from the next UTC day (Retry-After)",
      },
    );
  }

  private async refreshAndWait(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
  ): Promise<EntryRead<CacheEntry>> {
    // Listen before queueing, then look again: a refresh that was already running may have
    // finished between the first read and now, and its event would be lost to us.
    const wait = this.deps.listener.next(endpoint.id, parent, this.deps.waitMs);
    try {
      const raced = await this.read(key);
      if (raced.entry) {
        wait.cancel();
        return raced as EntryRead<CacheEntry>;
      }
      await this.enqueue(key, parent, endpoint, requester);
    } catch (err) {
      wait.cancel();
      throw err;
    }
    const outcome = await Promise.race([wait.event, this.closed]);
    if (outcome === 'closed') {
      wait.cancel();
      throw new ShuttingDownError(`stopped waiting for the refresh of ${parent}`, 1);
    }
    if (outcome === null)
      throw new RpcUnavailableError(`no refresh of ${parent} within ${this.deps.waitMs} ms`);
    if (!outcome.ok) {
      if (outcome.reason === 'rpc')
        throw new RpcUnavailableError(`refresh of ${parent} failed at the RPC`);
      if (outcome.reason === 'budget') throw this.budgetSpent(parent);
      if (outcome.reason === 'share') throw this.shareSpent();
      if (outcome.reason === 'disconnected') {
        throw new UnavailableError(
          `lost the refresh events of ${parent}: Redis connection closed`,
          REDIS_RETRY_AFTER_S,
        );
      }
      throw new InternalError(`refresh of ${parent} failed in the worker`);
    }
    const read = await this.read(key);
    if (!read.entry) {
      throw new InternalError(`refresh of ${parent} reported done but wrote no entry`);
    }
    return read as EntryRead<CacheEntry>;
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
    this.closingStarted = true;
    if (graceMs <= 0) this.closing.abort();
    else setTimeout(() => this.closing.abort(), graceMs).unref();
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

  /**
   * Queues the refresh of a cold miss, deduplicated on the cache key. A request that would start a
   * new job is first checked against the queue bound and charged to its client; one that joins a
   * queued or running job never is.
   */
  private async enqueue(key: string, parent: string, endpoint: RpcEndpoint, requester: Requester) {
    const queue = this.deps.queues[endpoint.kind];
    const dedupId = refreshDedupId(key);
    try {
      // One round trip for both (sent back to back on one connection); the count is wasted
      // when the miss joins a queued job, which is cheaper than a second round trip.
      const [joined, waiting] = await Promise.all([
        queue.getDeduplicationJobId(dedupId),
        waitingRefreshes(queue),
      ]);
      if (joined === null) {
        // Charged first: a shed miss (503) costs its client a unit too.
        await this.admit(endpoint, requester);
        if (waiting >= this.deps.maxWaiting) {
          throw new OverloadedError(`${waiting} refreshes waiting`, 5);
        }
      }
      await addRefreshJob(queue, jobData(key, parent, endpoint, requester.client), 'coldMiss');
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      throw new InternalError('could not queue a refresh', { cause: err });
    }
  }
}

/** A joined flight failed with its starter's refusal (`refusal`), not this request's. */
class JoinedRefusal extends Error {
  constructor(readonly refusal: RateLimitedError) {
    super('the single flight joined was refused to its starter');
  }
}

/**
 * A refresh job's data: the default endpoint travels as its kind, never its URL; the client that
 * starts it is charged its credits.
 */
function jobData(
  cacheKey: string,
  parent: string,
  endpoint: RpcEndpoint,
  client: string,
): RefreshJobData {
  return {
    cacheKey,
    parent,
    endpoint:
      endpoint.kind === 'override' ? { kind: 'override', url: endpoint.url } : { kind: 'default' },
    client,
  };
}
