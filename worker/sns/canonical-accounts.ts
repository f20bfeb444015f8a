import { base58RunEnd } from '../../src/core/sns/base58.js';
import { isJsonSpace, type ArrayReader } from '../rpc/bounded-json.js';

/**
 * A `getProgramAccounts` account list read straight from the reply's bytes, without a parse, when
 * it is written as Agave writes it (docs/design.md, "Replies from an RPC"): compact, keys sorted,
 * each element
 * `{"account":{"data":["<base64>","base64"],"executable":<bool>,"lamports":<u64>,"owner":"<base58>","rentEpoch":<u64>,"space":<u64>},"pubkey":"<base58>"}`.
 * A list written otherwise (another key order, whitespace inside an element, an escape, a field
 * more or less) is not read here: the caller parses it as JSON. What is read is what `JSON.parse`
 * would give: every string read holds only ASCII characters that need no escape.
 */

/** Keys and text around an element's values, in order. */
const enc = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));
const OPEN = enc('{"account":{"data":["');
const ENCODING = enc('","base64"],"executable":');
const LAMPORTS = enc(',"lamports":');
const OWNER = enc(',"owner":"');
const RENT_EPOCH = enc('","rentEpoch":');
const SPACE = enc(',"space":');
const PUBKEY = enc('},"pubkey":"');
const TRUE = enc('true');
const FALSE = enc('false');

/** Base64 characters and its padding, by byte. */
const BASE64 = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=') {
  BASE64[c.charCodeAt(0)] = 1;
}

/** A base58 key's length in characters: 32 bytes take 32 to 44. */
const KEY_CHARS = { min: 32, max: 44 };

/** The accounts read, in reply order. */
export type CanonicalAccounts = {
  /** Each account's key (base58). */
  pubkeys: string[];
  /** Each account's data (base64 text). */
  texts: string[];
};

/** Whether `bytes` hold `text` at `at`. */
function holds(bytes: Uint8Array, at: number, text: Uint8Array): boolean {
  if (at + text.length > bytes.length) return false;
  for (let k = 0; k < text.length; k++) if (bytes[at + k] !== text[k]) return false;
  return true;
}

/** The end of a JSON number at `at` that is an unsigned integer (no sign, fraction, exponent), or -1. */
function unsignedEnd(bytes: Uint8Array, at: number): number {
  let i = at;
  while (i < bytes.length && (bytes[i] as number) >= 0x30 && (bytes[i] as number) <= 0x39) i++;
  if (i === at || (bytes[at] === 0x30 && i - at > 1)) return -1;
  return i;
}

/** The end of a base58 key's characters at `at` (a key's length), or -1. */
function keyEnd(bytes: Uint8Array, at: number): number {
  const end = base58RunEnd(bytes, at, KEY_CHARS.max);
  return end - at >= KEY_CHARS.min ? end : -1;
}

/**
 * The reader of an account list in the form above ({@link ArrayReader}): each element's key and
 * data text, in order. An element in another form gives undefined, and so does a data text longer
 * than `maxTextChars` (the caller's parse refuses it; nothing is wrong with the others for that).
 */
export function canonicalAccounts(maxTextChars: number): ArrayReader<CanonicalAccounts> {
  return (bytes, open, reserve) => readAccounts(bytes, open, maxTextChars, reserve);
}

function readAccounts(
  bytes: Uint8Array,
  open: number,
  maxTextChars: number,
  reserve: (bytes: number) => void,
): { close: number; read: CanonicalAccounts } | undefined {
  const pubkeys: string[] = [];
  const texts: string[] = [];
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let i = open + 1;
  while (isJsonSpace(bytes[i])) i++;
  if (bytes[i] === 0x5d) return { close: i, read: { pubkeys, texts } };
  let reservedTo = i;
  for (;;) {
    if (i >= reservedTo) {
      reserve(RESERVE_STRETCH);
      reservedTo = i + RESERVE_STRETCH;
    }
    if (!holds(bytes, i, OPEN)) return undefined;
    const text = i + OPEN.length;
    i = text;
    const textTo = Math.min(bytes.length, text + maxTextChars);
    while (i < textTo && (bytes[i] as number) < 128 && BASE64[bytes[i] as number] === 1) i++;
    const textEnd = i;
    if (!holds(bytes, i, ENCODING)) return undefined;
    i += ENCODING.length;
    if (holds(bytes, i, FALSE)) i += FALSE.length;
    else if (holds(bytes, i, TRUE)) i += TRUE.length;
    else return undefined;
    if (!holds(bytes, i, LAMPORTS)) return undefined;
    i = unsignedEnd(bytes, i + LAMPORTS.length);
    if (i < 0 || !holds(bytes, i, OWNER)) return undefined;
    i = keyEnd(bytes, i + OWNER.length);
    if (i < 0 || !holds(bytes, i, RENT_EPOCH)) return undefined;
    i = unsignedEnd(bytes, i + RENT_EPOCH.length);
    if (i < 0 || !holds(bytes, i, SPACE)) return undefined;
    i = unsignedEnd(bytes, i + SPACE.length);
    if (i < 0 || !holds(bytes, i, PUBKEY)) return undefined;
    const key = i + PUBKEY.length;
    i = keyEnd(bytes, key);
    if (i < 0 || bytes[i] !== 0x22 || bytes[i + 1] !== 0x7d) return undefined;
    pubkeys.push(buf.toString('latin1', key, i));
    texts.push(buf.toString('latin1', text, textEnd));
    i += 2;
    while (isJsonSpace(bytes[i])) i++;
    if (bytes[i] === 0x5d) return { close: i, read: { pubkeys, texts } };
    if (bytes[i] !== 0x2c) return undefined;
    i++;
    while (isJsonSpace(bytes[i])) i++;
  }
}

/** Bytes of elements read between two heap checks (a few hundred accounts). */
const RESERVE_STRETCH = 128 * 1024;
