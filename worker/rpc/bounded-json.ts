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

/** The one array a split parse takes apart ({@link parseBoundedJsonSplit}). */
type Target = {
  /** Byte offsets of its `[` and `]`. */
  open: number;
  close: number;
  /** Each element's first byte and the byte after it (its comma or the `]`), whitespace included. */
  starts: number[];
  ends: number[];
  /** Values counted inside it (separators included). */
  values: number;
};

/** Whether bytes `from` to `to` of `bytes` are `key` (ASCII). */
function keyIs(bytes: Uint8Array, from: number, to: number, key: string): boolean {
  if (to - from !== key.length) return false;
  for (let k = 0; k < key.length; k++) if (bytes[from + k] !== key.charCodeAt(k)) return false;
  return true;
}

/**
 * {@link checkJsonBounds}'s scan, which can also find the array a path of object keys leads to.
 * A string is skipped with `indexOf` (native, most of a reply's bytes are in strings), not byte by
 * byte in JavaScript.
 *
 * @param path object keys from the top: an array reached through them, or through a leading part
 *   of them (`result`, or `result.value`), is the target; found more than once, there is none.
 */
function scan(
  bytes: Uint8Array,
  bounds: JsonBounds,
  path?: readonly string[],
  stopAtTarget = false,
): { values: number; target: Target | undefined } {
  const n = bytes.length;
  const maxValues = 64 + Math.floor(n * bounds.maxValuesPerByte);
  // Per open container (by depth): an object, and how many keys of `path` led to it (-1: none).
  const isObject = new Uint8Array(bounds.maxDepth + 2);
  const matched = new Int8Array(bounds.maxDepth + 2);
  let depth = 0;
  let values = 0;
  let expectKey = false;
  /** Keys of `path` matched by the key just read, for the value after it (-1: none). */
  let pending = -1;
  let target: Target | undefined;
  let targets = 0;
  /** Depth of the target while it is open. */
  let inside = -1;
  for (let i = 0; i < n; i++) {
    const b = bytes[i] as number;
    if (b === QUOTE) {
      values++;
      let end = bytes.indexOf(QUOTE, i + 1);
      // A quote after an odd run of backslashes is escaped.
      while (end > 0) {
        let k = end - 1;
        while (bytes[k] === BACKSLASH) k--;
        if (((end - 1 - k) & 1) === 0) break;
        end = bytes.indexOf(QUOTE, end + 1);
      }
      if (end < 0) end = n; // unterminated: the parse refuses it
      if (expectKey) {
        expectKey = false;
        const m = matched[depth] as number;
        pending =
          path && m >= 0 && m < path.length && keyIs(bytes, i + 1, end, path[m] as string)
            ? m + 1
            : -1;
      } else pending = -1;
      i = end;
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      values++;
      if (++depth > bounds.maxDepth) {
        throw new JsonBoundsError(`nested deeper than ${bounds.maxDepth}`);
      }
      isObject[depth] = b === OPEN_BRACE ? 1 : 0;
      matched[depth] = depth === 1 ? 0 : pending;
      expectKey = b === OPEN_BRACE;
      if (b === OPEN_BRACKET && pending > 0 && ++targets === 1) {
        target = { open: i, close: -1, starts: [i + 1], ends: [], values };
        if (stopAtTarget) return { values, target };
        inside = depth;
      }
      pending = -1;
    } else if (b === COMMA || b === COLON) {
      // Numbers and literals have no mark of their own: count the comma or colon before each.
      values++;
      if (b === COMMA) {
        expectKey = isObject[depth] === 1;
        pending = -1;
        if (depth === inside) {
          (target as Target).ends.push(i);
          (target as Target).starts.push(i + 1);
        }
      }
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      if (depth === inside) {
        const t = target as Target;
        t.close = i;
        t.values = values - t.values;
        t.ends.push(i);
        inside = -1;
        if (t.starts.length === 1 && blank(bytes, t.open + 1, i))
          t.starts.length = t.ends.length = 0;
      }
      depth--;
      expectKey = false;
      pending = -1;
    } else continue;
    if (values > maxValues) {
      throw new JsonBoundsError(`more than ${maxValues} values in ${n} bytes`);
    }
  }
  return { values, target: targets === 1 && target && target.close >= 0 ? target : undefined };
}

/** Whether byte `b` is JSON whitespace (RFC 8259, section 2). */
export const isJsonSpace = (b: number | undefined): boolean =>
  b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** JSON whitespace only, from `from` to `to`. */
function blank(bytes: Uint8Array, from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (!isJsonSpace(bytes[k])) return false;
  return true;
}

/**
 * Counts what a parse of `bytes` would build, building nothing (validity is the parse's job).
 *
 * @returns how many values the parse builds, at most (keys included).
 * @throws JsonBoundsError past the nesting or value bound.
 */
export function checkJsonBounds(bytes: Uint8Array, bounds: JsonBounds): number {
  return scan(bytes, bounds).values;
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
  return parseScanned(buf, values, onText);
}

/** The parse of {@link parseBoundedJson} once scanned: `values` counted in `buf`. */
function parseScanned(buf: Buffer, values: number, onText: (() => void) | undefined): unknown {
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

/** Elements parsed between two heap checks (a few hundred KiB of a reply). */
const ELEMENTS_PER_CHECK = 256;

/**
 * The elements of the array a split parse left out, each parsed on its own when asked for (a
 * small `JSON.parse` whose values die young unless the caller keeps them).
 */
export class JsonElements {
  private readonly buf: Buffer;
  /** @internal built by {@link parseBoundedJsonSplit} only. */
  constructor(
    bytes: Uint8Array,
    private readonly target: Target,
  ) {
    this.buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** How many elements the array holds. */
  get count(): number {
    return this.target.starts.length;
  }

  /**
   * Element `i` (0 to {@link count} - 1) as `JSON.parse` builds it. Every
   * {@link ELEMENTS_PER_CHECK} elements, first checks that the heap holds what the next ones can
   * build, as {@link parseBoundedJson} does for a whole body.
   *
   * @throws SyntaxError for an element that is not JSON (`[1,,2]`); JsonHeapError as above.
   */
  at(i: number): unknown {
    const { starts, ends } = this.target;
    if (i % ELEMENTS_PER_CHECK === 0) {
      const last = Math.min(i + ELEMENTS_PER_CHECK, starts.length) - 1;
      const bytes = (ends[last] as number) - (starts[i] as number);
      reserve(2 * bytes + HEAP_PER_VALUE * Math.min(this.target.values, Math.ceil(bytes / 2)));
    }
    return JSON.parse(this.buf.toString('utf8', starts[i], ends[i]));
  }

  /**
   * Elements `from` to `to - 1` as `JSON.parse` builds them, in one parse of their text as an
   * array (their commas are the array's): one parse a few hundred elements costs less than one an
   * element (BENCHMARKS.md, "Cold scans of a large parent"). First checks that the heap holds what
   * they can build, as {@link at} does; `to - from` is the caller's to bound (at most
   * {@link ELEMENTS_PER_CHECK} keeps the values of a reply that are alive at once as few as
   * {@link at}'s).
   *
   * @throws SyntaxError when one of them is not JSON (as {@link at} would for it); JsonHeapError.
   */
  range(from: number, to: number): unknown[] {
    const { starts, ends } = this.target;
    if (from >= to) return [];
    const bytes = (ends[to - 1] as number) - (starts[from] as number);
    reserve(2 * bytes + HEAP_PER_VALUE * Math.min(this.target.values, Math.ceil(bytes / 2)));
    const list: unknown = JSON.parse(`[${this.buf.toString('utf8', starts[from], ends[to - 1])}]`);
    // The text between the scan's first and last element is those elements and their commas, so
    // this holds for any body the scan split; checked all the same.
    if (!Array.isArray(list) || list.length !== to - from) {
      throw new SyntaxError('elements out of step with the scan');
    }
    return list;
  }
}

/** Elements a caller of {@link JsonElements.range} parses at once. */
export const ELEMENTS_PER_RANGE = ELEMENTS_PER_CHECK;

/** What {@link parseBoundedJsonSplit} gives. */
export type SplitJson<R = never> = {
  /** The body as `JSON.parse` builds it, but the array at the path empty (when it was found). */
  readonly value: unknown;
  /**
   * That array's elements; undefined when the path led to no array, or to more than one, or when
   * `read` holds them.
   */
  readonly elements: JsonElements | undefined;
  /** What an {@link ArrayReader} read of that array, when it could. */
  readonly read?: R;
};

/**
 * Reads the array whose `[` is at `open` in `bytes` straight from the bytes, for a form of it
 * common enough to spare its parse: what it gives must be what its caller would make of the
 * elements `JSON.parse` builds, its `]` the one the scan finds, and each element must hold at
 * most one value per 5 bytes and nest within the depth bound (the bounds every body is held to,
 * {@link RPC_JSON_BOUNDS}), so that a body it reads passes the scan of the slow way.
 * `reserve(n)` fails when the strings of `n` bytes of the array (twice `n`) do not fit the heap:
 * called before those of each stretch of `n` bytes are made.
 *
 * @returns where the array's `]` is and what was read, or undefined for an array in another
 *   form (it is then parsed).
 */
export type ArrayReader<R> = (
  bytes: Uint8Array,
  open: number,
  reserve: (bytes: number) => void,
) => { close: number; read: R } | undefined;

/**
 * {@link parseBoundedJson}, but the one array `path` leads to (or a leading part of it: an array
 * at `result` for `["result", "value"]`) is not built: the rest of the body is parsed with that
 * array empty, and its elements one by one through {@link JsonElements}. A reply of 200,000
 * accounts then never exists as one tree, nor as one text (docs/design.md, "Replies from an
 * RPC"); the bounds are the same, checked over the whole body first. Where the path leads to no
 * array, or to several (repeated keys), the body is parsed whole, as {@link parseBoundedJson}
 * does, and `onText` is called as there; otherwise never (the elements are read from `bytes`).
 *
 * @throws as {@link parseBoundedJson}; an element's SyntaxError or JsonHeapError comes from
 *   {@link JsonElements.at}.
 */
export function parseBoundedJsonSplit<R = never>(
  bytes: Uint8Array,
  path: readonly string[],
  bounds: JsonBounds = RPC_JSON_BOUNDS,
  onText?: () => void,
  reader?: ArrayReader<R>,
): SplitJson<R> {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fast = reader && readSplit(buf, path, bounds, reader);
  if (fast) return fast;
  const { values, target } = scan(bytes, bounds, path);
  if (!target) return { value: parseScanned(buf, values, onText), elements: undefined };
  const outer = Buffer.concat([buf.subarray(0, target.open + 1), buf.subarray(target.close)]);
  return {
    value: parseScanned(outer, values - target.values, undefined),
    elements: new JsonElements(bytes, target),
  };
}

/**
 * {@link parseBoundedJsonSplit} with the array read by `reader`: the body scanned up to the array,
 * the array read, then the rest of the body (all but the array) scanned and parsed as a body of
 * its own, which must lead `path` to that array, and to no other. Whatever does not hold before
 * the parse (the reader's form, the path, a bound) gives undefined, and the body is taken the
 * slow way, which fails as it always did; only the heap's failure propagates. The parse's own
 * failure propagates too: the slow way would split the body at the same array and parse the same
 * text, to the same failure, and a body built to fail there would cost two scans and two parses.
 */
function readSplit<R>(
  buf: Buffer,
  path: readonly string[],
  bounds: JsonBounds,
  reader: ArrayReader<R>,
): SplitJson<R> | undefined {
  let split: { outer: Buffer; values: number; read: R };
  try {
    const open = scan(buf, bounds, path, true).target?.open;
    if (open === undefined) return undefined;
    const got = reader(buf, open, (bytes) => reserve(2 * bytes));
    if (!got) return undefined;
    const outer = Buffer.concat([buf.subarray(0, open + 1), buf.subarray(got.close)]);
    const { values, target } = scan(outer, bounds, path);
    if (target?.open !== open || target.starts.length !== 0) return undefined;
    split = { outer, values, read: got.read };
  } catch (err) {
    if (err instanceof JsonHeapError) throw err;
    return undefined;
  }
  return {
    value: parseScanned(split.outer, split.values, undefined),
    elements: undefined,
    read: split.read,
  };
}
