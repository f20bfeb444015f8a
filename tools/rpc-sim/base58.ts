import bs58 from 'bs58';

/**
 * Base58 from `bs58` (web3.js's), so the simulator shares no code with the gateway's own codec,
 * which it helps test.
 */

/** Encodes bytes as base58. */
export function base58Encode(bytes: Uint8Array): string {
  return bs58.encode(bytes);
}

/** Decodes base58; undefined for a character outside the alphabet. */
export function base58Decode(text: string): Buffer | undefined {
  const bytes = bs58.decodeUnsafe(text);
  return bytes ? Buffer.from(bytes) : undefined;
}

/** `text` is a 32-byte key's base58 (canonical, so usable as a map key). */
export function isBase58Pubkey(text: string): boolean {
  if (text.length < 32 || text.length > 44) return false;
  return base58Decode(text)?.length === 32;
}
