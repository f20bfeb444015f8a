import { parentPort } from 'node:worker_threads';
import { decodeEnvelope, toWireError, type WireError } from '../rpc/envelope.js';
import {
  classifyProgramAccounts,
  decodeExistence,
  decodeReverseTexts,
  type Existence,
  type ProgramAccountsSummary,
} from './discovery-decode.js';

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

export type ThreadRequest = Common &
  (
    | { kind: 'envelope' }
    | { kind: 'program-accounts'; parentKey: Uint8Array }
    | { kind: 'reverse-texts'; count: number; maxTextBytes: number }
    | { kind: 'existence'; count: number }
  );

/** What each kind of request answers. */
export type ThreadResults = {
  envelope: unknown;
  'program-accounts': ProgramAccountsSummary;
  'reverse-texts': Array<string | null>;
  existence: Existence;
};

export type ThreadReply =
  | { seq: number; result: unknown }
  | { seq: number; failed: WireError }
  /** Sent once, when the thread has loaded and listens: task budgets start from then. */
  | { ready: true };

function decode(req: ThreadRequest): unknown {
  const body = new Uint8Array(req.body);
  switch (req.kind) {
    case 'envelope':
      return decodeEnvelope(req.method, body, req.id);
    case 'program-accounts':
      return classifyProgramAccounts(req.method, body, req.id, req.parentKey);
    case 'reverse-texts':
      return decodeReverseTexts(req.method, body, req.id, req.count, req.maxTextBytes);
    case 'existence':
      return decodeExistence(req.method, body, req.id, req.count);
  }
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
