/**
 * Base58 (Bitcoin alphabet) as `bs58` and web3.js's `toBase58()` write it: a `1` per leading zero
 * byte, then the big-endian number's digits. Dividing by 58^5 over 16-bit limbs beats `base-x`'s
 * byte-by-digit loop (BENCHMARKS.md, "Costs the code's comments refer to") and drops a dependency.
 */

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const DIGIT_OF = new Map<string, number>([...ALPHABET].map((ch, i) => [ch, i]));
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

/** Decodes base58 text; throws TypeError for a character outside the alphabet. */
export function fromBase58(text: string): Buffer {
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  const bytes: number[] = []; // little-endian base-256 digits
  for (let i = zeros; i < text.length; i++) {
    const digit = DIGIT_OF.get(text[i] as string);
    if (digit === undefined) throw new TypeError(`not base58: ${JSON.stringify(text)}`);
    let carry = digit;
    for (let j = 0; j < bytes.length; j++) {
      carry += (bytes[j] as number) * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  const out = Buffer.alloc(zeros + bytes.length);
  for (let i = 0; i < bytes.length; i++) out[out.length - 1 - i] = bytes[i] as number;
  return out;
}
