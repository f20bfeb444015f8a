/**
 * The simulator's pubsub websocket server (account/program/logsSubscribe and unsubscribes), fed
 * synchronously by chain listeners, with providers' failures: dropped sockets, no websocket
 * support (503), half-open sockets. Wire format as agave's rpc_pubsub (ids from 0; unknown id:
 * -32602). `sendRaw` and `flood` put hostile frames on a socket. The subscriptions by kind are
 * in subscriptions.ts, what a write or a transaction notifies in notifications.ts.
 */
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { WebSocketServer } from 'ws';
import type { RawData, WebSocket } from 'ws';
import type { SimChain } from './chain.js';
import { errorJson, parseBody, validId } from './envelope.js';
import type { Envelope } from './envelope.js';
import { notifyLogs, notifyWrite } from './notifications.js';
import type { Deliver } from './notifications.js';
import { readSubscriptionId } from './params.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';
import { SubscriptionIndex, isSubscribe, isUnsubscribe } from './subscriptions.js';
import type { Client, SubscriptionKind } from './subscriptions.js';

/** One websocket JSON-RPC call. */
export interface WsCallRecord {
  /** '' when the frame or element had none. */
  method: string;
  params: unknown;
  /** Of a successful subscribe. */
  subscription?: number;
  /** The answer's error code, if any. */
  error?: number;
}

/** See `RpcSimulator.wsStats`. */
export interface WsStats {
  /** Open now. */
  connections: number;
  /** Since start. */
  accepted: number;
  /** Active now. */
  subscriptions: number;
  /** Notifications sent. */
  notificationsSent: number;
  /** UTF-8 bytes of all text frames sent, for credit accounting. */
  bytesSent: number;
  /** Protocol pings received since start (frozen sockets' included). */
  pings: number;
}

/** A running pubsub endpoint. */
export class PubSubServer {
  readonly url: string;
  /** Every websocket call, oldest first. */
  readonly calls: WsCallRecord[] = [];

  readonly #server: ReturnType<typeof createServer>;
  readonly #wss: WebSocketServer;
  readonly #rawSockets = new Set<Socket>();
  readonly #clients = new Set<Client>();
  readonly #subs = new SubscriptionIndex();
  /** Sends a notification; counts it when it reached the socket. */
  readonly #deliver: Deliver = (sub, text) => {
    const sent = this.#send(sub.client, text);
    if (sent) this.#notificationsSent++;
    return sent;
  };
  readonly #stopListening: () => void;
  readonly #stopLogs: () => void;
  #available = true;
  #accepted = 0;
  #pings = 0;
  #notificationsSent = 0;
  #bytesSent = 0;
  #closing: Promise<void> | undefined;

  private constructor(
    chain: SimChain,
    server: ReturnType<typeof createServer>,
    wss: WebSocketServer,
    url: string,
  ) {
    this.#server = server;
    this.#wss = wss;
    this.url = url;
    server.on('connection', (socket) => {
      this.#rawSockets.add(socket);
      socket.once('close', () => this.#rawSockets.delete(socket));
    });
    server.on('upgrade', (req, socket, head) => {
      if (!this.#available || this.#closing) {
        refuse(socket as Socket, 503, 'Service Unavailable');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => this.#accept(ws));
    });
    this.#stopListening = chain.onWrite((write) => notifyWrite(this.#subs, write, this.#deliver));
    this.#stopLogs = chain.onTransaction((tx) => notifyLogs(this.#subs, tx, this.#deliver));
  }

  /** Listens on `host:port` (0: ephemeral); throws the listen error. */
  static async start(chain: SimChain, host: string, port: number): Promise<PubSubServer> {
    const server = createServer((_req, res) => {
      // Only websocket upgrades are served here.
      const body = 'Upgrade Required: this port serves websocket JSON-RPC only';
      res.writeHead(426, {
        'Content-Type': 'text/plain',
        'Content-Length': Buffer.byteLength(body),
        Upgrade: 'websocket',
        Connection: 'Upgrade',
      });
      res.end(body);
    });
    // Pongs by hand, so a frozen socket can withhold them.
    const wss = new WebSocketServer({ noServer: true, autoPong: false });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address() as AddressInfo;
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return new PubSubServer(chain, server, wss, `ws://${shown}:${address.port}`);
  }

  stats(): WsStats {
    let subscriptions = 0;
    for (const client of this.#clients) subscriptions += client.subs.size;
    return {
      connections: this.#clients.size,
      accepted: this.#accepted,
      subscriptions,
      notificationsSent: this.#notificationsSent,
      bytesSent: this.#bytesSent,
      pings: this.#pings,
    };
  }

  /** Destroys every websocket without a close frame; returns the count. */
  dropSockets(): number {
    const count = this.#clients.size;
    for (const client of this.#clients) client.ws.terminate();
    return count;
  }

  /** false: new upgrades get 503 (open ones stay). */
  setAvailable(available: boolean): void {
    this.#available = available;
  }

  /** Makes open websockets half-open (no sends, pongs included; no reads); returns the count. */
  freezeSockets(): number {
    let count = 0;
    for (const client of this.#clients) {
      if (client.frozen) continue;
      client.frozen = true;
      client.ws.pause();
      count++;
    }
    return count;
  }

  /** Open subscription ids, of `kind` if given, oldest first. */
  subscriptionIds(kind?: SubscriptionKind): number[] {
    const ids: number[] = [];
    for (const client of this.#clients) {
      for (const sub of client.subs.values()) if (!kind || sub.kind === kind) ids.push(sub.id);
    }
    return ids.sort((a, b) => a - b);
  }

  /** Sends `text` as-is on subscription `id`'s socket; false if no open, unfrozen one has it. */
  sendRaw(id: number, text: string): boolean {
    const client = this.#holder(id);
    return client !== undefined && this.#send(client, text);
  }

  /**
   * Sends `frame(i)` for i < `count` on subscription `id`'s socket, waiting while over
   * {@link FLOOD_BUFFER_BYTES} are unsent so the simulator stays small. Returns frames sent and ms.
   */
  async flood(
    id: number,
    count: number,
    frame: (i: number) => string,
  ): Promise<{ sent: number; ms: number }> {
    const started = performance.now();
    const client = this.#holder(id);
    let sent = 0;
    while (client && sent < count) {
      if (client.frozen || client.ws.readyState !== client.ws.OPEN) break;
      const text = frame(sent);
      if (client.ws.bufferedAmount > FLOOD_BUFFER_BYTES) {
        // In order: once this one is written, the backlog before it is too.
        await new Promise<void>((resolve) => client.ws.send(text, () => resolve()));
      } else {
        client.ws.send(text);
      }
      this.#bytesSent += Buffer.byteLength(text);
      sent++;
    }
    return { sent, ms: performance.now() - started };
  }

  /** Stops listening, destroys all websockets. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      this.#stopListening();
      this.#stopLogs();
      for (const client of this.#clients) client.ws.terminate();
      this.#wss.close();
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
      for (const socket of this.#rawSockets) socket.destroy();
    });
    return this.#closing;
  }

  #accept(ws: WebSocket): void {
    const client: Client = { ws, frozen: false, subs: new Map() };
    this.#clients.add(client);
    this.#accepted++;
    ws.on('ping', (data) => {
      this.#pings++;
      if (!client.frozen) ws.pong(data);
    });
    ws.on('message', (data) => {
      if (!client.frozen) this.#onMessage(client, data);
    });
    ws.on('error', () => ws.terminate());
    ws.once('close', () => {
      this.#clients.delete(client);
      this.#subs.closed(client);
    });
  }

  #onMessage(client: Client, data: RawData): void {
    const body = parseBody(rawText(data));
    if (body.kind === 'unparsable') {
      this.calls.push({ method: '', params: undefined, error: RpcErrorCode.parseError });
      this.#send(client, errorJson(null, RpcErrorCode.parseError, 'Parse error'));
      return;
    }
    if (body.kind === 'batch' && body.elements.length === 0) {
      this.calls.push({ method: '', params: undefined, error: RpcErrorCode.invalidRequest });
      this.#send(client, errorJson(null, RpcErrorCode.invalidRequest, 'Invalid request'));
      return;
    }
    const parts: string[] = [];
    for (const e of body.elements) {
      const answer = this.#call(client, e);
      if (e.hasId || e.invalid !== undefined) parts.push(answer);
    }
    if (parts.length === 0) return;
    this.#send(client, body.kind === 'single' ? (parts[0] ?? '') : `[${parts.join(',')}]`);
  }

  /** Runs and records one call; returns the answer JSON. */
  #call(client: Client, e: Envelope): string {
    const row: WsCallRecord = { method: e.method, params: e.params };
    this.calls.push(row);
    if (e.invalid !== undefined) {
      row.error = RpcErrorCode.invalidRequest;
      return errorJson(validId(e.id), RpcErrorCode.invalidRequest, e.invalid);
    }
    try {
      let result: string;
      if (isSubscribe(e.method)) {
        const sub = this.#subs.subscribe(client, e.method, e.params);
        row.subscription = sub.id;
        result = String(sub.id);
      } else if (isUnsubscribe(e.method)) {
        this.#subs.unsubscribe(client, readSubscriptionId(e.params));
        result = 'true';
      } else {
        throw new RpcError(RpcErrorCode.methodNotFound, 'Method not found');
      }
      return `{"jsonrpc":"2.0","result":${result},"id":${JSON.stringify(e.id)}}`;
    } catch (err) {
      const error =
        err instanceof RpcError
          ? err
          : new RpcError(RpcErrorCode.internalError, `Internal error: ${String(err)}`);
      row.error = error.code;
      return errorJson(e.id, error.code, error.message, error.data);
    }
  }

  /** The open, unfrozen client holding `id`. */
  #holder(id: number): Client | undefined {
    for (const client of this.#clients) {
      if (client.subs.has(id) && !client.frozen) return client;
    }
    return undefined;
  }

  /** Whether the text reached the socket. */
  #send(client: Client, text: string): boolean {
    if (client.frozen || client.ws.readyState !== client.ws.OPEN) return false;
    client.ws.send(text);
    this.#bytesSent += Buffer.byteLength(text);
    return true;
  }
}

/** Unsent bytes {@link PubSubServer.flood} allows before waiting. */
export const FLOOD_BUFFER_BYTES = 4 * 1024 * 1024;

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as Buffer).toString('utf8');
}

/** Answers an upgrade with a plain HTTP error and closes. */
function refuse(socket: Socket, status: number, text: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}
