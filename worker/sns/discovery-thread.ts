import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { JsonHeapError } from '../rpc/bounded-json.js';
import { RpcCallError, toWireError, type WireError } from '../rpc/envelope.js';
import { DECODERS } from './discovery-decode.js';
import { warmUp } from './warm-up.js';

/**
 * The decode thread, started by ./decode-thread.ts, never imported: parses transferred reply
 * bodies within ../rpc/bounded-json.ts's bounds, answering with results or errors as data.
 */

/** What ./decode-thread.ts starts the thread with. */
export type ThreadData = { heapMb: number };

type Common = {
  seq: number;
  method: string;
  id: number;
  body: ArrayBuffer;
};

type Decoders = typeof DECODERS;
/** A task's own fields (its decoder's fourth parameter). */
type Fields<K extends keyof Decoders> =
  Parameters<Decoders[K]> extends [string, Uint8Array, number, infer T] ? T : unknown;

/** A task sent to the decode thread. */
export type ThreadRequest = {
  [K in keyof Decoders]: Common & { kind: K } & Fields<K>;
}[keyof Decoders];

/** Each kind's answer. */
export type ThreadResults = { [K in keyof Decoders]: ReturnType<Decoders[K]> };

/** Each kind's parts, handed over before its answer (never, for a kind whose task has no `emit`). */
export type ThreadParts = {
  [K in keyof Decoders]: Fields<K> extends { emit?: (part: infer P) => void } ? P : never;
};

/** The thread's answer to task `seq`, or its ready signal. */
export type ThreadReply =
  | { seq: number; result: unknown }
  | { seq: number; failed: WireError }
  /** A part of task `seq`'s answer, before it (a streamed decode). */
  | { seq: number; part: unknown }
  /** Sent once loaded: task budgets start then. */
  | { ready: true };

function decode(req: ThreadRequest, port: MessagePort): unknown {
  const decoder = DECODERS[req.kind] as (
    method: string,
    body: Uint8Array,
    id: number,
    task: ThreadRequest & { release: () => void; emit: (part: unknown) => void },
  ) => unknown;
  // The body is this thread's (transferred): a decoder may free it once it is read (once only).
  const body = req.body as ArrayBuffer & {
    transfer(n: number): unknown;
    readonly detached: boolean;
  };
  const release = () => {
    if (!body.detached) body.transfer(0);
  };
  const emit = (part: unknown) => port.postMessage({ seq: req.seq, part } satisfies ThreadReply);
  return decoder(req.method, new Uint8Array(req.body), req.id, { ...req, release, emit });
}

/**
 * A parse refused before allocating past the heap: the failure reaching the heap limit gives
 * (./decode-thread.ts), the thread intact.
 */
function overHeap(): RpcCallError {
  const { heapMb } = workerData as ThreadData;
  return new RpcCallError(`reply decode over ${heapMb} MiB`, 'http_error', false, undefined, {
    final: true,
  });
}

function handle(req: ThreadRequest, port: MessagePort): ThreadReply {
  try {
    return { seq: req.seq, result: decode(req, port) };
  } catch (err) {
    return { seq: req.seq, failed: toWireError(err instanceof JsonHeapError ? overHeap() : err) };
  }
}

/**
 * The warm-up's size (./warm-up.ts): a few hundred subdomains, twice, take the first real scan's
 * classification most of the way to a warm one's (BENCHMARKS.md, "Cold scans of a large parent").
 */
const WARM_UP = { subdomains: 500, rounds: 2 };

const port = parentPort;
if (!port) throw new Error('discovery-thread runs in a worker thread');
try {
  warmUp(WARM_UP.subdomains, WARM_UP.rounds);
} catch {
  // Only the first scan's speed depends on it: a warm-up that failed leaves a thread that works.
}
port.on('message', (req: ThreadRequest) => port.postMessage(handle(req, port)));
port.postMessage({ ready: true } satisfies ThreadReply);
