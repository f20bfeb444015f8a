import bs58 from 'bs58';

/**
 * Base58 for the RPC simulator (memcmp filter bytes, pubkey params, `base58` account encoding),
 * from the `bs58` package that web3.js itself uses, so the simulator shares no code with the
 * gateway's own codec (src/core/sns/base58.ts), which it helps test.
 */

/** Encodes bytes as base58 (each leading zero byte becomes a leading `1`). */
export function base58Encode(bytes: Uint8Array): string {
  return bs58.encode(bytes);
}

/** @returns the bytes, or `undefined` if the string holds a character outside the alphabet. */
export function base58Decode(text: string): Buffer | undefined {
  const bytes = bs58.decodeUnsafe(text);
  return bytes ? Buffer.from(bytes) : undefined;
}

/**
 * Checks that `text` is the base58 form of a 32-byte public key. Base58 is canonical, so a
 * string that passes can be used as a map key for that key.
 */
export function isBase58Pubkey(text: string): boolean {
  if (text.length < 32 || text.length > 44) return false;
  return base58Decode(text)?.length === 32;
}
