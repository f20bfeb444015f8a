import type { CacheEntry } from '../../core/cache/subdomain-cache.js';
import {
  GatewayError,
  InternalError,
  OverloadedError,
  RateLimitedError,
  RpcUnavailableError,
  REDIS_RETRY_AFTER_S,
  ShuttingDownError,
  UnavailableError,
} from '../../core/errors.js';
import {
  addRefreshJob,
  refreshDedupId,
  waitingRefreshes,
  type RefreshJobData,
} from '../../core/queue/refresh-queue.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { Requester, SubdomainLookupDeps } from './lookup.js';
import { budgetSpent, chargeRefresh, shareSpent } from './refresh-charge.js';

/**
 * An entry read from Redis (null: none), and the in-process copy's generation of when the read
 * began (`InProcessCopy.generation`).
 */
export type EntryRead<E extends CacheEntry | null = CacheEntry | null> = {
  entry: E;
  generation: number;
  /**
   * A large scan's answer before its write (docs/design.md, "Early answers"), not the entry:
   * never kept in process.
   */
  early?: true;
};

/** What {@link RefreshFlights} needs: a part of the lookup's deps, and its read. */
export type RefreshFlightsDeps = Pick<
  SubdomainLookupDeps,
  'queues' | 'listener' | 'waitMs' | 'maxWaiting' | 'budget'
> & {
  /** Reads an entry by its cache key (the lookup's read). */
  read(key: string): Promise<EntryRead>;
  /**
   * Reads the early answer of (endpoint, parent) (`SubdomainCache.earlyAnswer`), undefined when
   * there is none.
   */
  readEarly(endpoint: RpcEndpoint, parent: string): Promise<EntryRead<CacheEntry> | undefined>;
};

/**
 * A refresh this process waits on: the scan's early answer (docs/design.md, "Early answers") and
 * the entry it writes.
 */
type Flight = {
  /**
   * The early answer, or undefined when the entry's event (or a failure, or the end of the wait)
   * came first, or the answer could not be read. Never rejects.
   */
  readonly early: Promise<EntryRead<CacheEntry> | undefined>;
  readonly done: Promise<EntryRead<CacheEntry>>;
};

/**
 * The refreshes the API starts (docs/design.md, "The subdomain cache"): a miss queues one and
 * waits for the worker's event, one wait per key in process (single flight) and one job across
 * processes; a stale entry's refresh is queued in the background. Every new refresh is charged
 * to its requester (./refresh-charge.ts); one that joins a job never is.
 */
export class RefreshFlights {
  private readonly inflight = new Map<string, Flight>();
  /** Aborted by {@link close}: requests waiting for a refresh then answer 503 at once. */
  private readonly closing = new AbortController();
  private readonly closed = new Promise<'closed'>((resolve) =>
    this.closing.signal.addEventListener('abort', () => resolve('closed'), { once: true }),
  );
  /** True once {@link close} was called: no new refresh is waited for. */
  closingStarted = false;

  constructor(private readonly deps: RefreshFlightsDeps) {}

  /**
   * The entry of a cold miss, once its refresh wrote it: joins the single flight of `key`, or
   * starts it charged to `requester`. A joiner refused with the starter's 429 tries again with
   * its own charge: the first to resume finds no flight and starts one (no I/O between the
   * flight's end and the resumes), the others join it. Only the starter's own request was over
   * its limit.
   *
   * @param early the request takes the scan's early answer, when it comes before the entry
   *   (`EntryRead.early`): it renders the labels only.
   * @throws as {@link SubdomainLookup.lookup} says of a miss.
   */
  async wait(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
    early = false,
  ): Promise<EntryRead<CacheEntry>> {
    try {
      return await this.flight(key, parent, endpoint, requester, early);
    } catch (err) {
      if (!(err instanceof JoinedRefusal)) throw err;
      return this.flight(key, parent, endpoint, requester, early).catch((again: unknown) => {
        throw again instanceof JoinedRefusal ? again.refusal : again;
      });
    }
  }

  /**
   * The refresh of a stale entry, in the background: nothing when one is queued or running already;
   * else charged to the client, and not queued when the charge refuses it (the stale answer is
   * served anyway).
   *
   * @returns false when the charge refused it.
   */
  async refreshStale(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
  ): Promise<boolean> {
    const queue = this.deps.queues[endpoint.kind];
    if ((await queue.getDeduplicationJobId(refreshDedupId(key))) !== null) return true;
    try {
      await chargeRefresh(endpoint, requester, this.deps.budget);
    } catch (err) {
      if (!(err instanceof RateLimitedError)) throw err;
      return false;
    }
    await addRefreshJob(queue, jobData(key, parent, endpoint, requester.client), 'stale');
    return true;
  }

  /**
   * Shutdown has begun: no new refresh is waited for, and requests already waiting get `graceMs`
   * to see theirs finish, then answer 503 `Shutting down`.
   *
   * @param graceMs milliseconds waiting requests may still wait.
   */
  close(graceMs = 0): void {
    this.closingStarted = true;
    if (graceMs <= 0) this.closing.abort();
    else setTimeout(() => this.closing.abort(), graceMs).unref();
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
    early: boolean,
  ): Promise<EntryRead<CacheEntry>> {
    let flight = this.inflight.get(key);
    const joined = flight !== undefined;
    if (!flight) {
      flight = this.start(key, parent, endpoint, requester);
      this.inflight.set(key, flight);
    }
    try {
      return (early ? await flight.early : undefined) ?? (await flight.done);
    } catch (err) {
      if (joined && err instanceof RateLimitedError) throw new JoinedRefusal(err);
      throw err;
    }
  }

  /** Starts the single flight of `key`: its refresh and wait, and its early answer's read. */
  private start(key: string, parent: string, endpoint: RpcEndpoint, requester: Requester): Flight {
    let settle: (read: EntryRead<CacheEntry> | undefined) => void = () => undefined;
    const early = new Promise<EntryRead<CacheEntry> | undefined>((resolve) => (settle = resolve));
    // Each early event reads the answer; the first read settles it (a later one is ignored).
    const onEarly = () =>
      void this.deps.readEarly(endpoint, parent).then(settle, () => settle(undefined));
    const done = this.refreshAndWait(key, parent, endpoint, requester, onEarly).finally(() => {
      this.inflight.delete(key);
      settle(undefined);
    });
    // A flight whose requests all took its early answer has no other reader of its failure.
    done.catch(() => undefined);
    return { early, done };
  }

  private async refreshAndWait(
    key: string,
    parent: string,
    endpoint: RpcEndpoint,
    requester: Requester,
    onEarly: () => void,
  ): Promise<EntryRead<CacheEntry>> {
    // Listen before queueing, then look again: a refresh that was already running may have
    // finished between the first read and now, and its event would be lost to us.
    const wait = this.deps.listener.next(endpoint.id, parent, this.deps.waitMs, onEarly);
    try {
      const raced = await this.deps.read(key);
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
      if (outcome.reason === 'budget') throw budgetSpent(parent, this.deps.budget);
      if (outcome.reason === 'share') throw shareSpent(this.deps.budget);
      if (outcome.reason === 'disconnected') {
        throw new UnavailableError(
          `lost the refresh events of ${parent}: Redis connection closed`,
          REDIS_RETRY_AFTER_S,
        );
      }
      throw new InternalError(`refresh of ${parent} failed in the worker`);
    }
    const read = await this.deps.read(key);
    if (!read.entry) {
      throw new InternalError(`refresh of ${parent} reported done but wrote no entry`);
    }
    return read as EntryRead<CacheEntry>;
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
        await chargeRefresh(endpoint, requester, this.deps.budget);
        if (waiting >= this.deps.maxWaiting) {
          throw new OverloadedError(`${waiting} refreshes waiting`, 5);
        }
      }
      await addRefreshJob(
        queue,
        { ...jobData(key, parent, endpoint, requester.client), coldMiss: true },
        'coldMiss',
      );
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
