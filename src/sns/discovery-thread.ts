import { parentPort } from 'node:worker_threads';
import { toWireError, type WireError } from '../rpc/envelope.js';
import { classifyProgramAccounts, type Classified } from './discovery-decode.js';

/**
 * The discovery thread: a `node:worker_threads` Worker started by ./discovery-runner.ts, never
 * imported. It takes the body of a `getProgramAccounts` reply (its memory transferred, not copied)
 * and answers with what ./discovery-decode.ts makes of it, errors as data.
 */

export type ThreadRequest = {
  seq: number;
  method: string;
  /** JSON-RPC id of the request the body answers. */
  id: number;
  /** The reply body, transferred. */
  body: ArrayBuffer;
  parentKey: Uint8Array;
};

export type ThreadReply =
  | { seq: number; classified: Classified<WireError> }
  /** The body is no JSON-RPC reply to the request (./envelope.ts): the round trip failed. */
  | { seq: number; failed: WireError };

function handle(req: ThreadRequest): ThreadReply {
  const { seq } = req;
  let classified: Classified<unknown>;
  try {
    const body = new Uint8Array(req.body);
    classified = classifyProgramAccounts(req.method, body, req.id, req.parentKey);
  } catch (err) {
    return { seq, failed: toWireError(err) };
  }
  return classified.kind === 'listed'
    ? { seq, classified }
    : { seq, classified: { ...classified, error: toWireError(classified.error) } };
}

const port = parentPort;
if (!port) throw new Error('discovery-thread runs in a worker thread');
port.on('message', (req: ThreadRequest) => port.postMessage(handle(req)));
