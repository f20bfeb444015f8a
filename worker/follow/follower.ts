import type { Logger } from 'pino';
import type { FollowMode, FollowRecord } from '../../src/core/cache/follow-status.js';
import { occasionalWarning } from '../../src/core/logger.js';
import type { Metrics } from '../../src/core/metrics.js';
import type { CreditBudget } from '../../src/core/rpc/budget.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { toBase58 } from '../../src/core/sns/pda.js';
import { Backstop } from './backstop.js';
import { Deletions } from './deletions.js';
import { healGap } from './gaps.js';
import { Ownership, type Locker } from './ownership.js';
import { ParentIndex } from './parent-index.js';
import { Patcher } from './patcher.js';
import type { FollowRpc } from './rpc.js';
import { PROBE_GRACE_MS, SilenceProbe } from './silence.js';
import { FollowStream, HEAD_SLICE, type LogsNote } from './stream.js';
import { SocketSession } from './session.js';
import { every, type AccountNote, type Clock, type FollowStore, type Reread } from './types.js';

/** How long a status written now vouches for the stream: three writes. */
export const HEALTHY_FOR_MS = 3_000;
/** How often the status is written. */
export const STATUS_EVERY_MS = 1_000;
/**
 * How often the parents asked for or written lately are read from the registry (one range read):
 * a parent's first entry is followed within this, and the replay buffer covers the wait.
 */
export const JOIN_EVERY_MS = 1_000;
/** How often the whole registry is read again (parents swept as idle are let go). */
export const RELOAD_EVERY_MS = 60_000;
/** After every subscription was refused, how long before the whole-program stream is tried again. */
export const RETRY_PROGRAM_MS = 10 * 60_000;
/**
 * In `parents` mode, how long after a subscription the read covering its gap begins: HTTP reads
 * may reach a node behind the websocket's.
 */
export const GAP_READ_DELAY_MS = 2_000;
/** Signatures of the logs stream remembered for the silence probe. */
const SEEN_MAX = 4_096;

/** What a socket is to the follower (./ws-connection.ts in the runtime, a fake in tests). */
export type Connection = {
  readonly connected: boolean;
  start(): void;
  reconnect(): void;
  close(): Promise<void>;
};
export type ConnectionHooks = {
  onOpen: (send: (text: string) => void) => void;
  onMessage: (bytes: Buffer) => void;
  onClose: () => void;
  onTick: () => void;
};

export type FollowerDeps = {
  store: FollowStore;
  rpc: FollowRpc;
  clock: Clock;
  slots: Pick<SlotClock, 'trusts' | 'ceiling' | 'newest'>;
  /**
   * The daily credit budget: past its soft threshold the existence checks (the backstop) stop,
   * reads for Deletes go at the proactive share's pace; the stream itself goes on, its spend flat
   * (docs/design.md, "Budget").
   */
  budget?: Pick<CreditBudget, 'state' | 'proactiveAffordable'>;
  metrics: Metrics;
  logger: Logger;
  reread: Reread;
  /**
   * The parents that still owe a re-read, each with the slot it must reach (./rereads.ts): while
   * the budget is spent none can be made, and those entries are not vouched for (`markOwed`).
   */
  owed?: () => Iterable<readonly [parent: string, slot: number]>;
  changed: (parent: string) => void;
  status: { read(): Promise<FollowRecord | undefined>; write(status: FollowRecord): Promise<void> };
  locker: Locker;
  /** `<prefix>:follow-lease`. */
  leaseResource: string;
  leaseMs: number;
  freshMs: number;
  checkCost: number;
  scanCost: number;
  /** The hottest parents (`HOT_KEYS_TOP_N`), followed one subscription each in `parents` mode. */
  hotParents: () => Promise<string[]>;
  connect: (hooks: ConnectionHooks) => Connection;
  /**
   * The registry index's feed (docs/design.md, "The registry index"): every account the stream or a
   * gap read reports, and every deletion, whatever the parent. None in `SUBDOMAIN_INDEX=parents`.
   */
  registry?: {
    onAccount(note: AccountNote): void;
    onDeleted(accounts: readonly string[], slot: number): void;
  };
};

/**
 * Every cached parent of the configured endpoint follows the chain (docs/design.md,
 * "Freshness"): one worker (./ownership.ts) holds one websocket (./stream.ts) carrying one
 * `programSubscribe` over the whole name program and one `logsSubscribe`; accounts of followed
 * parents (./parent-index.ts) are patched into their entries (./patcher.ts), Deletes found in the
 * logs removed (./deletions.ts), gaps healed by reading what happened (./gaps.ts), a silent
 * stream noticed (./silence.ts), and existence checks back off per quiet parent
 * (./backstop.ts). While all that holds it writes the follow status every second, which keeps
 * the entries fresh without clock refreshes.
 */
export class Follower {
  readonly index: ParentIndex;
  readonly patcher: Patcher;
  readonly deletions: Deletions;
  readonly backstop: Backstop;
  readonly stream: FollowStream;
  private readonly ownership: Ownership;
  private readonly probe: SilenceProbe;
  private connection: Connection | undefined;
  private epoch: number | undefined;
  private lastSignature: string | undefined;
  private readonly seen = new Set<string>();
  /** The open socket's session (./session.ts); none while no socket is open, or it was lost. */
  private session: SocketSession | undefined;
  private healing: Promise<void> | undefined;
  private readonly timers: Array<() => void> = [];
  private retryProgram: (() => void) | undefined;
  private closed = false;
  private lastEventAt = 0;

  /** Re-reads marked owed while the budget is spent, by parent: the slot marked (written once). */
  private readonly owedMarked = new Map<string, number>();

  /** New epochs in a burst (a flood of unreadable Deletes) write one line a minute. */
  private readonly warnEpoch: ReturnType<typeof occasionalWarning>;

  constructor(private readonly deps: FollowerDeps) {
    const { clock, metrics, logger } = deps;
    this.warnEpoch = occasionalWarning(logger, 60_000, () => clock.now());
    // A change only a re-read can settle, once the budget is spent, is not "nothing new": the
    // re-read will be refused, so the entry it would correct stops being vouched for.
    const reread: Reread = (parent, minContextSlot) => {
      if (this.budgetSpent()) this.owe(parent, minContextSlot);
      deps.reread(parent, minContextSlot);
    };
    this.index = new ParentIndex(clock);
    this.patcher = new Patcher({
      store: deps.store,
      clock,
      slots: deps.slots,
      reread,
      changed: deps.changed,
      metrics,
      logger,
    });
    this.deletions = new Deletions({
      rpc: deps.rpc,
      affordable: () => deps.budget?.proactiveAffordable() ?? true,
      store: deps.store,
      clock,
      slots: deps.slots,
      reread,
      changed: deps.changed,
      lost: (signature) => this.newEpoch(`deleting transaction ${signature} unreadable`),
      metrics,
      logger,
      ...(deps.registry
        ? { deleted: (accounts, slot) => deps.registry?.onDeleted(accounts, slot) }
        : {}),
    });
    this.backstop = new Backstop({
      rpc: deps.rpc,
      store: deps.store,
      clock,
      slots: deps.slots,
      freshMs: deps.freshMs,
      checkCost: deps.checkCost,
      scanCost: deps.scanCost,
      reread,
      changed: deps.changed,
      metrics,
    });
    this.stream = new FollowStream({
      clock,
      metrics,
      logger,
      onAccount: (note, parentKey) => {
        this.sawSlot(note.slot);
        this.accountHeard(note.slot);
        this.onAccount(note, parentKey);
      },
      onLogs: (note) => {
        this.heard();
        this.sawSlot(note.slot);
        this.remember(note.signature);
        this.lastSignature = note.signature;
        this.expectAccounts(note);
        this.deletions.onLogs(note);
      },
      onSubscribed: (mode) => this.onSubscribed(mode),
      onMode: (mode) => this.onMode(mode),
    });
    this.probe = new SilenceProbe({
      rpc: deps.rpc,
      clock,
      seen: (signature) => this.seen.has(signature),
      silent: (signature) =>
        this.silent({ signature }, 'follow stream silent: a transaction never came; reconnecting'),
    });
    this.ownership = new Ownership({
      locker: deps.locker,
      resource: deps.leaseResource,
      leaseMs: deps.leaseMs,
      clock,
      acquired: () => void this.acquired(),
      lost: () => void this.lost(),
    });
  }

  /** Whether this worker owns the stream. */
  get owner(): boolean {
    return this.ownership.owner;
  }

  /** Whether this worker's socket is open (only the owner has one). */
  get connected(): boolean {
    return this.connection?.connected ?? false;
  }

  /** Whether the stream vouches for the entries now (the status says so). */
  get healthy(): boolean {
    return (
      this.owner &&
      this.stream.mode === 'program' &&
      this.stream.subscribed &&
      this.session?.healed === true &&
      this.probe.verified
    );
  }

  start(): void {
    this.closed = false;
    this.ownership.start();
    const onError = (err: unknown) => this.deps.logger.warn({ err: String(err) }, 'follow');
    const repeat = (ms: number, fn: () => Promise<unknown> | undefined) =>
      this.timers.push(every(this.deps.clock, ms, fn, onError));
    repeat(STATUS_EVERY_MS, () => this.writeStatus());
    repeat(RELOAD_EVERY_MS, () => this.reload());
    repeat(JOIN_EVERY_MS, () => this.join());
    // Only while the stream covers additions: a check proves what is gone, not what is new.
    repeat(Math.max(1_000, Math.floor(this.deps.freshMs / 6)), () =>
      this.healthy && (this.deps.budget?.state() ?? 'normal') === 'normal'
        ? this.backstop.round()
        : undefined,
    );
    repeat(Math.max(500, Math.floor(this.deps.leaseMs / 3)), () =>
      this.owner && this.stream.mode === 'parents' ? this.updateHotParents() : undefined,
    );
    void this.reload().catch(() => undefined);
  }

  /** Follows `parent` now (its entry was just written); applies what was kept for it. */
  follow(parent: string): void {
    const replay = this.index.add(parent);
    this.backstop.add(parent);
    this.deps.metrics.watchedParents.set(this.index.size);
    const key = this.index.keyOfParent(parent);
    if (key === undefined) return;
    for (const note of replay) this.patcher.notify(parent, key, note);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const cancel of this.timers.splice(0)) cancel();
    this.retryProgram?.();
    await this.ownership.close();
    await this.connection?.close();
    this.connection = undefined;
    this.probe.stop();
    this.deps.metrics.followHealthy.set(0);
  }

  /**
   * Follows the parents asked for or written since the last look (and a few seconds before it:
   * registry writes of other processes land a little late).
   */
  async join(): Promise<void> {
    const since = this.joinedAt - 5_000;
    this.joinedAt = this.deps.clock.now();
    for (const parent of await this.deps.store.followedParents(since)) {
      if (!this.index.has(parent)) this.follow(parent);
    }
  }

  private joinedAt = 0;

  /** Reads the registry of cached parents again. */
  async reload(): Promise<void> {
    this.joinedAt = this.deps.clock.now();
    const parents = await this.deps.store.followedParents();
    for (const [parent, replay] of this.index.replace(parents)) {
      const key = this.index.keyOfParent(parent);
      if (key !== undefined) for (const note of replay) this.patcher.notify(parent, key, note);
    }
    for (const parent of this.knownParents)
      if (!this.index.has(parent)) this.patcher.forget(parent);
    this.knownParents = new Set(parents);
    this.backstop.sync(this.index.parents());
    this.deps.metrics.watchedParents.set(this.index.size);
  }

  private knownParents = new Set<string>();

  private sawSlot(slot: number): void {
    if (this.deps.slots.trusts(slot)) this.session?.sawSlot(slot);
  }

  private onAccount(note: AccountNote, parentKey: string | undefined): void {
    this.heard();
    this.deps.registry?.onAccount(note);
    // A provider that ignored the `dataSlice` sent the whole account: its first bytes are the head.
    const head = note.head ?? undefined;
    const key =
      parentKey ?? (head && head.length >= 32 ? toBase58(head.subarray(0, 32)) : undefined);
    if (key === undefined) return;
    const parent = this.index.parentOf(key);
    if (parent === undefined) {
      // Not followed (yet): kept a while for a parent whose scan is under way.
      this.index.keep(key, note);
      return;
    }
    this.patcher.notify(parent, key, note);
  }

  /**
   * The stream is open but misses what it should bring: drop the socket, the next one heals the
   * gap.
   */
  private silent(context: object, message: string): void {
    this.deps.logger.warn(context, message);
    // Whatever this socket showed is not believed any more: the next one starts a session anew.
    this.session = undefined;
    this.connection?.reconnect();
  }

  private accountHeard(slot: number): void {
    this.session?.accountHeard(slot);
  }

  private expectAccounts(note: LogsNote): void {
    if (this.stream.mode !== 'program') return;
    this.session?.expectAccounts(note, this.deps.clock.now());
  }

  /** Whether a write the logs reported waited past the grace for its account notification. */
  private checkAccounts(): void {
    if (!this.stream.subscribed) return;
    const slot = this.session?.overdue(this.deps.clock.now(), PROBE_GRACE_MS);
    if (slot === undefined) return;
    this.silent(
      { slot },
      'follow stream: a write the logs reported brought no account notification; reconnecting',
    );
  }

  private heard(): void {
    this.lastEventAt = this.deps.clock.now();
    this.deps.metrics.followLastEvent.set(Math.floor(this.lastEventAt / 1000));
  }

  private remember(signature: string): void {
    this.seen.add(signature);
    if (this.seen.size > SEEN_MAX) {
      const oldest = this.seen.values().next();
      if (!oldest.done) this.seen.delete(oldest.value);
    }
  }

  private async acquired(): Promise<void> {
    const { deps } = this;
    deps.logger.info('follow: this worker owns the stream');
    const status = await deps.status.read().catch(() => undefined);
    this.epoch = status?.epoch;
    this.lastSignature = status?.lastSignature;
    this.gapFrom = status?.lastSignature;
    this.session = undefined;
    this.stream.reset('program');
    this.openConnection();
  }

  private openConnection(): void {
    void this.connection?.close();
    this.connection = this.deps.connect({
      onOpen: (send) => {
        this.session = new SocketSession();
        this.stream.opened(send);
      },
      onMessage: (bytes) => this.stream.receive(bytes),
      onClose: () => {
        this.stream.closed();
        this.session = undefined;
        // The gap starts here: the next stream reports newer transactions before it is healed.
        this.gapFrom ??= this.lastSignature;
      },
      onTick: () => this.stream.tick(),
    });
    this.connection.start();
  }

  private async lost(): Promise<void> {
    this.deps.logger.info('follow: this worker no longer owns the stream');
    this.session = undefined;
    this.probe.stop();
    this.deps.metrics.followHealthy.set(0);
    const connection = this.connection;
    this.connection = undefined;
    await connection?.close();
    for (const parent of this.index.parents()) this.patcher.forget(parent);
  }

  private onMode(mode: FollowMode): void {
    // The same socket, other subscriptions: their confirmation heals the gap again.
    if (this.session) this.session.healed = false;
    if (mode !== 'program') this.probe.stop();
    if (mode === 'parents') void this.updateHotParents();
    if (mode === 'off') {
      const connection = this.connection;
      this.connection = undefined;
      void connection?.close();
      this.retryProgram = this.deps.clock.after(RETRY_PROGRAM_MS, () => {
        if (this.closed || !this.owner) return;
        this.stream.reset('program');
        this.openConnection();
      });
    }
  }

  private async updateHotParents(): Promise<void> {
    this.stream.setParents(await this.deps.hotParents());
  }

  /** Every subscription is confirmed on a new socket: heal what was missed meanwhile. */
  private onSubscribed(mode: FollowMode): void {
    if (mode === 'parents') {
      // As before the whole-program stream: each hot parent is read again after its gap.
      void this.deps.hotParents().then((parents) =>
        this.deps.clock.after(GAP_READ_DELAY_MS, () => {
          for (const parent of parents) this.deps.reread(parent, undefined);
        }),
      );
      return;
    }
    if (mode !== 'program' || !this.session) return;
    this.session.subscribedAt = this.deps.clock.now();
    // HTTP reads may reach a node behind the websocket's: the gap is read a little later, and at
    // the newest slot the new stream has shown by then.
    this.deps.clock.after(GAP_READ_DELAY_MS, () => {
      if (!this.closed && this.stream.subscribed) this.startHeal();
    });
  }

  private startHeal(): void {
    if (this.healing) {
      // Another socket while the last gap is healed: its own gap is healed after.
      this.healAgain = true;
      return;
    }
    this.healing = (async () => {
      do {
        this.healAgain = false;
        await this.heal();
      } while (this.healAgain && !this.closed);
    })()
      .catch((err: unknown) => this.deps.logger.warn({ err: String(err) }, 'follow: heal'))
      .finally(() => (this.healing = undefined));
  }

  private healAgain = false;
  /** The last signature reported before the gap the next heal reads (undefined: none pending). */
  private gapFrom: string | undefined;

  private async heal(): Promise<void> {
    const { deps } = this;
    // A heal vouches for the stream only if its socket is still the one open when it ends: a
    // socket lost meanwhile left a gap of its own, not the one this read.
    const session = this.session;
    // Entries fetched since the stream was confirmed miss nothing, whatever happened before.
    const subscribedAt = session?.subscribedAt ?? deps.clock.now();
    // The last transaction the stream reported before the gap, not since: the new stream may
    // have reported newer ones by now, and reading from those would pass over the gap.
    const until = this.gapFrom ?? this.lastSignature;
    this.gapFrom = undefined;
    // No notification's slot is believed before the clock has an anchor: a new process asks for
    // the slot until it has one (two replies that agree), rather than re-read every change.
    for (let i = 0; i < 4 && deps.slots.ceiling() === undefined; i++) {
      await deps.rpc.slot().catch(() => undefined);
    }

    const outcome = await healGap(
      {
        rpc: deps.rpc,
        deletions: this.deletions,
        feed: (note, parentKey) => this.onAccount(note, parentKey),
        logger: deps.logger,
        ...(session?.streamSlot === undefined ? {} : { minContextSlot: session.streamSlot }),
        wait: (ms) => new Promise<void>((resolve) => deps.clock.after(ms, resolve)),
      },
      until,
    );
    if (outcome.healed && this.epoch !== undefined) {
      // Unless the stream reported a newer one meanwhile, the gap's newest is the last seen.
      if (outcome.newest !== undefined && this.lastSignature === until) {
        this.lastSignature = outcome.newest;
      }
    } else {
      if (!outcome.healed && this.epoch !== undefined) {
        deps.logger.warn({ why: outcome.why }, 'follow: gap not healed: a new epoch');
      }
      this.epoch = subscribedAt;
      if (this.lastSignature === undefined) {
        const [newest] = await deps.rpc.signatures({ limit: 1 }).catch(() => []);
        // Only if the stream has not reported a newer one meanwhile.
        this.lastSignature ??= newest?.signature;
      }
    }
    // The newest transaction known now: the silence probe must not take it for one the stream
    // missed (on a quiet chain it may be hours old).
    if (outcome.healed && outcome.newest) this.remember(outcome.newest);
    if (this.lastSignature !== undefined) this.remember(this.lastSignature);
    // A socket lost meanwhile left a gap of its own: healed only by the read that follows it.
    if (session && this.session === session && this.stream.subscribed) {
      session.healed = true;
      this.probe.start();
    }
    await this.writeStatus();
  }

  /** A change was missed for good: entries fetched before now are stale (re-read when asked). */
  private newEpoch(why: string): void {
    this.warnEpoch({ why }, 'follow: a new epoch');
    this.epoch = this.deps.clock.now();
  }

  /**
   * A re-read of `parent` the spent budget cannot pay for: that entry alone stops being vouched
   * for until a scan reaches `slot` (the newest slot believed when the re-read names none). The
   * entries of other parents missed nothing, so they stay fresh. When the slot is unknown or the
   * mark cannot be written, every entry is given up instead (a new epoch): never a wrong HIT.
   */
  private owe(parent: string, slot: number | undefined): void {
    const at = slot ?? this.deps.slots.newest;
    if (at === undefined) {
      this.newEpoch('a re-read the spent budget cannot pay for, at an unknown slot');
      return;
    }
    if ((this.owedMarked.get(parent) ?? -1) >= at) return;
    this.owedMarked.set(parent, at);
    this.deps.store.markOwed(parent, at).then(
      (written) => {
        if (written) this.deps.changed(parent);
      },
      (err: unknown) => {
        this.owedMarked.delete(parent);
        this.warnEpoch({ err: String(err), parent }, 'follow: an owed re-read not marked');
        this.newEpoch('an owed re-read could not be marked');
      },
    );
  }

  private budgetSpent(): boolean {
    return this.deps.budget?.state() === 'exhausted';
  }

  private async writeStatus(): Promise<void> {
    this.checkAccounts();
    if (!this.budgetSpent()) this.owedMarked.clear();
    else if (this.owner)
      for (const [parent, slot] of this.deps.owed?.() ?? []) this.owe(parent, slot);
    const healthy = this.healthy;
    this.deps.metrics.followHealthy.set(healthy ? 1 : 0);
    if (!this.owner) return;
    const now = this.deps.clock.now();
    const deletesSince = this.deletions.waitingSince(now);
    await this.deps.status.write({
      epoch: this.epoch ?? now,
      healthyUntil: healthy ? now + HEALTHY_FOR_MS : 0,
      mode: this.stream.mode,
      ...(deletesSince === undefined ? {} : { deletesSince }),
      ...(this.lastSignature === undefined ? {} : { lastSignature: this.lastSignature }),
    });
  }
}

export { HEAD_SLICE };
