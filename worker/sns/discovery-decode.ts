import { decodeEnvelope, malformed } from '../rpc/envelope.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import { REVERSE_LOOKUP_CLASS } from '../../src/core/sns/pda.js';
import { base64Data, decodeData, reverseText, reverseTextSlice } from './name-slices.js';
import { classifyProgramAccounts, type ListedPart } from './scan-classify.js';

/**
 * The heavy half of discovery, run in the discovery thread so a reply of megabytes never stalls
 * the worker's event loop; it hands back labels and the few texts still to fetch.
 */

export * from './name-slices.js';
export {
  byLabel,
  classifyProgramAccounts,
  type ListedPart,
  type MemberStream,
  type ProgramAccountsSummary,
} from './scan-classify.js';

/**
 * Each reverse text of a {@link reverseTextSlice} reply, or null for a record gone since.
 *
 * @throws RpcCallError (final) for a wrong count, a non-reverse slice, a text past `maxTextBytes`.
 */
export function decodeReverseTexts(
  method: string,
  body: Uint8Array,
  id: number,
  count: number,
  maxTextBytes: number,
): Array<string | null> {
  const reply = decodeEnvelope<{ value?: unknown } | null>(method, body, id);
  const list = reply?.value;
  if (!Array.isArray(list) || list.length !== count) {
    throw malformed(`${method}: wrong account list`);
  }
  const { length } = reverseTextSlice(maxTextBytes);
  const maxChars = Math.ceil(length / 3) * 4;
  return list.map((entry: unknown) => {
    if (entry === null) return null;
    if (typeof entry !== 'object') throw malformed(`${method}: an account entry is not an object`);
    const slice = decodeData((entry as { data?: unknown }).data, maxChars);
    if (slice.length < 36 || !slice.subarray(0, 32).equals(REVERSE_LOOKUP_CLASS)) {
      throw malformed(`${method}: not a reverse record's slice`);
    }
    const payload = slice.subarray(32);
    if (payload.readUInt32LE(0) > maxTextBytes) {
      throw malformed(`${method}: a reverse text longer than ${maxTextBytes} bytes`);
    }
    return reverseText(payload) ?? null;
  });
}

/** An existence check's read slot, and each key's presence. */
export type Existence = { slot: number | undefined; exists: boolean[] };

/**
 * Decodes a zero-length `dataSlice` `getMultipleAccounts` reply: false for a null entry (closed;
 * the name program's delete closes the account).
 *
 * @throws RpcCallError (final) for a wrong count or an entry that is not a dataless account.
 */
export function decodeExistence(
  method: string,
  body: Uint8Array,
  id: number,
  count: number,
): Existence {
  const reply = decodeEnvelope<{ value?: unknown; context?: { slot?: unknown } } | null>(
    method,
    body,
    id,
  );
  const list = reply?.value;
  if (!Array.isArray(list) || list.length !== count) {
    throw malformed(`${method}: wrong account list`);
  }
  const exists = list.map((entry: unknown) => {
    if (entry === null) return false;
    if (typeof entry !== 'object') throw malformed(`${method}: an account entry is not an object`);
    base64Data((entry as { data?: unknown }).data, 0);
    return true;
  });
  const slot = reply?.context?.slot;
  return { slot: isSlot(slot) ? slot : undefined, exists };
}

/**
 * Every decode the thread runs, by task kind (../discovery-thread.ts dispatches on it, and
 * `DecodeThread.run()` types from it): a new method's decoder is one entry.
 */
export const DECODERS = {
  envelope: (method, body, id) => decodeEnvelope<unknown>(method, body, id),
  'program-accounts': (
    method,
    body,
    id,
    task: {
      parentKey: Uint8Array;
      /** Members a part ({@link MemberStream}); none: no parts, the summary sorted. */
      partMembers?: number;
      /** Members of the first part of a large reply ({@link MemberStream.first}). */
      firstPartMembers?: number;
      /** Cut records a part at most. */
      cutBatch?: number;
      /** A request waits on the scan ({@link MemberStream.answer}). */
      answer?: boolean;
      release?: () => void;
      emit?: (part: ListedPart) => void;
    },
  ) =>
    classifyProgramAccounts(
      method,
      body,
      id,
      task.parentKey,
      task.release,
      task.partMembers && task.emit
        ? {
            size: task.partMembers,
            ...(task.firstPartMembers === undefined ? {} : { first: task.firstPartMembers }),
            cutBatch: task.cutBatch ?? 1,
            emit: task.emit,
            ...(task.answer === true ? { answer: true } : {}),
          }
        : undefined,
    ),
  'reverse-texts': (method, body, id, task: { count: number; maxTextBytes: number }) =>
    decodeReverseTexts(method, body, id, task.count, task.maxTextBytes),
  existence: (method, body, id, task: { count: number }) =>
    decodeExistence(method, body, id, task.count),
} satisfies Record<string, (method: string, body: Uint8Array, id: number, task: never) => unknown>;
