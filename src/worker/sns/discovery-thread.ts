import { parentPort } from 'node:worker_threads';
import { toWireError, type WireError } from '../rpc/envelope.js';
import { DECODERS } from './discovery-decode.js';

/**
 * The decode thread: a `node:worker_threads` Worker started by ./decode-thread.ts, never
 * imported. It takes the body of an RPC reply (its memory transferred, not copied), parses it
 * within the bounds of ../rpc/bounded-json.ts and answers with what it holds, errors as data. No
 * RPC reply is parsed on the worker's main thread.
 */

type Common = {
  seq: number;
  method: string;
  /** JSON-RPC id of the request the body answers. */
  id: number;
  /** The reply body, transferred. */
  body: ArrayBuffer;
};

type Decoders = typeof DECODERS;
/** A task's own fields: its decoder's fourth parameter, if it has one. */
type Fields<K extends keyof Decoders> =
  Parameters<Decoders[K]> extends [string, Uint8Array, number, infer T] ? T : unknown;

export type ThreadRequest = {
  [K in keyof Decoders]: Common & { kind: K } & Fields<K>;
}[keyof Decoders];

/** What each kind of request answers. */
export type ThreadResults = { [K in keyof Decoders]: ReturnType<Decoders[K]> };

export type ThreadReply =
  | { seq: number; result: unknown }
  | { seq: number; failed: WireError }
  /** Sent once, when the thread has loaded and listens: task budgets start from then. */
  | { ready: true };

function decode(req: ThreadRequest): unknown {
  const decoder = DECODERS[req.kind] as (
    method: string,
    body: Uint8Array,
    id: number,
    task: ThreadRequest,
  ) => unknown;
  return decoder(req.method, new Uint8Array(req.body), req.id, req);
}

function handle(req: ThreadRequest): ThreadReply {
  try {
    return { seq: req.seq, result: decode(req) };
  } catch (err) {
    return { seq: req.seq, failed: toWireError(err) };
  }
}

const port = parentPort;
if (!port) throw new Error('discovery-thread runs in a worker thread');
port.on('message', (req: ThreadRequest) => port.postMessage(handle(req)));
port.postMessage({ ready: true } satisfies ThreadReply);
