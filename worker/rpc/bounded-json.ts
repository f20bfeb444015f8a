/**
 * JSON parsing bounded before `JSON.parse`, which cannot be interrupted and costs by values built,
 * not bytes (docs/design.md, "Replies from an RPC").
 */
import { constants } from 'node:buffer';
import { getHeapStatistics } from 'node:v8';

/** Bounds of one parse. */
export type JsonBounds = {
  /** Deepest nesting of objects and arrays (a Solana reply needs at most 8). */
  readonly maxDepth: number;
  /**
   * Most values per body byte, beyond a small allowance; every value counts, keys included. An
   * account reply holds about one per 8 bytes, a body built to be expensive one per 2 to 5.
   */
  readonly maxValuesPerByte: number;
};

/** Bounds of every RPC reply. */
export const RPC_JSON_BOUNDS: JsonBounds = Object.freeze({ maxDepth: 8, maxValuesPerByte: 1 / 5 });

/** The body breaks a bound. */
export class JsonBoundsError extends Error {
  override readonly name = 'JsonBoundsError';
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/**
 * Counts what a parse of `bytes` would build, building nothing (validity is the parse's job).
 *
 * @returns how many values the parse builds, at most (keys included).
 * @throws JsonBoundsError past the nesting or value bound.
 */
export function checkJsonBounds(bytes: Uint8Array, bounds: JsonBounds): number {
  const maxValues = 64 + Math.floor(bytes.length * bounds.maxValuesPerByte);
  let depth = 0;
  let values = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
      continue;
    }
    if (b === QUOTE) {
      inString = true;
      values++;
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      values++;
      if (++depth > bounds.maxDepth) {
        throw new JsonBoundsError(`nested deeper than ${bounds.maxDepth}`);
      }
    } else if (b === COMMA || b === COLON) {
      // Numbers and literals have no mark of their own: count the comma or colon before each.
      values++;
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      depth--;
    } else continue;
    if (values > maxValues) {
      throw new JsonBoundsError(`more than ${maxValues} values in ${bytes.length} bytes`);
    }
  }
  return values;
}

/**
 * A parse would allocate more than the thread's heap has left. Checked before the allocation:
 * one allocation past a worker's heap limit can abort the whole process, not just the thread.
 */
export class JsonHeapError extends Error {
  override readonly name = 'JsonHeapError';
}

/**
 * Heap bytes one counted value may cost once parsed: about 1.5 times the worst measured
 * (BENCHMARKS.md, "Decoding large replies").
 */
const HEAP_PER_VALUE = 64;

/**
 * Bodies up to this many bytes are parsed without asking the heap first: what they can build fits
 * the headroom a thread stopped at its heap limit still has (Node's 16 MiB).
 */
const SMALL_BODY_BYTES = 256 * 1024;

/**
 * Fails with {@link JsonHeapError} unless `bytes` more fit under the heap limit (garbage not yet
 * collected counts as used, so this errs towards failing).
 */
function reserve(bytes: number): void {
  const heap = getHeapStatistics();
  if (heap.used_heap_size + bytes > heap.heap_size_limit) {
    throw new JsonHeapError(`a parse needs ${bytes} more bytes than the heap has`);
  }
}

/**
 * `JSON.parse` of UTF-8 `bytes` after {@link checkJsonBounds}, as one `JSON.parse` once the heap
 * is known to hold all it can build: the body's text (two bytes a character at most) and
 * {@link HEAP_PER_VALUE} per value counted. `JSON.parse` cannot be interrupted, so the check
 * comes first (docs/design.md, "Replies from an RPC").
 *
 * @param onText called once the body's text is made, before the parse: a caller owning `bytes`
 *   can release them there, so the body, its text and what it parses to are not all held at once.
 * @throws JsonBoundsError past the bounds; SyntaxError for non-JSON; JsonHeapError where the
 *   parse would not fit the heap left, or the text would be longer than a string can be.
 */
export function parseBoundedJson(
  bytes: Uint8Array,
  bounds: JsonBounds = RPC_JSON_BOUNDS,
  onText?: () => void,
): unknown {
  const values = checkJsonBounds(bytes, bounds);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length > SMALL_BODY_BYTES) {
    if (buf.length > constants.MAX_STRING_LENGTH) {
      throw new JsonHeapError(`a body of ${buf.length} bytes is longer than a string can be`);
    }
    reserve(2 * buf.length + HEAP_PER_VALUE * values);
  }
  const text = buf.toString('utf8');
  onText?.();
  return JSON.parse(text);
}
