import { setTimeout as sleep } from 'node:timers/promises';
import pRetry from 'p-retry';
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { occasionalWarning } from '../../core/logger.js';
import { WS_NOTIFICATION_OUTCOME, type Metrics } from '../../core/metrics.js';
import { parseBoundedJson } from '../rpc/bounded-json.js';
import type { CostTable } from '../rpc/client.js';
import { CreditMeter } from '../rpc/credits.js';
import { wsUpgradeRefusedMessage } from '../rpc/ws-url-hint.js';
import { isSlot } from '../../core/rpc/slot.js';
import { SCAN_SLICE } from '../sns/discovery-decode.js';
import { domainKey, NAME_PROGRAM_ID, toBase58 } from '../../core/sns/pda.js';

const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/**
 * Largest websocket message accepted. A notification carries one account sliced to
 * {@link SCAN_SLICE} (about 500 bytes of JSON); a bigger frame is not one we asked for, and
 * ws closes the socket (1009) rather than buffer it.
 */
export const MAX_FRAME_BYTES = 64 * 1024;

/** A notification about an account under a watched parent. */
export type AccountNotification = {
  parent: string;
  /** A slot ({@link isSlot}); whether it is believable is the watcher's to judge. */
  slot: number;
  pubkey: string;
  /**
   * The account's data as {@link SCAN_SLICE} cuts it (the subscription's `dataSlice`); undefined when the
   * provider sent more than was sliced (it ignores `dataSlice`): the change is then unknown.
   */
  slice: Buffer | undefined;
};

export type ProgramSubscriberOptions = {
  url: string;
  metrics: Metrics;
  logger: Logger;
  /** `RPC_CREDITS`: `wsConnection` per connection opened, `wsMegabyte` per 10^6 bytes received. */
  costs: CostTable;
  /** Where those credits are counted (the daily budget's counter too); the metric only when absent. */
  credits?: CreditMeter;
  /** Keep-alive ping interval; a socket with nothing received for two of them is dropped. */
  pingMs: number;
  /**
   * Called for every notification, in the order received, and synchronously (nothing may pile up
   * here: the watcher coalesces). A notification for a watched subscription that is not well formed
   * (its slot no non-negative safe integer, no pubkey, no base64 data) is dropped instead, counted
   * as `refused` in `sns_ws_notifications_total`, and logged now and then.
   */
  onNotification: (note: AccountNotification) => void;
  /**
   * Called when a parent's subscription is confirmed: when it is first watched, and again after
   * every reconnect (a gap: what changed meanwhile is unknown, so the parent must be read again).
   */
  onSubscribed: (parent: string) => void;
  /** Called when the socket closes: every subscription is gone until `onSubscribed` again. */
  onDisconnected: () => void;
  /**
   * Called when the RPC refuses a parent's `programSubscribe`, or leaves it unanswered for
   * {@link SUBSCRIBE_TIMEOUT_MS}: the parent is no longer watched here.
   */
  onRefused: (parent: string) => void;
  /** First reconnect delay in milliseconds; doubles per failed attempt, randomised (p-retry). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
};

type Watched = {
  parentKey: string;
  subscription?: number;
  requestId?: number;
  /** When the pending subscribe request was sent. */
  requestedAt?: number;
};

/** How long a `programSubscribe` may go unanswered before the parent counts as refused. */
export const SUBSCRIBE_TIMEOUT_MS = 10_000;

/**
 * A socket that lived less than this before it closed counts as a flap: the next one waits longer
 * (a provider refusing subscriptions, or a proxy cutting every socket, would otherwise be reopened
 * at once, each time followed by a scan of every watched parent).
 */
const FLAP_MS = 60_000;

/**
 * One websocket to the configured RPC carrying a `programSubscribe` per watched parent: the name
 * program, a `memcmp` on the parent at offset 0 (subdomain name accounts and their reverse records
 * both name the parent there), the scan's `dataSlice`, at `confirmed` (docs/design.md,
 * "Freshness"). Keeps the socket alive with protocol pings, reconnects with exponential back-off
 * and jitter (p-retry), and subscribes every watched parent again on each new socket.
 *
 * The RPC is the configured one (overrides never subscribe), but its frames are still bounded:
 * {@link MAX_FRAME_BYTES} per message and the JSON bounds of every RPC reply.
 */
export class ProgramSubscriber {
  private socket: WebSocket | undefined;
  private readonly watched = new Map<string, Watched>();
  private readonly bySubscription = new Map<number, string>();
  private readonly byRequest = new Map<number, { parent: string; unsubscribe: boolean }>();
  private nextId = 1;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private lastHeard = 0;
  private flaps = 0;
  private warnedMalformed = false;
  private readonly warnRefused: ReturnType<typeof occasionalWarning>;
  private readonly credits: CreditMeter;

  constructor(private readonly opts: ProgramSubscriberOptions) {
    this.warnRefused = occasionalWarning(opts.logger);
    this.credits = opts.credits ?? new CreditMeter({ metrics: opts.metrics });
  }

  /** Whether a socket is open. */
  get connected(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Parents watched, subscribed or waiting for a socket. */
  get parents(): string[] {
    return [...this.watched.keys()];
  }

  /** Opens the socket and keeps it open until {@link close}; returns at once. */
  start(): void {
    this.running ??= this.run();
  }

  /**
   * Watches `parent` (a normalized label): subscribes now when a socket is open, else on the next
   * one. `onSubscribed(parent)` follows once the RPC confirms. Idempotent.
   */
  watch(parent: string): void {
    if (this.watched.has(parent)) return;
    const entry: Watched = { parentKey: toBase58(domainKey(parent)) };
    this.watched.set(parent, entry);
    if (this.connected) this.subscribe(parent, entry);
  }

  /** Stops watching `parent`, unsubscribing when its subscription is open. */
  unwatch(parent: string): void {
    const entry = this.watched.get(parent);
    if (!entry) return;
    this.watched.delete(parent);
    if (entry.subscription !== undefined) {
      this.bySubscription.delete(entry.subscription);
      this.send('programUnsubscribe', [entry.subscription], { parent, unsubscribe: true });
    }
    this.countSubscriptions();
  }

  /** Closes the socket and stops reconnecting. */
  async close(): Promise<void> {
    this.stopping.abort();
    this.socket?.terminate();
    await this.running;
  }

  private async run(): Promise<void> {
    const { signal } = this.stopping;
    while (!signal.aborted) {
      try {
        const socket = await pRetry(() => this.open(signal), {
          retries: Number.POSITIVE_INFINITY,
          factor: 2,
          minTimeout: this.opts.minBackoffMs ?? 250,
          maxTimeout: this.opts.maxBackoffMs ?? 30_000,
          randomize: true,
          signal,
          onFailedAttempt: ({ error }) => {
            this.opts.metrics.wsReconnects.inc();
            this.opts.logger.warn({ err: error.message }, 'RPC websocket could not open');
          },
        });
        if (signal.aborted) {
          socket.terminate();
          break;
        }
        const openedAt = Date.now();
        await this.serve(socket);
        this.flaps = Date.now() - openedAt < FLAP_MS ? this.flaps + 1 : 0;
        if (signal.aborted) break;
        this.opts.metrics.wsReconnects.inc();
        if (this.flaps > 0) {
          const base = Math.min(this.opts.maxBackoffMs ?? 30_000, 250 * 2 ** this.flaps);
          await sleep(base / 2 + Math.random() * (base / 2), undefined, { signal });
        }
      } catch {
        if (signal.aborted) break;
      }
    }
  }

  /** Opens one socket; resolves once it is open. A close() meanwhile ends it. */
  private open(signal: AbortSignal): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.opts.url, {
        maxPayload: MAX_FRAME_BYTES,
        handshakeTimeout: 10_000,
        perMessageDeflate: false,
      });
      // Whatever the socket does after this attempt is over, an error must not crash the process.
      socket.on('error', () => undefined);
      const fail = (err: Error) => {
        signal.removeEventListener('abort', abort);
        socket.removeAllListeners();
        socket.on('error', () => undefined);
        socket.terminate();
        reject(err);
      };
      const abort = () => fail(new Error('closed while connecting'));
      signal.addEventListener('abort', abort, { once: true });
      socket.once('error', fail);
      socket.once('unexpected-response', (_req, res) =>
        fail(new Error(wsUpgradeRefusedMessage(this.opts.url, res.statusCode))),
      );
      socket.once('open', () => {
        signal.removeEventListener('abort', abort);
        socket.removeAllListeners();
        socket.on('error', () => undefined);
        resolve(socket);
      });
    });
  }

  /** Subscribes every watched parent on `socket` and handles it until it closes. */
  private serve(socket: WebSocket): Promise<void> {
    const { metrics, costs } = this.opts;
    this.socket = socket;
    metrics.wsConnected.set(1);
    this.credits.spend('wsConnection', 'default', costs['wsConnection'] ?? 0);
    this.lastHeard = Date.now();
    for (const [parent, entry] of this.watched) this.subscribe(parent, entry);
    this.warnedMalformed = false;
    const ping = setInterval(() => {
      this.expireRequests();
      if (Date.now() - this.lastHeard > 2 * this.opts.pingMs) {
        this.opts.logger.warn('RPC websocket silent for two pings: reopening it');
        socket.terminate();
        return;
      }
      socket.ping();
    }, this.opts.pingMs);
    return new Promise((resolve) => {
      socket.on('pong', () => (this.lastHeard = Date.now()));
      socket.on('message', (data: RawData, isBinary) => this.receive(data, isBinary));
      socket.on('error', (err) =>
        this.opts.logger.warn({ err: err.message }, 'RPC websocket error'),
      );
      socket.on('close', () => {
        clearInterval(ping);
        this.socket = undefined;
        this.bySubscription.clear();
        this.byRequest.clear();
        for (const entry of this.watched.values()) {
          entry.subscription = undefined;
          entry.requestId = undefined;
          entry.requestedAt = undefined;
        }
        metrics.wsConnected.set(0);
        this.countSubscriptions();
        this.opts.onDisconnected();
        resolve();
      });
    });
  }

  /** Subscribe requests unanswered for {@link SUBSCRIBE_TIMEOUT_MS}: refused. */
  private expireRequests(): void {
    const now = Date.now();
    for (const [parent, entry] of [...this.watched]) {
      if (entry.subscription !== undefined || entry.requestedAt === undefined) continue;
      if (now - entry.requestedAt < SUBSCRIBE_TIMEOUT_MS) continue;
      this.opts.logger.warn({ parent }, 'programSubscribe unanswered: left to the clock');
      this.watched.delete(parent);
      this.opts.onRefused(parent);
    }
  }

  private subscribe(parent: string, entry: Watched): void {
    entry.requestedAt = Date.now();
    entry.requestId = this.send(
      'programSubscribe',
      [
        NAME_PROGRAM,
        {
          encoding: 'base64',
          commitment: 'confirmed',
          filters: [{ memcmp: { offset: 0, bytes: entry.parentKey } }],
          dataSlice: SCAN_SLICE,
        },
      ],
      { parent, unsubscribe: false },
    );
  }

  private send(
    method: string,
    params: unknown[],
    request: { parent: string; unsubscribe: boolean },
  ): number {
    const id = this.nextId++;
    this.byRequest.set(id, request);
    this.socket?.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return id;
  }

  private receive(data: RawData, isBinary: boolean): void {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    this.lastHeard = Date.now();
    this.opts.metrics.wsReceivedBytes.inc(bytes.length);
    this.credits.spend(
      'wsMegabyte',
      'default',
      (bytes.length / 1e6) * (this.opts.costs['wsMegabyte'] ?? 0),
    );
    if (isBinary) return;
    let message: unknown;
    try {
      message = parseBoundedJson(bytes);
    } catch {
      if (!this.warnedMalformed) {
        this.warnedMalformed = true;
        this.opts.logger.warn('RPC websocket sent a message that is not bounded JSON (ignored)');
      }
      return;
    }
    if (typeof message !== 'object' || message === null) return;
    const msg = message as {
      id?: unknown;
      result?: unknown;
      error?: { code?: unknown; message?: unknown };
      method?: unknown;
      params?: { subscription?: unknown; result?: unknown };
    };
    if (typeof msg.id === 'number') this.answered(msg.id, msg.result, msg.error);
    else if (msg.method === 'programNotification') this.notified(msg.params);
  }

  /** A reply to a subscribe or unsubscribe request. */
  private answered(id: number, result: unknown, error: unknown): void {
    const request = this.byRequest.get(id);
    if (!request) return;
    this.byRequest.delete(id);
    if (request.unsubscribe) return;
    const entry = this.watched.get(request.parent);
    if (!entry || entry.requestId !== id) {
      // Unwatched while the request was under way: leave nothing subscribed behind.
      if (typeof result === 'number') {
        this.send('programUnsubscribe', [result], { parent: request.parent, unsubscribe: true });
      }
      return;
    }
    if (typeof result !== 'number') {
      const text = (error as { message?: unknown } | undefined)?.message;
      this.opts.logger.warn(
        { parent: request.parent, err: typeof text === 'string' ? text.slice(0, 200) : 'no id' },
        'programSubscribe refused: left to the clock',
      );
      this.watched.delete(request.parent);
      this.opts.onRefused(request.parent);
      return;
    }
    entry.subscription = result;
    this.bySubscription.set(result, request.parent);
    this.countSubscriptions();
    this.opts.onSubscribed(request.parent);
  }

  private notified(params: { subscription?: unknown; result?: unknown } | undefined): void {
    const parent =
      typeof params?.subscription === 'number'
        ? this.bySubscription.get(params.subscription)
        : undefined;
    if (parent === undefined) return;
    const read = readNotification(params?.result);
    if (typeof read === 'string') {
      this.opts.metrics.wsNotifications.inc({ outcome: WS_NOTIFICATION_OUTCOME.refused });
      this.warnRefused({ parent }, `RPC websocket notification refused: ${read}`);
      return;
    }
    const slice = Buffer.from(read.data, 'base64');
    this.opts.onNotification({
      parent,
      slot: read.slot,
      pubkey: read.pubkey,
      slice: slice.length > SCAN_SLICE.length ? undefined : slice,
    });
  }

  private countSubscriptions(): void {
    this.opts.metrics.wsSubscriptions.set(this.bySubscription.size);
  }
}

/**
 * The slot, account and base64 data of a notification's `result`, or what is wrong with it. A slot
 * must be a slot ({@link isSlot}): `1e309`, `2^63`, `-1`, `1.5` or `"7"` would otherwise be stored
 * in the entry (docs/design.md, "Freshness").
 */
function readNotification(
  result: unknown,
): { slot: number; pubkey: string; data: string } | string {
  const r = result as
    | { context?: { slot?: unknown }; value?: { pubkey?: unknown; account?: { data?: unknown } } }
    | undefined;
  const slot = r?.context?.slot;
  const pubkey = r?.value?.pubkey;
  const data = r?.value?.account?.data;
  if (!isSlot(slot)) return 'its slot is not a non-negative safe integer';
  if (typeof pubkey !== 'string') return 'no pubkey';
  if (!Array.isArray(data) || typeof data[0] !== 'string' || data[1] !== 'base64') {
    return 'no base64 data';
  }
  return { slot, pubkey, data: data[0] };
}
