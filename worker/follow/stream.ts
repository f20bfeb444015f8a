import type { Logger } from 'pino';
import type { FollowMode } from '../../src/core/cache/follow-status.js';
import { occasionalWarning } from '../../src/core/logger.js';
import { WS_NOTIFICATION_OUTCOME, type Metrics } from '../../src/core/metrics.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import { domainKey, NAME_PROGRAM_ID, toBase58 } from '../../src/core/sns/pda.js';
import { parseBoundedJson } from '../rpc/bounded-json.js';
import { SCAN_SLICE } from '../sns/discovery-decode.js';
import type { AccountNote, Clock } from './types.js';

export const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/**
 * The `dataSlice` of the stream's `programSubscribe`: from byte 0 (the parent, which the
 * whole-program subscription filters on in process) to the end of the scan's slice, so the rest
 * is exactly what a scan classifies (worker/sns/change.ts). 130 bytes, 176 base64 characters.
 */
export const HEAD_SLICE = Object.freeze({
  offset: 0,
  length: SCAN_SLICE.offset + SCAN_SLICE.length,
});

/** The {@link SCAN_SLICE} part of a head, as worker/sns/change.ts reads it. */
export const scanSliceOf = (head: Buffer): Buffer => head.subarray(SCAN_SLICE.offset);

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

/** A `logsNotification`: one transaction that mentions the name program. */
export type LogsNote = { slot: number; signature: string; failed: boolean; logs: string[] };

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

type Request =
  | { kind: 'program'; at: number }
  | { kind: 'logs'; at: number }
  | { kind: 'parent'; parent: string; at: number }
  | { kind: 'unsubscribe'; at: number };

type Send = (text: string) => void;

/**
 * The messages of the follower's one websocket, apart from the socket (./ws-connection.ts runs
 * that): which subscriptions to ask for in which mode, their answers, and the notifications,
 * each checked (a slot must be a slot, a pubkey a string, data base64 of the sliced length at
 * most) before it reaches the follower. Refusals move the mode down (program, then parents, then
 * off; docs/design.md, "Freshness"). No I/O of its own: tests drive it frame by frame.
 */
export class FollowStream {
  private modeNow: FollowMode = 'program';
  private send: Send | undefined;
  private nextId = 1;
  private readonly requests = new Map<number, Request>();
  /** Subscription id -> the parent's key for `parents` mode, '' for the whole program. */
  private readonly accountSubs = new Map<number, string>();
  private logsSub: number | undefined;
  /** `parents` mode: parent -> its key (base58) and subscription once confirmed. */
  private readonly parentSubs = new Map<
    string,
    { key: string; sub?: number; requested?: number }
  >();
  private confirmed = false;
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
    return this.send !== undefined && this.confirmed;
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
    for (const [parent, state] of this.parentSubs) {
      if (want.has(parent)) continue;
      this.parentSubs.delete(parent);
      if (state.sub !== undefined) {
        this.accountSubs.delete(state.sub);
        this.request('programUnsubscribe', [state.sub], { kind: 'unsubscribe', at: 0 });
      }
    }
    for (const parent of want) {
      if (this.parentSubs.has(parent)) continue;
      const state = { key: toBase58(domainKey(parent)) };
      this.parentSubs.set(parent, state);
      if (this.send && this.modeNow === 'parents') this.subscribeParent(parent, state);
    }
    this.countSubscriptions();
  }

  /** A socket opened: subscribe what the mode needs through `send`. */
  opened(send: Send): void {
    this.send = send;
    this.confirmed = false;
    this.subscribeAll();
  }

  /** The socket closed: every subscription is gone. */
  closed(): void {
    this.send = undefined;
    this.confirmed = false;
    this.requests.clear();
    this.accountSubs.clear();
    this.logsSub = undefined;
    for (const state of this.parentSubs.values()) {
      state.sub = undefined;
      state.requested = undefined;
    }
    this.countSubscriptions();
  }

  /** Requests unanswered for {@link SUBSCRIBE_TIMEOUT_MS} are refusals; call it now and then. */
  tick(): void {
    const now = this.opts.clock.now();
    for (const [id, req] of [...this.requests]) {
      if (req.kind === 'unsubscribe' || now - req.at < SUBSCRIBE_TIMEOUT_MS) continue;
      this.requests.delete(id);
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

  private subscribeAll(): void {
    switch (this.modeNow) {
      case 'program':
        this.request(
          'programSubscribe',
          [NAME_PROGRAM, { encoding: 'base64', commitment: 'confirmed', dataSlice: HEAD_SLICE }],
          { kind: 'program', at: this.opts.clock.now() },
        );
        this.subscribeLogs();
        return;
      case 'parents':
        for (const [parent, state] of this.parentSubs) this.subscribeParent(parent, state);
        if (!this.logsRefused) this.subscribeLogs();
        return;
      case 'off':
        return;
    }
  }

  private subscribeLogs(): void {
    this.request('logsSubscribe', [{ mentions: [NAME_PROGRAM] }, { commitment: 'confirmed' }], {
      kind: 'logs',
      at: this.opts.clock.now(),
    });
  }

  private subscribeParent(parent: string, state: { key: string; requested?: number }): void {
    state.requested = this.request(
      'programSubscribe',
      [
        NAME_PROGRAM,
        {
          encoding: 'base64',
          commitment: 'confirmed',
          filters: [{ memcmp: { offset: 0, bytes: state.key } }],
          dataSlice: HEAD_SLICE,
        },
      ],
      { kind: 'parent', parent, at: this.opts.clock.now() },
    );
  }

  private request(method: string, params: unknown[], req: Request): number {
    const id = this.nextId++;
    if (!this.send) return id;
    this.requests.set(id, req);
    this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return id;
  }

  private answered(id: number, result: unknown, error: { message?: unknown } | undefined): void {
    const req = this.requests.get(id);
    if (!req) return;
    this.requests.delete(id);
    if (req.kind === 'unsubscribe') return;
    if (!Number.isSafeInteger(result)) {
      const text = typeof error?.message === 'string' ? error.message.slice(0, 200) : 'no id';
      this.refused(req, text);
      return;
    }
    const sub = result as number;
    if (req.kind === 'program') this.accountSubs.set(sub, '');
    else if (req.kind === 'logs') this.logsSub = sub;
    else {
      const state = this.parentSubs.get(req.parent);
      if (!state || state.requested !== id || this.modeNow !== 'parents') {
        // Let go of, or the mode changed, while the request was under way.
        this.request('programUnsubscribe', [sub], { kind: 'unsubscribe', at: 0 });
        return;
      }
      state.sub = sub;
      this.accountSubs.set(sub, state.key);
    }
    this.countSubscriptions();
    this.checkConfirmed();
  }

  /** Whether every subscription the mode asked for is confirmed; tells the follower once. */
  private checkConfirmed(): void {
    if (this.confirmed || !this.send) return;
    const pending = [...this.requests.values()].some((r) => r.kind !== 'unsubscribe');
    const logs = this.logsSub !== undefined || (this.modeNow === 'parents' && this.logsRefused);
    if (pending || !logs) return;
    if (this.modeNow === 'program' && this.accountSubs.size === 0) return;
    this.confirmed = true;
    this.opts.onSubscribed(this.modeNow);
  }

  private refused(req: Exclude<Request, { kind: 'unsubscribe' }>, why: string): void {
    const { logger } = this.opts;
    if (req.kind === 'parent') {
      const state = this.parentSubs.get(req.parent);
      if (state?.requested === undefined) return;
      logger.warn({ parent: req.parent, err: why }, 'programSubscribe refused: left to the clock');
      this.parentSubs.delete(req.parent);
      this.opts.onParentRefused?.(req.parent);
      if (this.parentSubs.size === 0) this.fallTo('off', why);
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
    for (const sub of this.accountSubs.keys()) {
      this.request('programUnsubscribe', [sub], { kind: 'unsubscribe', at: 0 });
    }
    if (this.logsSub !== undefined) {
      this.request('logsUnsubscribe', [this.logsSub], { kind: 'unsubscribe', at: 0 });
    }
    for (const [id, req] of [...this.requests]) {
      if (req.kind !== 'unsubscribe') this.requests.delete(id);
    }
    this.accountSubs.clear();
    this.logsSub = undefined;
    for (const state of this.parentSubs.values()) {
      state.sub = undefined;
      state.requested = undefined;
    }
    this.modeNow = mode;
    this.confirmed = false;
    this.countSubscriptions();
    this.opts.onMode(mode);
    if (this.send) this.subscribeAll();
  }

  private account(params: { subscription?: unknown; result?: unknown } | undefined): void {
    const sub = params?.subscription;
    const key = typeof sub === 'number' ? this.accountSubs.get(sub) : undefined;
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
    if (params?.subscription !== this.logsSub || this.logsSub === undefined) return;
    const r = params?.result as
      | {
          context?: { slot?: unknown };
          value?: { signature?: unknown; err?: unknown; logs?: unknown };
        }
      | undefined;
    const slot = r?.context?.slot;
    const signature = r?.value?.signature;
    const logs = r?.value?.logs;
    if (!isSlot(slot) || typeof signature !== 'string' || signature.length > 100) {
      this.opts.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.refused });
      this.warnRefused({}, 'RPC websocket logs notification refused: no slot or signature');
      return;
    }
    const lines = Array.isArray(logs) ? logs.filter((l): l is string => typeof l === 'string') : [];
    this.opts.onLogs({ slot, signature, failed: r?.value?.err != null, logs: lines });
  }

  private countSubscriptions(): void {
    this.opts.metrics.wsSubscriptions.set(
      this.accountSubs.size + (this.logsSub === undefined ? 0 : 1),
    );
  }
}

/** Base64 characters of the head: 132 bytes, one more than the slice needs' last group. */
const HEAD_CHARS = Math.ceil(HEAD_SLICE.length / 3) * 4;

/**
 * The first {@link HEAD_SLICE} bytes of base64 `data` (fewer when it is shorter), decoding only
 * those characters, in a buffer of their own. Not a view into Buffer's shared pool: a kept head
 * would pin the whole slab, and the slab's size differs between Node lines (8 KiB, 64 KiB).
 */
export function headOf(data: string): Buffer {
  const decoded = Buffer.from(data.slice(0, HEAD_CHARS), 'base64');
  const head = Buffer.allocUnsafeSlow(Math.min(decoded.length, HEAD_SLICE.length));
  decoded.copy(head, 0, 0, head.length);
  return head;
}

/**
 * The slot, account and base64 data of a notification's `result`, or what is wrong with it. A slot
 * must be a slot ({@link isSlot}): `1e309`, `2^63`, `-1`, `1.5` or `"7"` would otherwise be stored
 * (docs/design.md, "Freshness").
 */
export function readAccount(
  result: unknown,
): { slot: number; pubkey: string; data: string } | string {
  const r = result as
    | { context?: { slot?: unknown }; value?: { pubkey?: unknown; account?: { data?: unknown } } }
    | undefined;
  const slot = r?.context?.slot;
  const pubkey = r?.value?.pubkey;
  const data = r?.value?.account?.data;
  if (!isSlot(slot)) return 'its slot is not a non-negative safe integer';
  if (typeof pubkey !== 'string' || pubkey.length > 64) return 'no pubkey';
  if (!Array.isArray(data) || typeof data[0] !== 'string' || data[1] !== 'base64') {
    return 'no base64 data';
  }
  return { slot, pubkey, data: data[0] };
}
