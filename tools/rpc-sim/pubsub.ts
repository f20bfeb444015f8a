/**
 * Websocket side of the simulator: Solana's pubsub JSON-RPC (accountSubscribe,
 * programSubscribe, logsSubscribe and their unsubscribes) on its own port, fed synchronously by
 * the chain's write and transaction listeners, with the failures providers show: dropped sockets,
 * no websocket support (HTTP 503 on upgrade) and half-open sockets that stop answering, pongs
 * included.
 *
 * Wire format as agave's rpc_pubsub: subscription ids are numbers from 0, an unknown id on
 * unsubscribe is -32602 "Invalid subscription id.", and ids belong to the connection that
 * made them (any unsubscribe method removes any kind of subscription, as there).
 *
 * Hostile frames for tests and benches: `sendRaw` puts any text on a subscription's socket (a slot
 * of `1e309` or `2^63`, written literally by `programNotificationText`), `flood` sends many fast.
 */
import { NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { WebSocketServer } from 'ws';
import type { RawData, WebSocket } from 'ws';
import type { AccountWrite, SimChain } from './chain.js';
import type { SimTransaction } from './transactions.js';
import { errorJson, parseBody, validId } from './envelope.js';
import type { Envelope } from './envelope.js';
import {
  RpcError,
  RpcErrorCode,
  accountJson,
  closedAccountJson,
  readAccountSubscribe,
  readLogsSubscribe,
  readProgramSubscribe,
  readSubscriptionId,
} from './methods.js';
import type { LogsParams, SubscriptionParams } from './methods.js';

/** One JSON-RPC call received on a websocket. */
export interface WsCallRecord {
  /** The call's `method`; '' when the frame or element had none (parse errors included). */
  method: string;
  /** The call's `params` as received (undefined if absent). */
  params: unknown;
  /** The subscription id a successful accountSubscribe/programSubscribe got. */
  subscription?: number;
  /** JSON-RPC error code of the answer, if it was an error. */
  error?: number;
}

/** Websocket counters (see `RpcSimulator.wsStats`). */
export interface WsStats {
  /** Websockets open now. */
  connections: number;
  /** Websockets accepted since start. */
  accepted: number;
  /** Subscriptions active now, over all websockets. */
  subscriptions: number;
  /** accountNotification/programNotification/logsNotification messages sent. */
  notificationsSent: number;
  /** UTF-8 bytes of all text frames sent (answers and notifications), for credit accounting. */
  bytesSent: number;
}

interface Client {
  readonly ws: WebSocket;
  frozen: boolean;
  readonly subs: Map<number, Subscription>;
}

type Subscription =
  | {
      readonly id: number;
      readonly kind: 'account' | 'program';
      readonly params: SubscriptionParams;
      readonly client: Client;
    }
  | {
      readonly id: number;
      readonly kind: 'logs';
      readonly params: LogsParams;
      readonly client: Client;
    };

/** An accountSubscribe or programSubscribe subscription. */
type DataSubscription = Exclude<Subscription, { kind: 'logs' }>;

/** Kinds of subscription the simulator serves. */
export type SubscriptionKind = Subscription['kind'];

const UNSUBSCRIBE_METHODS = new Set([
  'accountUnsubscribe',
  'programUnsubscribe',
  'logsUnsubscribe',
]);

/** A running pubsub endpoint. */
export class PubSubServer {
  /** `ws://host:port`. */
  readonly url: string;
  /** One row per JSON-RPC call received on any websocket, oldest first. */
  readonly calls: WsCallRecord[] = [];

  readonly #server: ReturnType<typeof createServer>;
  readonly #wss: WebSocketServer;
  readonly #rawSockets = new Set<Socket>();
  readonly #clients = new Set<Client>();
  readonly #accountSubs = new Map<string, Set<DataSubscription>>();
  readonly #programSubs = new Map<string, Set<DataSubscription>>();
  readonly #logsSubs = new Set<Subscription & { kind: 'logs' }>();
  readonly #stopListening: () => void;
  readonly #stopLogs: () => void;
  #nextId = 0;
  #available = true;
  #accepted = 0;
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
    this.#stopListening = chain.onWrite((write) => this.#notify(write));
    this.#stopLogs = chain.onTransaction((tx) => this.#notifyLogs(tx));
  }

  /**
   * Listens on `host:port` (0 = ephemeral).
   * @throws the listen error (e.g. EADDRINUSE).
   */
  static async start(chain: SimChain, host: string, port: number): Promise<PubSubServer> {
    const server = createServer((_req, res) => {
      // Plain HTTP on the pubsub port: only websocket upgrades are served here.
      const body = 'Upgrade Required: this port serves websocket JSON-RPC only';
      res.writeHead(426, {
        'Content-Type': 'text/plain',
        'Content-Length': Buffer.byteLength(body),
        Upgrade: 'websocket',
        Connection: 'Upgrade',
      });
      res.end(body);
    });
    // autoPong off: pongs are sent by hand so a frozen socket can withhold them.
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

  /** Counters; see `WsStats`. */
  stats(): WsStats {
    let subscriptions = 0;
    for (const client of this.#clients) subscriptions += client.subs.size;
    return {
      connections: this.#clients.size,
      accepted: this.#accepted,
      subscriptions,
      notificationsSent: this.#notificationsSent,
      bytesSent: this.#bytesSent,
    };
  }

  /** Destroys every open websocket without a close frame. @returns how many. */
  dropSockets(): number {
    const count = this.#clients.size;
    for (const client of this.#clients) client.ws.terminate();
    return count;
  }

  /** false: new upgrades get HTTP 503 (open websockets stay); true: accepted again. */
  setAvailable(available: boolean): void {
    this.#available = available;
  }

  /**
   * Makes every open websocket half-open: from now on it sends nothing (no answers, no
   * notifications, no pongs) and reads nothing. Websockets opened later are not affected.
   * @returns how many were frozen.
   */
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

  /** Subscription ids open now, of `kind` only if given, oldest first. */
  subscriptionIds(kind?: SubscriptionKind): number[] {
    const ids: number[] = [];
    for (const client of this.#clients) {
      for (const sub of client.subs.values()) if (!kind || sub.kind === kind) ids.push(sub.id);
    }
    return ids.sort((a, b) => a - b);
  }

  /**
   * Sends `text` unchanged, one text frame, on the websocket holding subscription `id`: any frame
   * a provider might send, a slot of `1e309` included (see {@link programNotificationText}).
   * @returns false when no open, unfrozen websocket holds that id.
   */
  sendRaw(id: number, text: string): boolean {
    const client = this.#holder(id);
    return client !== undefined && this.#send(client, text);
  }

  /**
   * Sends `count` frames, `frame(i)` for i from 0, on the websocket holding subscription `id`, as
   * fast as the socket takes them: it waits while more than {@link FLOOD_BUFFER_BYTES} are
   * unsent, so the simulator's own memory stays small however many it sends.
   * @returns how many were sent (fewer when the socket closed meanwhile) and the milliseconds it
   *   took to hand them all to the socket.
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
        // Frames go out in order: once this one is written, the backlog before it is too.
        await new Promise<void>((resolve) => client.ws.send(text, () => resolve()));
      } else {
        client.ws.send(text);
      }
      this.#bytesSent += Buffer.byteLength(text);
      sent++;
    }
    return { sent, ms: performance.now() - started };
  }

  /** Stops listening and destroys all websockets. Idempotent. */
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
      if (!client.frozen) ws.pong(data);
    });
    ws.on('message', (data) => {
      if (!client.frozen) this.#onMessage(client, data);
    });
    ws.on('error', () => ws.terminate());
    ws.once('close', () => {
      this.#clients.delete(client);
      for (const sub of client.subs.values()) this.#unindex(sub);
      client.subs.clear();
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

  /** Runs one call and records it. @returns the answer as JSON text. */
  #call(client: Client, e: Envelope): string {
    const row: WsCallRecord = { method: e.method, params: e.params };
    this.calls.push(row);
    if (e.invalid !== undefined) {
      row.error = RpcErrorCode.invalidRequest;
      return errorJson(validId(e.id), RpcErrorCode.invalidRequest, e.invalid);
    }
    try {
      let result: string;
      if (
        e.method === 'accountSubscribe' ||
        e.method === 'programSubscribe' ||
        e.method === 'logsSubscribe'
      ) {
        const sub = this.#subscribe(client, e.method, e.params);
        row.subscription = sub.id;
        result = String(sub.id);
      } else if (UNSUBSCRIBE_METHODS.has(e.method)) {
        this.#unsubscribe(client, readSubscriptionId(e.params));
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

  #subscribe(
    client: Client,
    method: 'accountSubscribe' | 'programSubscribe' | 'logsSubscribe',
    params: unknown,
  ): Subscription {
    if (method === 'logsSubscribe') {
      const sub = {
        id: this.#nextId++,
        kind: 'logs' as const,
        params: readLogsSubscribe(params),
        client,
      };
      client.subs.set(sub.id, sub);
      this.#logsSubs.add(sub);
      return sub;
    }
    const kind = method === 'accountSubscribe' ? 'account' : 'program';
    const parsed = kind === 'account' ? readAccountSubscribe(params) : readProgramSubscribe(params);
    const sub: DataSubscription = { id: this.#nextId++, kind, params: parsed, client };
    client.subs.set(sub.id, sub);
    const index = kind === 'account' ? this.#accountSubs : this.#programSubs;
    let set = index.get(parsed.key);
    if (!set) {
      set = new Set();
      index.set(parsed.key, set);
    }
    set.add(sub);
    return sub;
  }

  /** @throws RpcError -32602 "Invalid subscription id." as agave, for ids not of this client. */
  #unsubscribe(client: Client, id: number): void {
    const sub = client.subs.get(id);
    if (!sub) throw new RpcError(RpcErrorCode.invalidParams, 'Invalid subscription id.');
    client.subs.delete(id);
    this.#unindex(sub);
  }

  #unindex(sub: Subscription): void {
    if (sub.kind === 'logs') {
      this.#logsSubs.delete(sub);
      return;
    }
    const index = sub.kind === 'account' ? this.#accountSubs : this.#programSubs;
    const set = index.get(sub.params.key);
    set?.delete(sub);
    if (set?.size === 0) index.delete(sub.params.key);
  }

  /**
   * Chain write listener. accountSubscribe: every write, deletions as a closed account.
   * programSubscribe: accounts the program owns after the write and that pass the filters
   * then; so never for a deletion, as on a real node, where a closed account has no data
   * and belongs to the system program.
   */
  #notify(write: AccountWrite): void {
    const accountSubs = this.#accountSubs.get(write.key);
    if (accountSubs) {
      for (const sub of accountSubs) {
        const { encoding, dataSlice } = sub.params;
        const value = write.account
          ? accountJson(write.account, encoding, dataSlice, 'placeholder')
          : closedAccountJson(encoding);
        this.#notification(sub, 'accountNotification', write.slot, value);
      }
    }
    const account = write.account;
    const programSubs = account && this.#programSubs.get(account.ownerKey);
    if (!programSubs) return;
    for (const sub of programSubs) {
      const { encoding, dataSlice, filters } = sub.params;
      if (!filters.every((filter) => filter(account.data))) continue;
      const value = `{"pubkey":"${account.key}","account":${accountJson(account, encoding, dataSlice, 'placeholder')}}`;
      this.#notification(sub, 'programNotification', write.slot, value);
    }
  }

  /**
   * Transaction listener: a logsNotification `{signature, err, logs}` for each logs subscription
   * whose filter the transaction passes (all, or `mentions` among its account keys, as agave's
   * log collector indexes every account key of a transaction).
   */
  #notifyLogs(tx: SimTransaction): void {
    if (this.#logsSubs.size === 0) return;
    let value: string | undefined;
    for (const sub of this.#logsSubs) {
      const { mentions } = sub.params;
      if (mentions !== undefined && !tx.mentions(mentions)) continue;
      value ??= JSON.stringify({ signature: tx.signature, err: tx.err, logs: tx.logs });
      this.#notification(sub, 'logsNotification', tx.slot, value);
    }
  }

  #notification(sub: Subscription, method: string, slot: number, value: string): void {
    const text =
      `{"jsonrpc":"2.0","method":"${method}","params":{"result":{"context":{"slot":${slot}},` +
      `"value":${value}},"subscription":${sub.id}}}`;
    if (this.#send(sub.client, text)) this.#notificationsSent++;
  }

  /** The open, unfrozen client holding subscription `id`. */
  #holder(id: number): Client | undefined {
    for (const client of this.#clients) {
      if (client.subs.has(id) && !client.frozen) return client;
    }
    return undefined;
  }

  /** @returns whether the text was handed to the socket. */
  #send(client: Client, text: string): boolean {
    if (client.frozen || client.ws.readyState !== client.ws.OPEN) return false;
    client.ws.send(text);
    this.#bytesSent += Buffer.byteLength(text);
    return true;
  }
}

/** Bytes {@link PubSubServer.flood} leaves unsent on a socket before it waits for them. */
export const FLOOD_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * A `programNotification` as a node sends it, for {@link PubSubServer.sendRaw} and
 * {@link PubSubServer.flood}. `slot` goes in as written: a string is not quoted, so `'1e309'`,
 * `'9223372036854775808'` or `'-1'` go out literally (a quoted slot is `'"5"'`). `data` is the
 * account's data already cut to the subscription's `dataSlice` (base64 here); `owner` the owning
 * program (default the name program).
 */
export function programNotificationText(
  subscription: number,
  slot: number | string,
  pubkey: string,
  data: Uint8Array,
  owner = NAME_PROGRAM_ID.toBase58(),
): string {
  const encoded = Buffer.from(data).toString('base64');
  return (
    `{"jsonrpc":"2.0","method":"programNotification","params":{"result":{"context":{"slot":${slot}},` +
    `"value":{"pubkey":"${pubkey}","account":{"data":["${encoded}","base64"],"executable":false,` +
    `"lamports":1,"owner":"${owner}","rentEpoch":0,"space":${data.length}}}},` +
    `"subscription":${subscription}}}`
  );
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as Buffer).toString('utf8');
}

/** Answers an upgrade request with a plain HTTP error and closes the connection. */
function refuse(socket: Socket, status: number, text: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}
