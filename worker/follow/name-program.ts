import { NAME_PROGRAM_ID, toBase58 } from '../../src/core/sns/pda.js';
import { SCAN_SLICE } from '../sns/discovery-decode.js';

/** The name program's address (base58): what the stream, the gap reads and the checks follow. */
export const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/**
 * The `dataSlice` of the stream's `programSubscribe`: from byte 0 (the parent, which the
 * whole-program subscription filters on in process) to the end of the scan's slice, so the rest
 * is exactly what a scan classifies (worker/sns/change.ts). 130 bytes, 176 base64 characters.
 */
export const HEAD_SLICE = Object.freeze({
  offset: 0,
  length: SCAN_SLICE.offset + SCAN_SLICE.length,
});

/** The {@link SCAN_SLICE} part of a head, as worker/sns/change.ts reads it. */
export const scanSliceOf = (head: Buffer): Buffer => head.subarray(SCAN_SLICE.offset);

/** Base64 characters of the head: 132 bytes, one more than the slice needs' last group. */
const HEAD_CHARS = Math.ceil(HEAD_SLICE.length / 3) * 4;

/**
 * The first {@link HEAD_SLICE} bytes of base64 `data` (fewer when it is shorter), decoding only
 * those characters, in a buffer of their own. Not a view into Buffer's shared pool: a kept head
 * would pin the whole slab, and the slab's size differs between Node lines (8 KiB, 64 KiB).
 */
export function headOf(data: string): Buffer {
  const decoded = Buffer.from(data.slice(0, HEAD_CHARS), 'base64');
  const head = Buffer.allocUnsafeSlow(Math.min(decoded.length, HEAD_SLICE.length));
  decoded.copy(head, 0, 0, head.length);
  return head;
}
