/**
 * JSON parsing bounded before `JSON.parse`, which cannot be interrupted and costs by values built,
 * not bytes (docs/design.md, "Replies from an RPC").
 */

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
 * `JSON.parse` of UTF-8 `bytes` after {@link checkJsonBounds}.
 *
 * @throws JsonBoundsError past the bounds; SyntaxError for non-JSON.
 */
export function parseBoundedJson(bytes: Uint8Array, bounds: JsonBounds = RPC_JSON_BOUNDS): unknown {
  checkJsonBounds(bytes, bounds);
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
}
