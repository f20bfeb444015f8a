/**
 * Minimal Bitcoin-alphabet base58 codec for the RPC simulator (memcmp filter bytes, pubkey
 * params, `base58` account encoding). Quadratic, which is fine for the short inputs the
 * simulator sees (pubkeys, filters of at most 128 bytes).
 */

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const DIGIT_OF = new Map<string, number>([...ALPHABET].map((ch, i) => [ch, i]));

/**
 * Encodes bytes as base58 (each leading zero byte becomes a leading `1`).
 * @param bytes any byte array, possibly empty (gives '').
 */
export function base58Encode(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits: number[] = []; // little-endian base-58 digits
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i] ?? 0;
    for (let j = 0; j < digits.length; j++) {
      carry += (digits[j] ?? 0) * 256;
      digits[j] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  let out = '1'.repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) out += ALPHABET[digits[i] ?? 0];
  return out;
}

/**
 * Decodes a base58 string.
 * @returns the bytes, or `undefined` if the string holds a character outside the alphabet.
 */
export function base58Decode(text: string): Buffer | undefined {
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  const bytes: number[] = []; // little-endian base-256 digits
  for (let i = zeros; i < text.length; i++) {
    const digit = DIGIT_OF.get(text[i] ?? '');
    if (digit === undefined) return undefined;
    let carry = digit;
    for (let j = 0; j < bytes.length; j++) {
      carry += (bytes[j] ?? 0) * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  const out = Buffer.alloc(zeros + bytes.length);
  for (let i = 0; i < bytes.length; i++) out[out.length - 1 - i] = bytes[i] ?? 0;
  return out;
}

/**
 * Checks that `text` is the base58 form of a 32-byte public key. Base58 is canonical, so a
 * string that passes can be used as a map key for that key.
 */
export function isBase58Pubkey(text: string): boolean {
  if (text.length < 32 || text.length > 44) return false;
  return base58Decode(text)?.length === 32;
}
