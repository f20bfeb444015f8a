/**
 * Name accounts as the SPL Name Service and the SNS registrar lay them out on mainnet: a 96-byte
 * header `parent | owner | class` (`NameRegistryState`), then data. Reverse records have the
 * central state as class and owner and a borsh string as data ("\0" + label under the parent for
 * subdomains; the bare name, no parent, at top level). Also the rules for the names the chain's
 * helpers take.
 */
import { createHash } from 'node:crypto';
import { getDomainKeySync, getReverseKeyFromDomainKey } from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';

/** Name account header length. */
export const NAME_HEADER_LEN = 96;
/** `addDomain`'s default data bytes. */
export const DEFAULT_DOMAIN_SPACE = 1000;
/** Subdomain data bytes, as the SDK's `createSubdomain`. */
export const DEFAULT_SUBDOMAIN_SPACE = 2000;
/** The all-zero key: "no parent", "no class". */
export const ZERO_KEY = PublicKey.default;
/** Owner of names added without one (not a mainnet wallet). */
export const DEFAULT_SIM_OWNER = new PublicKey(
  createHash('sha256').update('sns-gateway rpc-sim default owner').digest(),
);

/** Rent-exempt lamports at mainnet's rates ((128 + len) B × 3480 lamports/B-year × 2 years). */
export function rentExemptLamports(dataLength: number): number {
  return (128 + dataLength) * 3480 * 2;
}

/** The three keys of a name account header. */
export interface NameHeader {
  parent: PublicKey;
  owner: PublicKey;
  nameClass: PublicKey;
}

/** Name account data: the header, then `body`. */
export function encodeNameAccount(header: NameHeader, body: Uint8Array): Buffer {
  return Buffer.concat([
    header.parent.toBuffer(),
    header.owner.toBuffer(),
    header.nameClass.toBuffer(),
    body,
  ]);
}

/** Reverse record data as the registrar writes it ("\0" + label for subdomains). */
export function encodeReverseData(name: string): Buffer {
  const text = Buffer.from(name, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(text.length, 0);
  return Buffer.concat([len, text]);
}

/** The header of name account data; zero keys where the data is too short. */
export function headerOf(data: Buffer): NameHeader {
  const key = (at: number): PublicKey =>
    data.length >= at + 32 ? new PublicKey(data.subarray(at, at + 32)) : ZERO_KEY;
  return { parent: key(0), owner: key(32), nameClass: key(64) };
}

/** Keys written by `addSubdomain`. */
export interface SubdomainKeys {
  /** The writing transaction's signature, if any. */
  signature?: string;
  subKey: PublicKey;
  /** Written unless `reverse` was false. */
  reverseKey: PublicKey;
  parentKey: PublicKey;
}

/** The keys of `label.parent` under the parent's key (the SDK's derivations). */
export function subdomainKeys(parentKey: PublicKey, parent: string, label: string): SubdomainKeys {
  const subKey = getDomainKeySync(`${label}.${parent}`).pubkey;
  return { subKey, reverseKey: getReverseKeyFromDomainKey(subKey, parentKey), parentKey };
}

/** `keys` with a lazy `signature` (base58 costs microseconds). */
export function withSignature(
  keys: SubdomainKeys,
  tx: { readonly signature: string },
): SubdomainKeys {
  return Object.defineProperty(keys, 'signature', { get: () => tx.signature, enumerable: true });
}

/**
 * The bare top-level name of `name` (a `.sol` suffix dropped).
 * @throws Error if it is empty or has a dot.
 */
export function topLevelName(name: string): string {
  const bare = name.endsWith('.sol') ? name.slice(0, -4) : name;
  if (bare === '' || bare.includes('.')) {
    throw new Error(`expected a top-level .sol name, got ${JSON.stringify(name)}`);
  }
  return bare;
}

/**
 * `label`, checked.
 * @throws Error if it is empty or has a dot.
 */
export function checkLabel(label: string): string {
  if (label === '' || label.includes('.')) {
    throw new Error(`expected a subdomain label without dots, got ${JSON.stringify(label)}`);
  }
  return label;
}

/**
 * `space` (bytes, or an offset), checked.
 * @throws TypeError unless a non-negative safe integer.
 */
export function checkSpace(space: number): number {
  if (!Number.isSafeInteger(space) || space < 0) {
    throw new TypeError(`space must be a non-negative integer, got ${space}`);
  }
  return space;
}
