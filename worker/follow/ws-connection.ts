import { setTimeout as sleep } from 'node:timers/promises';
import pRetry from 'p-retry';
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import type { Metrics } from '../../src/core/metrics.js';
import { wsCostOf, type CostTable } from '../rpc/client.js';
import { CreditMeter } from '../rpc/credits.js';
import { wsUpgradeRefusedMessage } from '../rpc/ws-url-hint.js';

/**
 * Largest websocket message accepted. An account notification carries 130 bytes of data (about
 * 600 bytes of JSON), a logs notification a transaction's log lines (a few KiB); a bigger frame is
 * not one we asked for, and ws closes the socket (1009) rather than buffer it.
 */
const MAX_FRAME_BYTES = 64 * 1024;

/**
 * A socket that lived less than this before it closed counts as a flap: the next one waits longer
 * (a provider refusing subscriptions, or a proxy cutting every socket, would otherwise be reopened
 * at once, each time followed by a gap read).
 */
const FLAP_MS = 60_000;

export type WsConnectionOptions = {
  url: string;
  metrics: Metrics;
  logger: Logger;
  /** `RPC_CREDITS`: `wsConnection` per connection opened, `wsMegabyte` per 10^6 bytes received. */
  costs: CostTable;
  /** Where those credits are counted (the daily budget's counter too); the metric only when absent. */
  credits?: CreditMeter;
  /** Keep-alive ping interval; a socket with nothing received for two of them is dropped. */
  pingMs: number;
  /** A socket is open: `send` writes a text frame on it. */
  onOpen: (send: (text: string) => void) => void;
  /** One text frame. */
  onMessage: (bytes: Buffer) => void;
  /** The socket closed (every subscription on it is gone). */
  onClose: () => void;
  /** Every ping interval while a socket is open. */
  onTick?: () => void;
  minBackoffMs?: number;
  maxBackoffMs?: number;
};

/**
 * One websocket to the configured RPC, kept open until {@link close}: protocol pings, a socket
 * silent for two pings dropped, reconnects with exponential back-off and jitter (p-retry) and a
 * longer wait when sockets keep dying young. Every byte received and every connection opened is
 * counted in `sns_rpc_credits_total` by the cost table (`wsMegabyte`, `wsConnection`).
 */
export class WsConnection {
  private socket: WebSocket | undefined;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  /**
   * Pings sent since the socket last brought anything (a frame or a pong). Counted in ticks, not
   * measured in time: a tick that fires late because this process was busy (and the frames it
   * could not read yet are waiting in the socket) is then not taken for silence; the reads that
   * follow the tick reset the count.
   */
  private unanswered = 0;
  private flaps = 0;
  private readonly credits: CreditMeter;

  constructor(private readonly opts: WsConnectionOptions) {
    this.credits = opts.credits ?? new CreditMeter({ metrics: opts.metrics });
  }

  get connected(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Opens the socket and keeps it open until {@link close}; returns at once. */
  start(): void {
    this.running ??= this.run();
  }

  /** Drops the socket now (a stream found silent); the loop opens another. */
  reconnect(): void {
    this.socket?.terminate();
  }

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

  private serve(socket: WebSocket): Promise<void> {
    const { metrics, costs } = this.opts;
    this.socket = socket;
    metrics.wsConnected.set(1);
    this.credits.spend('wsConnection', 'default', wsCostOf(costs, 'wsConnection'));
    this.unanswered = 0;
    const ping = setInterval(() => {
      this.opts.onTick?.();
      if (this.unanswered >= 2) {
        this.opts.logger.warn('RPC websocket silent for two pings: reopening it');
        socket.terminate();
        return;
      }
      socket.ping();
      this.unanswered++;
    }, this.opts.pingMs);
    return new Promise((resolve) => {
      socket.on('pong', () => (this.unanswered = 0));
      socket.on('message', (data: RawData, isBinary) => {
        const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
        this.unanswered = 0;
        metrics.wsReceivedBytes.inc(bytes.length);
        this.credits.spend(
          'wsMegabyte',
          'default',
          (bytes.length / 1e6) * wsCostOf(costs, 'wsMegabyte'),
        );
        if (!isBinary) this.opts.onMessage(bytes);
      });
      socket.on('error', (err) =>
        this.opts.logger.warn({ err: err.message }, 'RPC websocket error'),
      );
      socket.on('close', () => {
        clearInterval(ping);
        this.socket = undefined;
        metrics.wsConnected.set(0);
        this.opts.onClose();
        resolve();
      });
      this.opts.onOpen((text) => {
        if (socket.readyState === WebSocket.OPEN) socket.send(text);
      });
    });
  }
}
