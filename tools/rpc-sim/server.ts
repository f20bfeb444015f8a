/**
 * Loopback Solana JSON-RPC 2.0 server over a `SimChain`, with faults, an optional lag behind the
 * chain and a pubsub websocket on its own port: enough for web3.js 1.x and the SNS SDK, unchanged.
 */
import { STATUS_CODES, createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SimChain } from './chain.js';
import type { ChainView } from './chain-view.js';
import { errorJson, parseBody, validId } from './envelope.js';
import type { Body, Envelope } from './envelope.js';
import { FaultQueue, GARBAGE_BODY } from './faults.js';
import type { Fault } from './faults.js';
import { callMethod } from './methods.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';
import { PubSubServer } from './pubsub.js';
import { startBackgroundWrites } from './background.js';
import { contentTypeOf, readBody, send } from './http-io.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  type RpcCallRecord,
  type RpcSimulator,
  type RpcSimulatorOptions,
} from './simulator-api.js';
import type { BackgroundWriter } from './background.js';

const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

/**
 * Starts the simulator; resolves once both servers listen (`url`, `wsUrl` hold the real ports).
 * @throws the listen error; TypeError on a bad lag or background rate.
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
  let signaturesPageCap = Infinity;
  const setSignaturesPageCap = (cap: number): void => {
    if (cap !== Infinity && (!Number.isSafeInteger(cap) || cap < 1)) {
      throw new TypeError(`signatures page cap must be a positive integer, got ${cap}`);
    }
    signaturesPageCap = cap;
  };
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
  let refused: ReadonlySet<string> = new Set(opts.refusedMethods ?? []);
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
  // As the real RPC: web3.js keeps idle sockets 19 s, one second less.
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

  /** Answers, `rpc-error` faults replacing matching elements' answers. */
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
    // Only notifications: JSON-RPC 2.0 answers nothing.
    if (parts.length === 0) send(res, 200, '', JSON_HEADERS);
    else if (body.kind === 'single') send(res, 200, parts[0] ?? '', JSON_HEADERS);
    else send(res, 200, `[${parts.join(',')}]`, JSON_HEADERS);
  }

  function answerOne(e: Envelope, view: ChainView): string {
    if (e.invalid !== undefined) {
      return errorJson(validId(e.id), RpcErrorCode.invalidRequest, e.invalid);
    }
    try {
      const result = callMethod(chain, e.method, e.params, view.slot, {
        view,
        txLagMs: Math.max(httpLagMs, txLagMs),
        refused,
        signaturesPageCap,
      });
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
    setSignaturesPageCap,
    setTransactionLagMs,
    get txLagMs() {
      return txLagMs;
    },
    setBackgroundWrites,
    get backgroundWrites() {
      return backgroundDone + (background?.count ?? 0);
    },
    setRefusedMethods: (methods) => {
      refused = new Set(methods);
    },
    get refusedMethods() {
      return [...refused];
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

function injectedError(id: unknown, fault: { code?: number; message?: string }): string {
  return errorJson(id, fault.code ?? RpcErrorCode.internalError, fault.message ?? 'Internal error');
}
