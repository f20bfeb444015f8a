/**
 * Loopback HTTP server speaking Solana JSON-RPC 2.0 from a `SimChain`, with fault injection,
 * an optional lag behind the chain, and a websocket (pubsub) endpoint on its own port
 * (pubsub.ts). Good enough for `@solana/web3.js` 1.x `Connection` and the SNS SDK to run
 * against unchanged.
 */
import { STATUS_CODES, createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SimChain } from './chain.js';
import type { ChainView } from './chain.js';
import { errorJson, parseBody, validId } from './envelope.js';
import type { Body, Envelope } from './envelope.js';
import { FaultQueue, GARBAGE_BODY } from './faults.js';
import type { Fault } from './faults.js';
import { RpcError, RpcErrorCode, callMethod } from './methods.js';
import { PubSubServer } from './pubsub.js';
import type { SubscriptionKind, WsCallRecord, WsStats } from './pubsub.js';
import { startBackgroundWrites } from './background.js';
import type { BackgroundWriter } from './background.js';

/** Default request body limit: 10 MiB. Larger bodies get HTTP 413. */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

/** One JSON-RPC call the simulator received. */
export interface RpcCallRecord {
  /** The call's `method`; '' when the body or element had none (parse errors included). */
  method: string;
  /** The call's `params` as received (undefined if absent). */
  params: unknown;
  /**
   * UTF-8 byte length of this call's own response: for a single call, the whole HTTP body;
   * for a batch element, that element's JSON object inside the array (so a batch body is
   * the sum of its rows + commas + 2 brackets). 0 for notifications and for calls that got
   * no answer (`hang`, `reset`); the fault body length for `http` and `garbage` faults.
   * Rows are added when the answer is written (on arrival for `hang` and `reset`), so a call
   * held by a `delay` fault shows up only once the delay is over.
   */
  responseBytes: number;
  /** Kind of the fault applied to this call's request, if any. */
  fault?: Fault['kind'];
}

/** Options of `startRpcSimulator`. */
export interface RpcSimulatorOptions {
  /** Accounts to serve; default a new empty `SimChain`. */
  chain?: SimChain;
  /** Interface to listen on; default 127.0.0.1. */
  host?: string;
  /** TCP port; default 0 (an ephemeral port, see `url`). */
  port?: number;
  /**
   * TCP port of the websocket (pubsub) endpoint, on the same host; default 0 (an ephemeral
   * port, see `wsUrl`). Real nodes use the HTTP port + 1 (8899 → 8900), which is what
   * web3.js derives from an HTTP URL; the CLI does that.
   */
  wsPort?: number;
  /**
   * Milliseconds the HTTP side lags behind the chain (default 0): every HTTP read method
   * answers from the chain as it was that long ago (accounts and `context.slot`), while the
   * websocket side sees each write at once. See `setHttpLagMs`.
   */
  httpLagMs?: number;
  /**
   * Milliseconds a transaction stays unknown to the HTTP side's `getTransaction` and
   * `getSignaturesForAddress` (default 0), on top of `httpLagMs` (the larger applies): a node
   * whose accounts are current but whose transaction store lags, as when a logs notification
   * arrives before the node asked has the transaction. See `setTransactionLagMs`.
   */
  txLagMs?: number;
  /**
   * Unrelated name-program writes per second under random parents nobody asked about
   * (default 0: none); see `startBackgroundWrites` and `setBackgroundWrites`.
   */
  backgroundWritesPerSecond?: number;
  /** Request body limit in bytes; default `DEFAULT_MAX_BODY_BYTES`. */
  maxBodyBytes?: number;
  /** Called with each call record as it is added to `calls` (e.g. for logging). */
  onCall?: (call: RpcCallRecord) => void;
}

/** A running simulator. */
export interface RpcSimulator {
  /** Base URL, e.g. `http://127.0.0.1:54321`; any path is accepted. */
  readonly url: string;
  readonly chain: SimChain;
  /** One row per JSON-RPC call received (each batch element counts), oldest first. */
  readonly calls: RpcCallRecord[];
  /** Number of recorded calls, of `method` only if given. */
  callCount(method?: string): number;
  /** Empties `calls` (in place). */
  resetCalls(): void;
  /**
   * Replaces the fault list ([] clears it). Per HTTP request, the first matching fault is
   * applied and its `times` decremented.
   * @throws TypeError on an invalid fault.
   */
  setFaults(faults: Fault[]): void;
  /**
   * Stops listening (HTTP and websocket), cancels delayed answers and destroys all open
   * sockets (hanging, keep-alive and websockets included). Idempotent.
   */
  close(): Promise<void>;

  /** Websocket (pubsub) URL, e.g. `ws://127.0.0.1:54322`; any path is accepted. */
  readonly wsUrl: string;
  /**
   * One row per JSON-RPC call received on any websocket (accountSubscribe, programSubscribe,
   * their unsubscribes, and unknown or invalid calls), oldest first, with the subscription
   * id or error code it got. Empty it in place (`wsCalls.length = 0`) if needed.
   */
  readonly wsCalls: WsCallRecord[];
  /**
   * Websocket counters: `connections` open now, `accepted` since start, `subscriptions`
   * active now, `notificationsSent` (account/programNotification), `bytesSent` (UTF-8 bytes
   * of all text frames sent, answers included; for credit accounting).
   */
  wsStats(): WsStats;
  /**
   * Terminates every open websocket abruptly (TCP destroyed, no close frame, so clients see
   * code 1006), as providers do; their subscriptions end.
   * @returns how many websockets were open.
   */
  dropSockets(): number;
  /**
   * false: new websocket upgrades are refused with HTTP 503, like a provider without
   * websocket support (open websockets stay); true (the default) accepts them again.
   */
  setWebsocketAvailable(available: boolean): void;
  /**
   * Turns every open websocket into a half-open connection: it stops sending anything
   * (answers, notifications, and pongs to the client's pings) and stops reading, so only a
   * client keep-alive can notice. Later websockets are unaffected; `dropSockets` or `close`
   * ends frozen ones.
   * @returns how many websockets were frozen.
   */
  freezeSockets(): number;
  /** Websocket subscription ids open now, of `kind` only if given, oldest first. */
  wsSubscriptions(kind?: SubscriptionKind): number[];
  /**
   * Sends `text` unchanged as one text frame on the websocket holding subscription `id`: any frame
   * a provider might send. `programNotificationText` writes a notification with its slot as given
   * (`'1e309'`, `'9223372036854775808'`, `'-1'`, `'1.5'`, `'"7"'` go out literally).
   * @returns false when no open, unfrozen websocket holds that id.
   */
  wsSendRaw(id: number, text: string): boolean;
  /**
   * Sends `count` frames, `frame(i)` for i = 0, 1, ..., on the websocket holding subscription
   * `id`, as fast as the socket takes them (it waits while more than 4 MiB are unsent, so the
   * simulator stays small). Counted in `bytesSent`, not in `notificationsSent`.
   * @returns how many were sent (fewer if the socket closed) and the milliseconds it took.
   */
  wsFlood(
    id: number,
    count: number,
    frame: (i: number) => string,
  ): Promise<{ sent: number; ms: number }>;
  /**
   * Sets the HTTP lag (see `RpcSimulatorOptions.httpLagMs`). The chain keeps history for
   * that long (`SimChain.retainHistory`), starting now: right after raising the lag,
   * reads see the chain as of the moment of the change until the lag has passed. A
   * `minContextSlot` above the lagging slot gets -32016 with `data.contextSlot` = that slot.
   * 0 turns history off.
   * @throws TypeError unless ms is a finite number >= 0.
   */
  setHttpLagMs(ms: number): void;
  /** The current HTTP lag in milliseconds. */
  readonly httpLagMs: number;
  /**
   * Sets the transaction lag (see `RpcSimulatorOptions.txLagMs`): `getTransaction` answers null,
   * and `getSignaturesForAddress` leaves out, transactions younger than max(this, HTTP lag).
   * @throws TypeError unless ms is a finite number >= 0.
   */
  setTransactionLagMs(ms: number): void;
  /** The current transaction lag in milliseconds. */
  readonly txLagMs: number;
  /**
   * Sets the rate of unrelated name-program writes (per second; 0 stops them); see
   * `startBackgroundWrites`.
   * @throws TypeError unless the rate is a finite number >= 0.
   */
  setBackgroundWrites(perSecond: number): void;
  /** Background writes made so far (see `setBackgroundWrites`). */
  readonly backgroundWrites: number;
}

const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

/**
 * Starts the simulator.
 * @returns once both the HTTP and the websocket servers listen; `url` and `wsUrl` hold the
 *   real ports when `port`/`wsPort` were 0.
 * @throws the listen error (e.g. EADDRINUSE); TypeError on a bad `httpLagMs`, `txLagMs` or
 *   `backgroundWritesPerSecond`.
 */
export async function startRpcSimulator(opts: RpcSimulatorOptions = {}): Promise<RpcSimulator> {
  const chain = opts.chain ?? new SimChain();
  let httpLagMs = 0;
  const setHttpLagMs = (ms: number): void => {
    chain.retainHistory(ms);
    httpLagMs = ms;
  };
  setHttpLagMs(opts.httpLagMs ?? 0);
  const rate = opts.backgroundWritesPerSecond ?? 0;
  if (!Number.isFinite(rate) || rate < 0) {
    throw new TypeError(`background write rate must be a finite number >= 0, got ${rate}`);
  }
  let txLagMs = 0;
  const setTransactionLagMs = (ms: number): void => {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`transaction lag must be a finite number >= 0, got ${ms}`);
    }
    txLagMs = ms;
  };
  setTransactionLagMs(opts.txLagMs ?? 0);
  let background: BackgroundWriter | undefined;
  let backgroundDone = 0;
  const setBackgroundWrites = (perSecond: number): void => {
    if (!Number.isFinite(perSecond) || perSecond < 0) {
      throw new TypeError(`background write rate must be a finite number >= 0, got ${perSecond}`);
    }
    if (background) backgroundDone += background.stop();
    background = perSecond > 0 ? startBackgroundWrites(chain, { perSecond }) : undefined;
  };
  const maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const faults = new FaultQueue();
  const calls: RpcCallRecord[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let closing: Promise<void> | undefined;

  const record = (row: RpcCallRecord): void => {
    calls.push(row);
    opts.onCall?.(row);
  };

  const server = createServer((req, res) => {
    if (closing) {
      req.socket.destroy();
      return;
    }
    readBody(req, res, maxBodyBytes, (text) => serve(text, res));
  });
  // Like the real RPC (web3.js keeps idle sockets 19 s, one second less than this).
  server.keepAliveTimeout = 20_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  function serve(text: string, res: ServerResponse): void {
    const body = parseBody(text);
    const elements = body.kind === 'unparsable' ? [] : body.elements;
    const fault = faults.take(elements.length ? elements.map((e) => e.method) : ['']);
    const rows = (responseBytes: number): void => {
      if (!elements.length) {
        record({ method: '', params: undefined, responseBytes, fault: fault?.kind });
      }
      for (const e of elements) {
        record({ method: e.method, params: e.params, responseBytes, fault: fault?.kind });
      }
    };
    switch (fault?.kind) {
      case 'hang':
        rows(0);
        return;
      case 'reset':
        rows(0);
        res.socket?.resetAndDestroy();
        return;
      case 'http': {
        const text = fault.body ?? STATUS_CODES[fault.status] ?? 'Error';
        rows(Buffer.byteLength(text));
        const headers: Record<string, string> = { 'Content-Type': contentTypeOf(text) };
        if (fault.retryAfterSeconds !== undefined) {
          headers['Retry-After'] = String(fault.retryAfterSeconds);
        }
        send(res, fault.status, text, headers);
        return;
      }
      case 'garbage': {
        const text = fault.body ?? GARBAGE_BODY;
        rows(Buffer.byteLength(text));
        send(res, 200, text, JSON_HEADERS);
        return;
      }
      case 'delay': {
        const timer = setTimeout(() => {
          timers.delete(timer);
          answer(body, res, fault);
        }, fault.ms);
        timers.add(timer);
        return;
      }
      default:
        answer(body, res, fault);
    }
  }

  /** Answers normally, except `rpc-error` faults replace the matching elements' answers. */
  function answer(body: Body, res: ServerResponse, fault: Fault | undefined): void {
    chain.advanceSlot();
    const view = httpLagMs > 0 ? chain.asOf(httpLagMs) : chain;
    if (body.kind === 'unparsable') {
      const text = errorJson(null, RpcErrorCode.parseError, 'Parse error');
      const injected = fault?.kind === 'rpc-error' ? injectedError(null, fault) : text;
      record({
        method: '',
        params: undefined,
        responseBytes: Buffer.byteLength(injected),
        fault: fault?.kind,
      });
      send(res, 200, injected, JSON_HEADERS);
      return;
    }
    const parts: string[] = [];
    for (const e of body.elements) {
      const hit =
        fault?.kind === 'rpc-error' && (fault.method === undefined || fault.method === e.method);
      const text = hit ? injectedError(e.id, fault) : answerOne(e, view);
      const answered = e.hasId || e.invalid !== undefined;
      if (answered) parts.push(text);
      record({
        method: e.method,
        params: e.params,
        responseBytes: answered ? Buffer.byteLength(text) : 0,
        fault: fault?.kind,
      });
    }
    if (body.kind === 'batch' && body.elements.length === 0) {
      const text = errorJson(null, RpcErrorCode.invalidRequest, 'Invalid request');
      record({ method: '', params: undefined, responseBytes: Buffer.byteLength(text) });
      send(res, 200, text, JSON_HEADERS);
      return;
    }
    // Only notifications: JSON-RPC 2.0 says to answer nothing at all.
    if (parts.length === 0) send(res, 200, '', JSON_HEADERS);
    else if (body.kind === 'single') send(res, 200, parts[0] ?? '', JSON_HEADERS);
    else send(res, 200, `[${parts.join(',')}]`, JSON_HEADERS);
  }

  function answerOne(e: Envelope, view: ChainView): string {
    if (e.invalid !== undefined) {
      return errorJson(validId(e.id), RpcErrorCode.invalidRequest, e.invalid);
    }
    try {
      const lag = Math.max(httpLagMs, txLagMs);
      const result = callMethod(chain, e.method, e.params, view.slot, view, lag);
      return `{"jsonrpc":"2.0","result":${result},"id":${JSON.stringify(e.id)}}`;
    } catch (err) {
      if (err instanceof RpcError) return errorJson(e.id, err.code, err.message, err.data);
      return errorJson(e.id, RpcErrorCode.internalError, `Internal error: ${String(err)}`);
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let pubsub: PubSubServer;
  try {
    pubsub = await PubSubServer.start(chain, opts.host ?? '127.0.0.1', opts.wsPort ?? 0);
  } catch (err) {
    server.close();
    throw err;
  }

  setBackgroundWrites(opts.backgroundWritesPerSecond ?? 0);
  return {
    url: `http://${host}:${address.port}`,
    wsUrl: pubsub.url,
    wsCalls: pubsub.calls,
    wsStats: () => pubsub.stats(),
    dropSockets: () => pubsub.dropSockets(),
    setWebsocketAvailable: (available) => pubsub.setAvailable(available),
    freezeSockets: () => pubsub.freezeSockets(),
    wsSubscriptions: (kind) => pubsub.subscriptionIds(kind),
    wsSendRaw: (id, text) => pubsub.sendRaw(id, text),
    wsFlood: (id, count, frame) => pubsub.flood(id, count, frame),
    setHttpLagMs,
    get httpLagMs() {
      return httpLagMs;
    },
    setTransactionLagMs,
    get txLagMs() {
      return txLagMs;
    },
    setBackgroundWrites,
    get backgroundWrites() {
      return backgroundDone + (background?.count ?? 0);
    },
    chain,
    calls,
    callCount: (method) =>
      method === undefined ? calls.length : calls.filter((c) => c.method === method).length,
    resetCalls: () => {
      calls.length = 0;
    },
    setFaults: (list) => faults.set(list),
    close: () => {
      if (background) backgroundDone += background.stop();
      background = undefined;
      closing ??= Promise.all([
        new Promise<void>((resolve) => {
          for (const timer of timers) clearTimeout(timer);
          timers.clear();
          server.close(() => resolve());
          server.closeAllConnections();
          for (const socket of sockets) socket.destroy();
        }),
        pubsub.close(),
      ]).then(() => undefined);
      return closing;
    },
  };
}

/**
 * Reads the request body as UTF-8 and hands it to `onBody`, or answers the request itself:
 * GET /health → 200 "ok" (like the real RPC), other non-POST → 405, a non-JSON
 * Content-Type → 415, a body over `maxBodyBytes` → 413 (and the connection is closed).
 */
function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBodyBytes: number,
  onBody: (text: string) => void,
): void {
  if (req.method === 'GET' && req.url?.split('?')[0] === '/health') {
    send(res, 200, 'ok', { 'Content-Type': 'text/plain' });
    return;
  }
  if (req.method !== 'POST') {
    send(res, 405, 'Used HTTP Method is not allowed. POST is required', {
      'Content-Type': 'text/plain',
      Allow: 'POST',
    });
    req.resume();
    return;
  }
  const contentType = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (contentType !== 'application/json') {
    send(
      res,
      415,
      'Supplied content type is not allowed. Content-Type: application/json is required',
      {
        'Content-Type': 'text/plain',
      },
    );
    req.resume();
    return;
  }
  const tooLarge = (): void => {
    send(res, 413, 'Request body too large', { 'Content-Type': 'text/plain', Connection: 'close' });
    req.resume(); // drain what the client still sends; the socket closes after the answer
  };
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > maxBodyBytes) {
    tooLarge();
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let rejected = false;
  req.on('data', (chunk: Buffer) => {
    if (rejected) return;
    size += chunk.length;
    if (size > maxBodyBytes) {
      rejected = true;
      chunks.length = 0;
      tooLarge();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!rejected) onBody(Buffer.concat(chunks).toString('utf8'));
  });
  req.on('error', () => req.socket.destroy());
}

function injectedError(id: unknown, fault: { code?: number; message?: string }): string {
  return errorJson(id, fault.code ?? RpcErrorCode.internalError, fault.message ?? 'Internal error');
}

function contentTypeOf(text: string): string {
  try {
    JSON.parse(text);
    return 'application/json';
  } catch {
    return 'text/plain';
  }
}

function send(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>>,
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
