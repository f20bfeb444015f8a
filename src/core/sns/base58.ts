/**
 * Base58 (Bitcoin alphabet) as `bs58` and web3.js's `toBase58()` write it: a `1` per leading zero
 * byte, then the big-endian number's digits. Dividing by 58^5 over 16-bit limbs beats `base-x`'s
 * byte-by-digit loop (BENCHMARKS.md, "Costs the code's comments refer to") and drops a dependency.
 */

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const CHUNK = 58 ** 5;

/** Encodes bytes as base58 ('' for no bytes). */
export function toBase58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // Big-endian 16-bit limbs of the bytes after the zeros (an odd count leads with one byte).
  const len = bytes.length - zeros;
  const limbs: number[] = [];
  let start = zeros;
  if (len % 2 === 1) limbs.push(bytes[start++] as number);
  for (; start < bytes.length; start += 2) {
    limbs.push(((bytes[start] as number) << 8) | (bytes[start + 1] as number));
  }
  // Each remainder of 58^5 gives five digits, least significant first.
  const digits: number[] = [];
  let head = 0;
  while (head < limbs.length) {
    let rem = 0;
    for (let i = head; i < limbs.length; i++) {
      const cur = rem * 65536 + (limbs[i] as number);
      const q = Math.floor(cur / CHUNK);
      limbs[i] = q;
      rem = cur - q * CHUNK;
    }
    while (head < limbs.length && limbs[head] === 0) head++;
    for (let k = 0; k < 5; k++) {
      const q = Math.floor(rem / 58);
      digits.push(rem - q * 58);
      rem = q;
    }
  }
  // The last chunk's high digits may be zero: they are not digits of the number.
  let top = digits.length;
  while (top > 0 && digits[top - 1] === 0) top--;
  let out = '1'.repeat(zeros);
  for (let i = top - 1; i >= 0; i--) out += ALPHABET[digits[i] as number];
  return out;
}

/** Each character's digit by char code (-1: not in the alphabet). */
const DIGIT_AT = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DIGIT_AT[ALPHABET.charCodeAt(i)] = i;

/**
 * Where the run of base58 digits in `bytes` (ASCII) from `from` ends: the first index past
 * `from + max - 1`, or of a byte outside the alphabet.
 */
export function base58RunEnd(bytes: Uint8Array, from: number, max: number): number {
  const to = Math.min(bytes.length, from + max);
  let i = from;
  while (i < to) {
    const b = bytes[i] as number;
    if (b >= 128 || (DIGIT_AT[b] as number) < 0) break;
    i++;
  }
  return i;
}

/** 58 to the power of 0 to 5: the scale of a chunk of that many digits. */
const POW58 = [1, 58, 58 ** 2, 58 ** 3, 58 ** 4, 58 ** 5];

/**
 * The number digits `from` to `to - 1` of `text` spell (at most five: below 2^30), or -1 for a
 * character outside the alphabet.
 */
function chunkOf(text: string, from: number, to: number): number {
  let chunk = 0;
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i);
    const digit = code < 128 ? (DIGIT_AT[code] as number) : -1;
    if (digit < 0) return -1;
    chunk = chunk * 58 + digit;
  }
  return chunk;
}

/**
 * Decodes base58 text; throws TypeError for a character outside the alphabet. Five digits at a
 * time (58^5 < 2^30) into 16-bit limbs, as {@link toBase58} divides, rather than digit by digit
 * into bytes (BENCHMARKS.md, "Costs the code's comments refer to").
 */
export function fromBase58(text: string): Buffer {
  let zeros = 0;
  while (zeros < text.length && text.charCodeAt(zeros) === 49) zeros++;
  const limbs: number[] = []; // little-endian base-65536 digits
  for (let i = zeros; i < text.length; i += 5) {
    const end = Math.min(i + 5, text.length);
    const chunk = chunkOf(text, i, end);
    if (chunk < 0) throw new TypeError(`not base58: ${JSON.stringify(text)}`);
    const scale = POW58[end - i] as number;
    let carry = chunk;
    for (let j = 0; j < limbs.length; j++) {
      // At most 2^16 * 58^5 + 2^30: exact in a double.
      const cur = (limbs[j] as number) * scale + carry;
      carry = Math.floor(cur / 65536);
      limbs[j] = cur - carry * 65536;
    }
    while (carry > 0) {
      const q = Math.floor(carry / 65536);
      limbs.push(carry - q * 65536);
      carry = q;
    }
  }
  // Bytes of the number, most significant first, without leading zero bytes.
  const bytes: number[] = [];
  for (let j = limbs.length - 1; j >= 0; j--) {
    const limb = limbs[j] as number;
    bytes.push(limb >> 8, limb & 0xff);
  }
  let lead = 0;
  while (lead < bytes.length && bytes[lead] === 0) lead++;
  const out = Buffer.alloc(zeros + bytes.length - lead);
  for (let i = lead; i < bytes.length; i++) out[zeros + i - lead] = bytes[i] as number;
  return out;
}

/** Little-endian 16-bit limbs of {@link fromBase58Into}'s number (a 64-byte output at most). */
const LIMBS = new Float64Array(33);

/**
 * {@link fromBase58} into `out` when the text decodes to exactly `out.length` bytes (an even
 * count, at most 64), with no allocation: what a lookup of many keys by their bytes wants.
 *
 * @returns false, `out` then unspecified, for any other length or a character outside the
 *   alphabet ({@link fromBase58} says which).
 */
export function fromBase58Into(text: string, out: Uint8Array): boolean {
  const bytes = out.length;
  if (bytes % 2 !== 0 || bytes > 64) throw new RangeError('an even length up to 64 bytes');
  const count = bytes / 2;
  LIMBS.fill(0, 0, count);
  let zeros = 0;
  while (zeros < text.length && text.charCodeAt(zeros) === 49) zeros++;
  for (let i = zeros; i < text.length; i += 5) {
    const end = Math.min(i + 5, text.length);
    const chunk = chunkOf(text, i, end);
    if (chunk < 0) return false;
    const scale = POW58[end - i] as number;
    let carry = chunk;
    for (let j = 0; j < count; j++) {
      // At most 2^16 * 58^5 + 2^30: exact in a double.
      const cur = (LIMBS[j] as number) * scale + carry;
      carry = Math.floor(cur / 65536);
      LIMBS[j] = cur - carry * 65536;
    }
    if (carry > 0) return false; // past `bytes` bytes
  }
  for (let j = 0; j < count; j++) {
    const limb = LIMBS[j] as number;
    out[bytes - 1 - 2 * j] = limb & 0xff;
    out[bytes - 2 - 2 * j] = limb >> 8;
  }
  // fromBase58 gives a zero byte per leading '1', then the number's bytes: `bytes` of them
  // exactly when the number leaves as many zero bytes in front.
  let lead = 0;
  while (lead < bytes && out[lead] === 0) lead++;
  return lead === zeros;
}
