/**
 * JSON parsing bounded before `JSON.parse`, which cannot be interrupted and costs by values built,
 * not bytes (docs/design.md, "Replies from an RPC").
 */
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
 * @throws JsonBoundsError past the nesting or value bound.
 */
export function checkJsonBounds(bytes: Uint8Array, bounds: JsonBounds): void {
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
}

/**
 * A parse would allocate more than the thread's heap has left. Checked before the allocation:
 * one allocation past a worker's heap limit can abort the whole process, not just the thread.
 */
export class JsonHeapError extends Error {
  override readonly name = 'JsonHeapError';
}

/**
 * Bytes handed to one `JSON.parse`; longer objects are parsed member by member, longer arrays in
 * runs of members up to this size. One `JSON.parse` (or one string of the body) allocates all at
 * once and cannot be interrupted, and a worker terminated at its heap limit only gets a little
 * headroom to stop in: a whole body parsed at once can overrun it and abort the process. Between
 * pieces, termination takes effect.
 */
export const PIECE_BYTES = 256 * 1024;

/** First bytes of a string, a number or a literal. */
const VALUE_START = new Set(Buffer.from('"-0123456789tfn'));
const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

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

/** Where the value starting at or after `start` ends: the next `,` `]` `}` outside it, or `end`. */
function valueEnd(buf: Buffer, start: number, end: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < end; i++) {
    const b = buf[i] as number;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_BRACE || b === OPEN_BRACKET) depth++;
    else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      if (depth === 0) return i;
      depth--;
    } else if (b === COMMA && depth === 0) return i;
  }
  return end;
}

/** Like `JSON.parse` of `buf[start, end)`, in pieces of at most `piece` bytes. */
function parseSpan(buf: Buffer, start: number, end: number, piece: number): unknown {
  while (start < end && isSpace(buf[start] as number)) start++;
  while (end > start && isSpace(buf[end - 1] as number)) end--;
  const open = buf[start];
  if (end - start <= piece || (open !== OPEN_BRACE && open !== OPEN_BRACKET)) {
    // Not JSON (a proxy's page): fail as `JSON.parse` would, before building its text.
    if (end - start > piece && !VALUE_START.has(open as number)) {
      throw new SyntaxError(`unexpected byte ${open} at ${start}`);
    }
    // The UTF-8 text and what it parses to: at most 2 bytes per byte each.
    if (end - start > piece) reserve(4 * (end - start));
    return JSON.parse(buf.toString('utf8', start, end));
  }
  const close = open === OPEN_BRACE ? CLOSE_BRACE : CLOSE_BRACKET;
  if (buf[end - 1] !== close) throw new SyntaxError(`unterminated value at byte ${start}`);
  const inner = end - 1;
  let at = start + 1;
  while (at < inner && isSpace(buf[at] as number)) at++;
  // An array's members in chunks: runs of small members parsed together, each large one alone.
  const chunks: unknown[][] = [];
  let runStart = -1;
  let runEnd = -1;
  const flush = () => {
    if (runStart < 0) return;
    chunks.push(JSON.parse(`[${buf.toString('utf8', runStart, runEnd)}]`) as unknown[]);
    runStart = -1;
  };
  const object: Record<string, unknown> = {};
  while (at < inner) {
    let key: string | undefined;
    if (open === OPEN_BRACE) {
      const colon = keyEnd(buf, at, inner);
      const parsed: unknown = JSON.parse(buf.toString('utf8', at, colon));
      if (typeof parsed !== 'string') throw new SyntaxError(`object key not a string at ${at}`);
      key = parsed;
      at = colon + 1;
    }
    const stop = valueEnd(buf, at, inner);
    if (stop < inner && buf[stop] !== COMMA) throw new SyntaxError(`unexpected byte at ${stop}`);
    if (key === undefined) {
      let first = at;
      while (first < stop && isSpace(buf[first] as number)) first++;
      if (first === stop) throw new SyntaxError(`missing array member at byte ${at}`);
      if (runStart >= 0 && stop - runStart > piece) flush();
      if (stop - at <= piece) {
        if (runStart < 0) runStart = at;
        runEnd = stop;
      } else chunks.push([parseSpan(buf, at, stop, piece)]);
    } else {
      const value = parseSpan(buf, at, stop, piece);
      if (key === '__proto__') {
        // As `JSON.parse` builds it: an own property, not the prototype.
        Object.defineProperty(object, key, {
          value,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      } else object[key] = value;
    }
    if (stop === inner) break;
    at = stop + 1;
    if (at >= inner) throw new SyntaxError(`trailing comma at byte ${stop}`);
  }
  if (open === OPEN_BRACE) return object;
  flush();
  const members = chunks.reduce((sum, c) => sum + c.length, 0);
  reserve(8 * members);
  const array = new Array<unknown>(members);
  let i = 0;
  for (const c of chunks) for (const v of c) array[i++] = v;
  return array;
}

/** Where the key starting at `start` ends: its colon. */
function keyEnd(buf: Buffer, start: number, end: number): number {
  let inString = false;
  for (let i = start; i < end; i++) {
    const b = buf[i] as number;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === COLON) return i;
    else if (!isSpace(b)) throw new SyntaxError(`unexpected byte in an object key at ${i}`);
  }
  throw new SyntaxError(`object key without a value at byte ${start}`);
}

/**
 * `JSON.parse` of UTF-8 `bytes` after {@link checkJsonBounds}, with the same result; a body over
 * `piece` bytes is parsed piece by piece (see {@link PIECE_BYTES}).
 *
 * @throws JsonBoundsError past the bounds; SyntaxError for non-JSON; JsonHeapError where one
 *   allocation would not fit the heap left.
 */
export function parseBoundedJson(
  bytes: Uint8Array,
  bounds: JsonBounds = RPC_JSON_BOUNDS,
  piece: number = PIECE_BYTES,
): unknown {
  checkJsonBounds(bytes, bounds);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length <= piece) return JSON.parse(buf.toString('utf8'));
  return parseSpan(buf, 0, buf.length, piece);
}
