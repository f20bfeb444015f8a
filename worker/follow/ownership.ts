import { Redlock } from '@sesamecare-oss/redlock';
import { databaseOf, type RedisClient } from '../../src/core/redis.js';
import type { Clock } from './types.js';

/** A held lease. */
export type Lease = { extend(ms: number): Promise<Lease>; release(): Promise<unknown> };
/** Takes leases; rejects when another holds one. */
export type Locker = { acquire(resource: string, ms: number): Promise<Lease> };

/**
 * Leases by redlock on the one Redis. Redlock's scripts SELECT its `db` setting (default 0) before
 * touching the lease: it gets the connection's database, so the lease stays in the deployment's
 * own (docs/design.md, "Redis isolation").
 */
export function redlockLocker(redis: RedisClient): Locker {
  const redlock = new Redlock([redis], { retryCount: 0, db: databaseOf(redis) });
  // Redlock reports failed extensions of `using` as events; a missing listener would throw.
  redlock.on('error', () => undefined);
  return { acquire: (resource, ms) => redlock.acquire([resource], ms) };
}

export type OwnershipDeps = {
  locker: Locker;
  /** `<prefix>:follow-lease`. */
  resource: string;
  /** `WATCH_LEASE_MS`: renewed every third of it. */
  leaseMs: number;
  clock: Clock;
  /** This worker now owns the stream. */
  acquired: () => void;
  /** It no longer does (lapsed, released, or closing). */
  lost: () => void;
};

/**
 * One worker owns the stream: the one holding the lease `<prefix>:follow-lease`, renewed every
 * third of the lease. Others try to take it as often and take over once it lapses (a worker that
 * dies stops renewing). Closing releases it at once.
 */
export class Ownership {
  private lease: Lease | undefined;
  private cancel: (() => void) | undefined;
  private ticking: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly deps: OwnershipDeps) {}

  /**
   * Whether this worker holds the lease now: not past its expiry, counted from before the request
   * that took or extended it, even while a renewal is still unanswered (a stalled Redis, a busy
   * event loop), so a lapsed owner stops vouching for the stream before another takes it over.
   */
  get owner(): boolean {
    return this.lease !== undefined && this.deps.clock.now() < this.validUntil;
  }

  /** When the lease held lapses at the latest (Unix ms). */
  private validUntil = 0;

  start(): void {
    this.closed = false;
    void this.tick();
  }

  /** One renewal or attempt (tests call it instead of waiting). */
  tick(): Promise<void> {
    this.ticking ??= this.renew().finally(() => {
      this.ticking = undefined;
      if (!this.closed) {
        this.cancel = this.deps.clock.after(
          Math.max(100, Math.floor(this.deps.leaseMs / 3)),
          () => void this.tick(),
        );
      }
    });
    return this.ticking;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancel?.();
    await this.ticking;
    const lease = this.lease;
    this.lease = undefined;
    if (lease) {
      this.deps.lost();
      await lease.release().catch(() => undefined);
    }
  }

  private async renew(): Promise<void> {
    const { deps } = this;
    const asked = deps.clock.now();
    if (this.lease) {
      try {
        this.lease = await this.lease.extend(deps.leaseMs);
        this.validUntil = asked + deps.leaseMs;
        return;
      } catch {
        // Lapsed (a stall longer than the lease, a flood keeping the event loop busy): unless
        // another worker took it meanwhile, take it again and keep the stream as it is.
      }
      try {
        this.lease = await deps.locker.acquire(deps.resource, deps.leaseMs);
        this.validUntil = asked + deps.leaseMs;
      } catch {
        this.lease = undefined;
        deps.lost();
      }
      return;
    }
    try {
      const lease = await deps.locker.acquire(deps.resource, deps.leaseMs);
      if (this.closed) {
        await lease.release().catch(() => undefined);
        return;
      }
      this.lease = lease;
      this.validUntil = asked + deps.leaseMs;
      deps.acquired();
    } catch {
      // Held by another worker.
    }
  }
}
