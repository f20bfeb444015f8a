import type { Logger } from 'pino';
import type { FollowMode, FollowRecord } from '../../src/core/cache/follow-status.js';
import { occasionalWarning } from '../../src/core/logger.js';
import type { Metrics } from '../../src/core/metrics.js';
import type { CreditBudget } from '../../src/core/rpc/budget.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import type { Clock, FollowStore } from './types.js';

/** How long a status written now vouches for the stream: three writes. */
export const HEALTHY_FOR_MS = 3_000;

/** Where the follow status is read and written (./status-store.ts in the runtime). */
export type FollowStatusIO = {
  read(): Promise<FollowRecord | undefined>;
  write(status: FollowRecord): Promise<void>;
};

export type StatusReportDeps = {
  clock: Clock;
  slots: Pick<SlotClock, 'newest'>;
  store: Pick<FollowStore, 'markOwed'>;
  budget?: Pick<CreditBudget, 'state'>;
  /** The parents that still owe a re-read, each with the slot it must reach (./rereads.ts). */
  owed?: () => Iterable<readonly [parent: string, slot: number]>;
  changed: (parent: string) => void;
  status: FollowStatusIO;
  /**
   * When the oldest fact still waiting for its read past the grace was reported, at `now`: a
   * Delete (./deletions.ts) or a registry feed's fact (worker/registry/feed.ts).
   */
  deletesSince: (now: number) => number | undefined;
  metrics: Metrics;
  logger: Logger;
};

/**
 * What the stream is at when the status is written. `gap`: `healed` when the open socket's gap is
 * healed (or none needs one: not the owner, another mode), `healing` when a socket is open and its
 * gap not healed yet, `closed` when no socket is open.
 */
export type StreamState = {
  owner: boolean;
  healthy: boolean;
  mode: FollowMode;
  gap?: 'healed' | 'healing' | 'closed';
};

/**
 * What the follower vouches with (docs/design.md, "Follow status"): the epoch since which no
 * change was missed, the last transaction the whole-program stream reported (where the next
 * owner's gap read stops), and the re-reads the spent budget cannot pay for, each marked on its
 * entry. Written every second by the owner; only a new epoch moves the epoch.
 */
export class StatusReport {
  /** Since when no change was missed (Unix ms); none until this owner knows. */
  epoch: number | undefined;
  /**
   * The anchor the next heal reads back to: the last transaction the whole-program stream reported
   * on a healed socket, or the newest a heal read (./healer.ts; the follower moves it).
   */
  lastSignature: string | undefined;
  /**
   * Since when (Unix ms) a gap of the whole-program stream has been healing, while one is
   * ({@link write} says when); the status carries it while it does not vouch.
   */
  private healingSince: number | undefined;
  /**
   * When (Unix ms) the stream last vouched: this owner's last beat that did, or the last owner's
   * ({@link resume}); undefined while unknown. The status carries it while it does not vouch.
   */
  private vouchedAt: number | undefined;
  /** Re-reads marked owed, by parent: the slot marked (written once while the budget is spent). */
  private readonly owedMarked = new Map<string, number>();
  /** Owed marks being written ({@link marked}). */
  private readonly marking = new Set<Promise<void>>();
  /** New epochs in a burst (a flood of unreadable Deletes) write one line a minute. */
  private readonly warnEpoch: ReturnType<typeof occasionalWarning>;

  constructor(private readonly deps: StatusReportDeps) {
    this.warnEpoch = occasionalWarning(deps.logger, 60_000, () => deps.clock.now());
  }

  /**
   * Taking the stream over: the epoch and last signature the last owner wrote, if readable, and
   * since when the stream has not vouched, if it stopped: the heal under way here goes on from
   * the last owner's (its `healingSince`, or when its vouching ended), so the bound on waiting for
   * a heal is not started again by each takeover (a flaky Redis losing leases, a crash loop). The
   * last vouch is the last owner's `vouchedAt`, else, if its status vouched, the beat that wrote
   * it (`healthyUntil` less {@link HEALTHY_FOR_MS}: the beat, not the horizon it vouched up to),
   * else unknown.
   */
  async resume(): Promise<void> {
    const status = await this.deps.status.read().catch(() => undefined);
    const now = this.deps.clock.now();
    this.epoch = status?.epoch;
    this.lastSignature = status?.lastSignature;
    const vouched = status !== undefined && status.healthyUntil > 0;
    const vouchedUntil = vouched ? Math.min(status.healthyUntil, now) : undefined;
    this.healingSince = status?.healingSince ?? vouchedUntil;
    this.vouchedAt =
      status?.vouchedAt ??
      (vouched && status.mode === 'program'
        ? Math.min(status.healthyUntil - HEALTHY_FOR_MS, now)
        : undefined);
  }

  /** Whether the day's credit budget is spent (re-reads are then refused). */
  budgetSpent(): boolean {
    return this.deps.budget?.state() === 'exhausted';
  }

  /** A change was missed for good: entries fetched before now are stale (re-read when asked). */
  newEpoch(why: string): void {
    this.warnEpoch({ why }, 'follow: a new epoch');
    this.epoch = this.deps.clock.now();
  }

  /**
   * A re-read of `parent` at `slot` was asked. While the spent budget refuses it, and while a heal
   * is under way (`healing`: the heal vouches for the stream before the scan is stored), the
   * change it would bring is not "nothing new": that entry is marked owed ({@link owe}). During a
   * heal a re-read at no slot known (the slot clock has no anchor yet) is not marked: a mark needs
   * the slot a scan must reach, and a new epoch for it would stale every entry (docs/design.md,
   * "Additions and transfers").
   */
  asked(parent: string, slot: number | undefined, healing: boolean): void {
    if (this.budgetSpent()) this.owe(parent, slot);
    else if (healing && (slot ?? this.deps.slots.newest) !== undefined) this.owe(parent, slot);
  }

  /**
   * A re-read of `parent` the stream cannot vouch for until it is stored ({@link asked}): that
   * entry alone stops being vouched for until a scan reaches `slot` (the newest slot believed
   * when the re-read names none). The entries of other parents missed nothing, so they stay
   * fresh. When the slot is unknown or the mark cannot be written, every entry is given up
   * instead (a new epoch): never a wrong HIT.
   */
  private owe(parent: string, slot: number | undefined): void {
    const at = slot ?? this.deps.slots.newest;
    if (at === undefined) {
      this.newEpoch('a re-read the spent budget cannot pay for, at an unknown slot');
      return;
    }
    if ((this.owedMarked.get(parent) ?? -1) >= at) return;
    this.owedMarked.set(parent, at);
    const mark = this.deps.store.markOwed(parent, at).then(
      (written) => {
        if (written) this.deps.changed(parent);
      },
      (err: unknown) => {
        this.owedMarked.delete(parent);
        this.warnEpoch({ err: String(err), parent }, 'follow: an owed re-read not marked');
        this.newEpoch('an owed re-read could not be marked');
      },
    );
    this.marking.add(mark);
    void mark.then(() => this.marking.delete(mark));
  }

  /**
   * Resolves once every owed mark begun before the call is written, or its failure has started a
   * new epoch: a heal vouches only after (./follower.ts). Never rejects.
   */
  async marked(): Promise<void> {
    await Promise.all(this.marking);
  }

  /**
   * The owner's whole-program socket closed: a heal is under way from now (the next socket's),
   * unless one was already.
   */
  socketClosed(): void {
    this.healingSince ??= this.deps.clock.now();
  }

  /**
   * One beat of the status: the owed re-reads marked (while the budget is spent), the healthy
   * gauge set, and, by the owner, the status written (vouching for {@link HEALTHY_FOR_MS} when
   * healthy; else saying since when a heal is under way, if one is, and when the stream last
   * vouched, if known).
   */
  async write({ owner, healthy, mode, gap = 'healed' }: StreamState): Promise<void> {
    const { deps } = this;
    if (!this.budgetSpent()) this.owedMarked.clear();
    else if (owner) for (const [parent, slot] of deps.owed?.() ?? []) this.owe(parent, slot);
    deps.metrics.followHealthy.set(healthy ? 1 : 0);
    const now = deps.clock.now();
    // Not the owner now (a lease lapsed for a moment, or lost): nothing is written, and the heal
    // is left as it is; a lease taken again later resumes it from the status (`resume`).
    if (!owner) return;
    // A heal runs from the first close or beat that found one under way (or the last owner's,
    // `resume`) until a gap is healed (vouched for, or a new epoch), kept across sockets that
    // close before theirs heals: the bound on waiting for it counts from when the stream stopped
    // vouching, not from the latest try. With no socket open it is only one after a close: a
    // provider refusing every upgrade heals nothing, and the entries are refreshed at once as
    // without a stream.
    if (mode !== 'program' || gap === 'healed') this.healingSince = undefined;
    else if (gap === 'healing') this.healingSince ??= now;
    // The last vouch is this beat's, not the horizon it writes: what the stream brings after this
    // beat is vouched for only by a later beat, which a refused probe or a close may never write.
    // Only a vouch of the whole program vouches for the registry index (the follower says
    // `healthy` of no other mode; the mode is checked here all the same).
    if (healthy && mode === 'program') this.vouchedAt = now;
    const deletesSince = deps.deletesSince(now);
    await deps.status.write({
      epoch: this.epoch ?? now,
      healthyUntil: healthy ? now + HEALTHY_FOR_MS : 0,
      mode,
      ...(deletesSince === undefined ? {} : { deletesSince }),
      ...(healthy || this.healingSince === undefined ? {} : { healingSince: this.healingSince }),
      ...(healthy || this.vouchedAt === undefined ? {} : { vouchedAt: this.vouchedAt }),
      ...(this.lastSignature === undefined ? {} : { lastSignature: this.lastSignature }),
    });
  }
}
