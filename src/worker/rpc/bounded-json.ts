/**
 * JSON parsing with bounds an upstream cannot talk its way past: `JSON.parse` cannot be
 * interrupted and its cost follows the values it builds, not the bytes, so a body is first scanned
 * in a plain loop that bounds nesting, containers and strings (docs/design.md, "Replies from an
 * RPC").
 */

/** The bounds of one parse. */
export type JsonBounds = {
  /** Deepest nesting of objects and arrays accepted (a Solana reply needs at most 8). */
  readonly maxDepth: number;
  /**
   * Most values per byte of body, beyond a small allowance. Every value is counted: objects,
   * arrays, strings (keys included), and the numbers and literals, which each follow a comma or
   * a colon. A reply of accounts holds about one per 8 bytes; bodies built to be expensive, one
   * per 2 to 5.
   */
  readonly maxValuesPerByte: number;
};

/** The bounds every RPC reply is parsed with. */
export const RPC_JSON_BOUNDS: JsonBounds = Object.freeze({ maxDepth: 8, maxValuesPerByte: 1 / 5 });

/** The body breaks a bound; `reason` says which. */
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
 * Checks `bytes` against `bounds` without building anything. It does not validate JSON (the
 * parse that follows does); it counts what a parse would build.
 *
 * @throws JsonBoundsError when the nesting or the value count is past the bound.
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
      // Each value after the first of a container follows one of these: a number or a literal
      // has no mark of its own, and a key's value is counted at its colon.
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
 * `JSON.parse` of UTF-8 `bytes` once {@link checkJsonBounds} has passed.
 *
 * @throws JsonBoundsError past the bounds; SyntaxError for a body that is not JSON.
 */
export function parseBoundedJson(bytes: Uint8Array, bounds: JsonBounds = RPC_JSON_BOUNDS): unknown {
  checkJsonBounds(bytes, bounds);
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
}
