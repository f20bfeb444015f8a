import type { Logger } from 'pino';
import type { FollowMode } from '../../src/core/cache/follow-status.js';
import { occasionalWarning } from '../../src/core/logger.js';
import { WS_NOTIFICATION_OUTCOME, type Metrics } from '../../src/core/metrics.js';
import { domainKey, toBase58 } from '../../src/core/sns/pda.js';
import { parseBoundedJson } from '../rpc/bounded-json.js';
import { HEAD_SLICE, headOf, NAME_PROGRAM } from './name-program.js';
import { readAccount, readLogs, type LogsNote } from './notifications.js';
import { SocketSubscriptions, type Pending, type Send } from './subscriptions.js';
import type { AccountNote, Clock } from './types.js';

/** How long a subscribe request may go unanswered before it counts as refused. */
export const SUBSCRIBE_TIMEOUT_MS = 10_000;

/**
 * What the stream subscribes to:
 * - `program`: one `programSubscribe` over the whole name program (no filter) and one
 *   `logsSubscribe` mentioning it; every write is seen, followed parents are picked in process.
 * - `parents`: a provider refused the whole-program subscription (or the logs one): a
 *   `programSubscribe` per parent given ({@link FollowStream.setParents}, the hottest), with a
 *   `memcmp` on the parent at offset 0, as before the whole-program stream.
 * - `off`: every subscription refused: the clock keeps entries fresh.
 */

export type FollowStreamOptions = {
  clock: Clock;
  metrics: Metrics;
  logger: Logger;
  /** Every account notification, synchronously and in order (the patcher coalesces). */
  onAccount: (note: AccountNote, parentKey: string | undefined) => void;
  /** Every logs notification of a transaction, in order. */
  onLogs: (note: LogsNote) => void;
  /**
   * The subscriptions of the mode are all confirmed on a socket (after each reconnect too): what
   * happened while there was none is unknown, a gap to heal.
   */
  onSubscribed: (mode: FollowMode) => void;
  /** The mode changed after a refusal; parents refused in `parents` mode come one by one. */
  onMode: (mode: FollowMode) => void;
  /** A parent's own subscription was refused (`parents` mode): it is left to the clock. */
  onParentRefused?: (parent: string) => void;
};

/**
 * The messages of the follower's one websocket, apart from the socket (./ws-connection.ts runs
 * that): which subscriptions to ask for in which mode, their answers (kept per socket in
 * ./subscriptions.ts), and the notifications, each checked (./notifications.ts: a slot must be a
 * slot, a pubkey a string, data base64 of the sliced length at most) before it reaches the
 * follower. Refusals move the mode down (program, then parents, then off; docs/design.md,
 * "Freshness"). No I/O of its own: tests drive it frame by frame.
 */
export class FollowStream {
  private modeNow: FollowMode = 'program';
  private nextId = 1;
  /** The open socket's subscriptions; none while no socket is open. */
  private socket: SocketSubscriptions | undefined;
  /** `parents` mode: the parents wanted, each with its key (base58). */
  private readonly parents = new Map<string, string>();
  /** `parents` mode: the provider refused `logsSubscribe` (additions still come per parent). */
  private logsRefused = false;
  private readonly warnRefused: ReturnType<typeof occasionalWarning>;

  constructor(private readonly opts: FollowStreamOptions) {
    this.warnRefused = occasionalWarning(opts.logger, 60_000, () => opts.clock.now());
  }

  get mode(): FollowMode {
    return this.modeNow;
  }

  /** Whether the mode's subscriptions are all confirmed on an open socket. */
  get subscribed(): boolean {
    return this.socket?.confirmed === true;
  }

  /**
   * Sets the mode (the follower tries `program` again now and then after a fall back). Takes
   * effect on the next socket; the caller reconnects.
   */
  reset(mode: FollowMode): void {
    this.modeNow = mode;
  }

  /**
   * The parents followed one subscription each in `parents` mode (the hottest, as ranked by the
   * caller). Subscribes the new ones and unsubscribes the others at once on an open socket.
   */
  setParents(parents: readonly string[]): void {
    const want = new Set(parents);
    const socket = this.socket;
    for (const parent of this.parents.keys()) {
      if (want.has(parent)) continue;
      this.parents.delete(parent);
      const sub = socket?.parents.get(parent)?.sub;
      socket?.parents.delete(parent);
      if (sub !== undefined) socket?.unsubscribeAccount(sub);
    }
    for (const parent of want) {
      if (this.parents.has(parent)) continue;
      const key = toBase58(domainKey(parent));
      this.parents.set(parent, key);
      if (socket && this.modeNow === 'parents') this.subscribeParent(socket, parent, key);
    }
    this.countSubscriptions();
  }

  /** A socket opened: subscribe what the mode needs through `send`. */
  opened(send: Send): void {
    this.socket = new SocketSubscriptions(send, () => this.nextId++);
    this.subscribeAll(this.socket);
  }

  /** The socket closed: every subscription is gone. */
  closed(): void {
    this.socket = undefined;
    this.countSubscriptions();
  }

  /** Requests unanswered for {@link SUBSCRIBE_TIMEOUT_MS} are refusals; call it now and then. */
  tick(): void {
    const now = this.opts.clock.now();
    const pending = this.socket?.pending;
    // A refusal may lower the mode meanwhile: the requests of the mode left are still refusals.
    for (const [id, req] of [...(pending ?? [])]) {
      if (now - req.at < SUBSCRIBE_TIMEOUT_MS) continue;
      pending?.delete(id);
      this.refused(req, 'unanswered');
    }
  }

  /** One text frame from the socket (bytes are counted by the connection). */
  receive(bytes: Buffer): void {
    let message: unknown;
    try {
      message = parseBoundedJson(bytes);
    } catch {
      this.warnRefused({}, 'RPC websocket sent a message that is not bounded JSON (ignored)');
      return;
    }
    if (typeof message !== 'object' || message === null) return;
    const msg = message as {
      id?: unknown;
      result?: unknown;
      error?: { message?: unknown };
      method?: unknown;
      params?: { subscription?: unknown; result?: unknown };
    };
    if (typeof msg.id === 'number') this.answered(msg.id, msg.result, msg.error);
    else if (msg.method === 'programNotification') this.account(msg.params);
    else if (msg.method === 'logsNotification') this.logs(msg.params);
  }

  private subscribeAll(socket: SocketSubscriptions): void {
    switch (this.modeNow) {
      case 'program':
        socket.request(
          'programSubscribe',
          [NAME_PROGRAM, { encoding: 'base64', commitment: 'confirmed', dataSlice: HEAD_SLICE }],
          { kind: 'program', at: this.opts.clock.now() },
        );
        this.subscribeLogs(socket);
        return;
      case 'parents':
        for (const [parent, key] of this.parents) this.subscribeParent(socket, parent, key);
        if (!this.logsRefused) this.subscribeLogs(socket);
        return;
      case 'off':
        return;
    }
  }

  private subscribeLogs(socket: SocketSubscriptions): void {
    socket.request('logsSubscribe', [{ mentions: [NAME_PROGRAM] }, { commitment: 'confirmed' }], {
      kind: 'logs',
      at: this.opts.clock.now(),
    });
  }

  private subscribeParent(socket: SocketSubscriptions, parent: string, key: string): void {
    const requested = socket.request(
      'programSubscribe',
      [
        NAME_PROGRAM,
        {
          encoding: 'base64',
          commitment: 'confirmed',
          filters: [{ memcmp: { offset: 0, bytes: key } }],
          dataSlice: HEAD_SLICE,
        },
      ],
      { kind: 'parent', parent, at: this.opts.clock.now() },
    );
    socket.parents.set(parent, { requested });
  }

  private answered(id: number, result: unknown, error: { message?: unknown } | undefined): void {
    const socket = this.socket;
    const req = socket?.pending.get(id);
    if (!socket || !req) return;
    socket.pending.delete(id);
    if (!Number.isSafeInteger(result)) {
      const text = typeof error?.message === 'string' ? error.message.slice(0, 200) : 'no id';
      this.refused(req, text);
      return;
    }
    const sub = result as number;
    if (req.kind === 'program') socket.accounts.set(sub, '');
    else if (req.kind === 'logs') socket.logs = sub;
    else {
      const key = this.parents.get(req.parent);
      const mine = socket.parents.get(req.parent);
      if (key === undefined || mine?.requested !== id || this.modeNow !== 'parents') {
        // Let go of, or the mode changed, while the request was under way.
        socket.request('programUnsubscribe', [sub]);
        return;
      }
      mine.sub = sub;
      socket.accounts.set(sub, key);
    }
    this.countSubscriptions();
    this.checkConfirmed();
  }

  /** Whether every subscription the mode asked for is confirmed; tells the follower once. */
  private checkConfirmed(): void {
    const socket = this.socket;
    if (!socket || socket.confirmed) return;
    const logs = socket.logs !== undefined || (this.modeNow === 'parents' && this.logsRefused);
    if (socket.pending.size > 0 || !logs) return;
    if (this.modeNow === 'program' && socket.accounts.size === 0) return;
    socket.confirmed = true;
    this.opts.onSubscribed(this.modeNow);
  }

  private refused(req: Pending, why: string): void {
    const { logger } = this.opts;
    if (req.kind === 'parent') {
      if (this.socket?.parents.get(req.parent)?.requested === undefined) return;
      logger.warn({ parent: req.parent, err: why }, 'programSubscribe refused: left to the clock');
      this.parents.delete(req.parent);
      this.socket.parents.delete(req.parent);
      this.opts.onParentRefused?.(req.parent);
      if (this.parents.size === 0) this.fallTo('off', why);
      else this.checkConfirmed();
      return;
    }
    if (this.modeNow === 'off') return;
    if (req.kind === 'logs' && this.modeNow === 'parents') {
      // Per parent, additions come without logs; deletions are left to the clock's scans.
      this.logsRefused = true;
      logger.warn({ err: why }, 'logsSubscribe refused: deletions left to the clock');
      this.checkConfirmed();
      return;
    }
    this.fallTo(this.modeNow === 'program' ? 'parents' : 'off', `${req.kind}: ${why}`);
  }

  /** Drops every subscription of this socket and subscribes as `mode` wants. */
  private fallTo(mode: FollowMode, why: string): void {
    this.opts.logger.warn({ from: this.modeNow, to: mode, err: why }, 'follow stream mode lowered');
    this.socket?.unsubscribeAll();
    this.socket = this.socket?.renewed();
    this.modeNow = mode;
    this.countSubscriptions();
    this.opts.onMode(mode);
    if (this.socket) this.subscribeAll(this.socket);
  }

  private account(params: { subscription?: unknown; result?: unknown } | undefined): void {
    const sub = params?.subscription;
    const key = typeof sub === 'number' ? this.socket?.accounts.get(sub) : undefined;
    if (key === undefined) return;
    const read = readAccount(params?.result);
    if (typeof read === 'string') {
      this.opts.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.refused });
      this.warnRefused({ err: read }, `RPC websocket notification refused: ${read}`);
      return;
    }
    // A provider that ignored the `dataSlice` sent the whole account: its first bytes are the
    // head all the same (the slice starts at 0), and a longer text still reads as cut. Only the
    // head's characters are decoded: a subarray of the whole would keep all of it alive in the
    // replay buffer and the patcher's queues (10,000 of 45 KB accounts: 450 MB).
    const head = headOf(read.data);
    this.opts.onAccount(
      { slot: read.slot, pubkey: read.pubkey, head },
      key === '' ? undefined : key,
    );
  }

  private logs(params: { subscription?: unknown; result?: unknown } | undefined): void {
    const logsSub = this.socket?.logs;
    if (logsSub === undefined || params?.subscription !== logsSub) return;
    const read = readLogs(params?.result);
    if (typeof read === 'string') {
      this.opts.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.refused });
      this.warnRefused({}, `RPC websocket logs notification refused: ${read}`);
      return;
    }
    this.opts.onLogs(read);
  }

  private countSubscriptions(): void {
    this.opts.metrics.wsSubscriptions.set(this.socket?.count ?? 0);
  }
}
