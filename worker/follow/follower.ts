import type { Logger } from 'pino';
import type { FollowMode } from '../../src/core/cache/follow-status.js';
import type { Metrics } from '../../src/core/metrics.js';
import type { CreditBudget } from '../../src/core/rpc/budget.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import type { RegistryFeed } from '../registry/feed.js';
import { Backstop } from './backstop.js';
import { Deletions, earlier } from './deletions.js';
import { FollowedParents, JOIN_EVERY_MS, RELOAD_EVERY_MS } from './followed-parents.js';
import { GapHealer } from './healer.js';
import type { LogsNote } from './notifications.js';
import { Ownership, type Locker } from './ownership.js';
import { Patcher } from './patcher.js';
import { RecentSignatures } from './recent.js';
import type { FollowRpc } from './rpc.js';
import type { SocketSession } from './session.js';
import { PROBE_GRACE_MS, SilenceProbe } from './silence.js';
import { FollowSocket, type Connection, type ConnectionHooks } from './socket.js';
import { StatusReport, type FollowStatusIO } from './status-report.js';
import { FollowStream } from './stream.js';
import { every, type AccountNote, type Clock, type FollowStore, type Reread } from './types.js';

/** How often the status is written. */
export const STATUS_EVERY_MS = 1_000;
/** After every subscription was refused, how long before the whole-program stream is tried again. */
export const RETRY_PROGRAM_MS = 10 * 60_000;
/**
 * In `parents` mode, how long after a subscription the read covering its gap begins: HTTP reads
 * may reach a node behind the websocket's.
 */
export const GAP_READ_DELAY_MS = 2_000;
/** Signatures of the logs stream remembered for the silence probe. */
const SEEN_MAX = 4_096;

export type FollowerDeps = {
  /**
   * Makes the store every unit writes through, given the follower's own re-read (the one the
   * units ask for, which may mark the entry owed, `StatusReport.asked`): the store re-reads a
   * parent itself when a change meets an entry no change can be judged against ('unsound').
   */
  store: (reread: Reread) => FollowStore;
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
  status: FollowStatusIO;
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
   * gap read reports, and every deletion, whatever the parent; a heal waits for it to settle, and
   * its waiting facts count in `deletesSince` ("Stitching"). None in `SUBDOMAIN_INDEX=parents`.
   */
  registry?: Pick<RegistryFeed, 'onAccount' | 'onDeleted' | 'settled' | 'waitingSince'>;
};

/**
 * Every cached parent of the configured endpoint follows the chain (docs/design.md,
 * "Freshness"): one worker (./ownership.ts) holds one websocket (./socket.ts, ./stream.ts)
 * carrying one `programSubscribe` over the whole name program and one `logsSubscribe`; accounts
 * of followed parents (./followed-parents.ts) are patched into their entries (./patcher.ts),
 * Deletes found in the logs removed (./deletions.ts), gaps healed by reading what happened
 * (./healer.ts), a silent stream noticed (./silence.ts), and existence checks back off per quiet
 * parent (./backstop.ts). While all that holds it writes the follow status every second
 * (./status-report.ts), which keeps the entries fresh without clock refreshes.
 */
export class Follower {
  readonly patcher: Patcher;
  readonly deletions: Deletions;
  private readonly backstop: Backstop;
  private readonly stream: FollowStream;
  private readonly followed: FollowedParents;
  private readonly socket: FollowSocket;
  private readonly report: StatusReport;
  private readonly healer: GapHealer;
  private readonly ownership: Ownership;
  private readonly probe: SilenceProbe;
  private readonly seen = new RecentSignatures(SEEN_MAX);
  /** What cancels the periodic work, all of it on the one clock with `every`. */
  private readonly timers: Array<() => void> = [];
  /** What cancels the whole-program stream's next try after every subscription was refused. */
  private retryProgram: (() => void) | undefined;
  private closed = false;

  constructor(private readonly deps: FollowerDeps) {
    const { clock, metrics, logger } = deps;
    // The entry a re-read corrects may stop being vouched for meanwhile (StatusReport.asked).
    const reread: Reread = (parent, minContextSlot) => {
      const healing = this.owner && this.stream.mode === 'program' && !this.socket.session?.healed;
      this.report.asked(parent, minContextSlot, healing);
      deps.reread(parent, minContextSlot);
    };
    const store = deps.store(reread);
    this.report = new StatusReport({
      clock,
      slots: deps.slots,
      store,
      ...(deps.budget ? { budget: deps.budget } : {}),
      ...(deps.owed ? { owed: deps.owed } : {}),
      changed: deps.changed,
      status: deps.status,
      deletesSince: (now) =>
        earlier(this.deletions.waitingSince(now), deps.registry?.waitingSince(now)),
      metrics,
      logger,
    });
    const units = { store, clock, slots: deps.slots, reread, changed: deps.changed };
    this.patcher = new Patcher({ ...units, metrics, logger });
    this.deletions = new Deletions({
      ...units,
      rpc: deps.rpc,
      affordable: () => deps.budget?.proactiveAffordable() ?? true,
      lost: (signature) => this.report.newEpoch(`deleting transaction ${signature} unreadable`),
      metrics,
      logger,
      ...(deps.registry
        ? { deleted: (accounts, slot) => deps.registry?.onDeleted(accounts, slot) }
        : {}),
    });
    this.backstop = new Backstop({
      ...units,
      rpc: deps.rpc,
      freshMs: deps.freshMs,
      checkCost: deps.checkCost,
      scanCost: deps.scanCost,
      epoch: () => this.report.epoch,
      metrics,
    });
    this.followed = new FollowedParents({
      store,
      clock,
      metrics,
      patcher: this.patcher,
      backstop: this.backstop,
    });
    this.stream = new FollowStream({
      clock,
      metrics,
      logger,
      onAccount: (note, parentKey) => {
        this.sawSlot(note.slot);
        this.socket.session?.accountHeard(note.slot);
        this.onAccount(note, parentKey);
      },
      onLogs: (note) => this.onLogs(note),
      onSubscribed: (mode) => this.onSubscribed(mode),
      onMode: (mode) => this.onMode(mode),
    });
    this.socket = new FollowSocket({
      connect: deps.connect,
      stream: this.stream,
      closed: () => {
        this.healer.gapOpened();
        this.socketClosed();
      },
    });
    this.healer = new GapHealer({
      rpc: deps.rpc,
      slots: deps.slots,
      clock,
      logger,
      deletions: this.deletions,
      feed: (note, parentKey) => this.onAccount(note, parentKey),
      report: this.report,
      seen: this.seen,
      session: () => this.socket.session,
      closed: () => this.closed,
      healed: (session) => this.healed(session),
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
    return this.socket.connected;
  }

  /** Whether the stream vouches for the entries now (the status says so). */
  get healthy(): boolean {
    return (
      this.owner &&
      this.stream.mode === 'program' &&
      this.stream.subscribed &&
      this.socket.session?.healed === true &&
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
    repeat(RELOAD_EVERY_MS, () => this.followed.reload());
    repeat(JOIN_EVERY_MS, () => this.followed.join());
    // Only while the stream covers additions: a check proves what is gone, not what is new.
    repeat(Math.max(1_000, Math.floor(this.deps.freshMs / 6)), () =>
      this.healthy && (this.deps.budget?.state() ?? 'normal') === 'normal'
        ? this.backstop.round()
        : undefined,
    );
    repeat(Math.max(500, Math.floor(this.deps.leaseMs / 3)), () =>
      this.owner && this.stream.mode === 'parents' ? this.updateHotParents() : undefined,
    );
    void this.followed.reload().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const cancel of this.timers.splice(0)) cancel();
    this.retryProgram?.();
    await this.ownership.close();
    await this.socket.close();
    this.probe.stop();
    this.deps.metrics.followHealthy.set(0);
  }

  private sawSlot(slot: number): void {
    if (this.deps.slots.trusts(slot)) this.socket.session?.sawSlot(slot);
  }

  private onAccount(note: AccountNote, parentKey: string | undefined): void {
    this.heard();
    this.deps.registry?.onAccount(note);
    this.followed.route(note, parentKey);
  }

  private onLogs(note: LogsNote): void {
    this.heard();
    this.sawSlot(note.slot);
    this.seen.add(note.signature);
    this.healer.reported(note.signature);
    if (this.stream.mode === 'program') {
      this.socket.session?.expectAccounts(note, this.deps.clock.now());
    }
    this.deletions.onLogs(note);
  }

  private heard(): void {
    this.deps.metrics.followLastEvent.set(Math.floor(this.deps.clock.now() / 1000));
  }

  /**
   * The stream is open but misses what it should bring: drop the socket, the next one heals the
   * gap.
   */
  private silent(context: object, message: string): void {
    this.deps.logger.warn(context, message);
    this.socket.drop();
  }

  /** Whether a write the logs reported waited past the grace for its account notification. */
  private checkAccounts(): void {
    if (!this.stream.subscribed) return;
    const slot = this.socket.session?.overdue(this.deps.clock.now(), PROBE_GRACE_MS);
    if (slot === undefined) return;
    this.silent(
      { slot },
      'follow stream: a write the logs reported brought no account notification; reconnecting',
    );
  }

  private async acquired(): Promise<void> {
    this.deps.logger.info('follow: this worker owns the stream');
    await this.report.resume();
    this.healer.resumeFrom(this.report.lastSignature);
    this.stream.reset('program');
    this.socket.open();
  }

  private async lost(): Promise<void> {
    this.deps.logger.info('follow: this worker no longer owns the stream');
    this.probe.stop();
    this.deps.metrics.followHealthy.set(0);
    await this.socket.close();
    this.followed.forgetAll();
  }

  private onMode(mode: FollowMode): void {
    // The same socket, other subscriptions: their confirmation heals the gap again.
    const session = this.socket.session;
    if (session) session.healed = false;
    if (mode !== 'program') this.probe.stop();
    if (mode === 'parents') void this.updateHotParents();
    if (mode === 'off') {
      void this.socket.close();
      this.retryProgram = this.deps.clock.after(RETRY_PROGRAM_MS, () => {
        if (this.closed || !this.owner) return;
        this.stream.reset('program');
        this.socket.open();
      });
    }
  }

  private async updateHotParents(): Promise<void> {
    this.stream.setParents(await this.deps.hotParents());
  }

  /** Every subscription is confirmed on a new socket: heal what was missed meanwhile. */
  private onSubscribed(mode: FollowMode): void {
    const { deps } = this;
    if (mode === 'parents') {
      // As before the whole-program stream: each hot parent is read again after its gap.
      void deps.hotParents().then((parents) =>
        deps.clock.after(GAP_READ_DELAY_MS, () => {
          for (const parent of parents) deps.reread(parent, undefined);
        }),
      );
      return;
    }
    const session = this.socket.session;
    if (mode !== 'program' || !session) return;
    session.subscribedAt = deps.clock.now();
    // HTTP reads may reach a node behind the websocket's: the gap is read a little later, and at
    // the newest slot the new stream has shown by then.
    deps.clock.after(GAP_READ_DELAY_MS, () => {
      if (!this.closed && this.stream.subscribed) this.healer.start();
    });
  }

  /** A heal is over: it vouches for the stream only if its socket is still the one open. */
  private async healed(session: SocketSession | undefined): Promise<void> {
    // What the gap read is in the entries, or their re-reads marked owed, and in the registry
    // index before the stream vouches (docs/design.md, "Gaps", "Stitching").
    const marked = this.patcher.settled().then(() => this.report.marked());
    await Promise.all([marked, this.deps.registry?.settled()]);
    // A socket lost meanwhile left a gap of its own: healed only by the read that follows it.
    if (session && this.socket.session === session && this.stream.subscribed) {
      session.healed = true;
      this.probe.start();
    }
    await this.writeStatus();
  }

  /**
   * A socket closed: the next one's heal reads its gap. The status stops vouching now rather than
   * at the next beat, and says since when that heal is under way.
   */
  private socketClosed(): void {
    if (this.owner && this.stream.mode === 'program') this.report.socketClosed();
    this.writeStatus().catch((err: unknown) =>
      this.deps.logger.warn({ err: String(err) }, 'follow: status'),
    );
  }

  private async writeStatus(): Promise<void> {
    this.checkAccounts();
    const session = this.socket.session;
    await this.report.write({
      owner: this.owner,
      healthy: this.healthy,
      mode: this.stream.mode,
      gap: !session ? 'closed' : session.healed ? 'healed' : 'healing',
    });
  }
}
