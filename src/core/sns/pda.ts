import { hash } from 'node:crypto';
import { boundedMemo } from '../cache/bounded-memo.js';
import { fromBase58, toBase58 } from './base58.js';
import { isOnCurve } from './ed25519.js';

/**
 * SNS key derivations, offline: the keys of `@bonfida/spl-name-service` 3.x (web3.js's
 * `findProgramAddressSync`) with native sha256 on a reused buffer and ./ed25519.ts.
 * test/pda.test.ts holds them bit-identical to the SDK.
 */

/** The SPL Name Service program (the SDK's `NAME_PROGRAM_ID`). */
export const NAME_PROGRAM_ID = fromBase58('namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX');
/**
 * The root name account (SDK 3 `ROOT_DOMAIN_ACCOUNT`, SDK 4 `SNS_ROOT_DOMAIN_ACCOUNT`: one
 * account). Names issued through SDK 4's SRS live elsewhere (README).
 */
export const ROOT_DOMAIN_ACCOUNT = fromBase58('58PwtjSDuFHuUkYjH9BYnnQKHfwo9reZhC2zMJv9JPkx');
/** Class of reverse records, the registrar's central state (`REVERSE_LOOKUP_CLASS`). */
export const REVERSE_LOOKUP_CLASS = fromBase58('33m47vH6Eav6jr5Ry86XjhRft2jRBLDnDgPSHoquXi2Z');
/** `SNS_RECORDS_ID` of `@bonfida/sns-records`. */
export const SNS_RECORDS_ID = fromBase58('HP3D4D1ZCmohQGFVms2SS4LCANgJyksBf5s1F77FuFjZ');

/** The SDK's `HASH_PREFIX`. */
const HASH_PREFIX = 'SPL Name Service';
const PDA_MARKER = Buffer.from('ProgramDerivedAddress');

/**
 * web3.js's `findProgramAddressSync` for one seed shape: `sha256(seeds || bump || programId ||
 * "ProgramDerivedAddress")`, bump from 255 down, first result off the curve.
 */
function findProgramAddress(seeds: Uint8Array, programId: Uint8Array): Buffer {
  const buf = Buffer.alloc(seeds.length + 1 + 32 + PDA_MARKER.length);
  buf.set(seeds, 0);
  buf.set(programId, seeds.length + 1);
  buf.set(PDA_MARKER, seeds.length + 33);
  for (let bump = 255; bump > 0; bump--) {
    buf[seeds.length] = bump;
    const key = hash('sha256', buf, 'buffer');
    if (!isOnCurve(key)) return key;
  }
  throw new Error('Unable to find a viable program address nonce');
}

/** `CENTRAL_STATE_SNS_RECORDS`, class of V2 records. */
export const CENTRAL_STATE_SNS_RECORDS = findProgramAddress(SNS_RECORDS_ID, SNS_RECORDS_ID);

const NAME_SEEDS = Buffer.alloc(96 + 1 + 32 + PDA_MARKER.length);
NAME_SEEDS.set(NAME_PROGRAM_ID, 97);
NAME_SEEDS.set(PDA_MARKER, 129);
const ZERO_KEY = new Uint8Array(32);

/** The SDK's `getHashedNameSync`: UTF-8 (lone surrogate -> U+FFFD, as Buffer writes it). */
export function hashName(name: string): Buffer {
  return hash('sha256', HASH_PREFIX + name, 'buffer');
}

/**
 * The SDK's `getNameAccountKeySync(hashed, nameClass?, parent?)` (absent keys: 32 zero bytes).
 *
 * @param hashed 32 bytes ({@link hashName}); returns 32 bytes.
 */
export function nameAccountKey(
  hashed: Uint8Array,
  nameClass?: Uint8Array,
  parent?: Uint8Array,
): Buffer {
  if (hashed.length !== 32 || (nameClass ?? ZERO_KEY).length !== 32) {
    throw new RangeError('name-account seeds are 32 bytes each');
  }
  if ((parent ?? ZERO_KEY).length !== 32) throw new RangeError('a parent key is 32 bytes');
  NAME_SEEDS.set(hashed, 0);
  NAME_SEEDS.set(nameClass ?? ZERO_KEY, 32);
  NAME_SEEDS.set(parent ?? ZERO_KEY, 64);
  for (let bump = 255; bump > 0; bump--) {
    NAME_SEEDS[96] = bump;
    const key = hash('sha256', NAME_SEEDS, 'buffer');
    if (!isOnCurve(key)) return key;
  }
  throw new Error('Unable to find a viable program address nonce');
}

/** Candidates looked up before any is checked against the curve (see {@link existingNameAccountKey}). */
const LOOKAHEAD = 8;

/**
 * {@link nameAccountKey}`(hashed, nameClass, parent)` when `find` knows an account there (what
 * `find` returns for it), else undefined: cheaper than deriving then looking up, because a
 * candidate address that is an account needs no curve check. The name program creates its
 * accounts only at derived addresses, and two seeds give one candidate only through a SHA-256
 * collision: a candidate that is an account is the derived address. Absence is proven as the
 * derivation does, by the first candidate off the curve; candidates are looked up a few bumps
 * ahead of the curve checks, so a key found at a lower bump costs none.
 *
 * @param find the accounts known (one reply's), by their 32 bytes as a latin1 string (one
 *   character a byte: hashing to a string allocates no buffer).
 */
export function existingNameAccountKey<T>(
  hashed: Uint8Array,
  nameClass: Uint8Array,
  parent: Uint8Array,
  find: (key: string) => T | undefined,
): T | undefined {
  if (hashed.length !== 32 || nameClass.length !== 32 || parent.length !== 32) {
    throw new RangeError('name-account seeds are 32 bytes each');
  }
  NAME_SEEDS.set(hashed, 0);
  NAME_SEEDS.set(nameClass, 32);
  NAME_SEEDS.set(parent, 64);
  const unchecked: string[] = [];
  for (let bump = 255; bump > 0; bump--) {
    NAME_SEEDS[96] = bump;
    const key = hash('sha256', NAME_SEEDS, 'latin1');
    const found = find(key);
    if (found !== undefined) return found;
    unchecked.push(key);
    if (unchecked.length === LOOKAHEAD || bump === 1) {
      // The derived address is the first candidate off the curve; none is there.
      if (unchecked.some((c) => !isOnCurve(Buffer.from(c, 'latin1')))) return undefined;
      unchecked.length = 0;
    }
  }
  throw new Error('Unable to find a viable program address nonce');
}

/**
 * The SDK's `getDomainKeySync(name + ".sol").pubkey`, `name` without suffix (`sub.parent`: `"\0" +
 * sub` under the parent).
 *
 * @throws RangeError for more than two labels (the SDK's "The domain is malformed").
 */
export function domainKey(name: string): Buffer {
  const labels = name.split('.');
  if (labels.length === 1) return nameAccountKey(hashName(name), undefined, ROOT_DOMAIN_ACCOUNT);
  if (labels.length !== 2) throw new RangeError('The domain is malformed');
  return nameAccountKey(
    hashName(`\0${labels[0] as string}`),
    undefined,
    parentKey(labels[1] as string),
  );
}

/** Memo bounds: labels may be huge, asked names are short. Memoized keys are only read. */
const MEMO_BOUNDS = { maxEntries: 4096, maxInputLength: 64 };

/** Top-level keys, remembered: every subdomain derives its parent's first, and parents are few. */
const parentKey = boundedMemo(
  (label) => nameAccountKey(hashName(label), undefined, ROOT_DOMAIN_ACCOUNT),
  MEMO_BOUNDS,
);

/** Record-type hashes, remembered: there are a few dozen types. */
const hashedRecordV2 = boundedMemo((record) => hashName(`\x02${record}`), MEMO_BOUNDS);

/** The SDK's `getRecordV2Key(name + ".sol", record)`. */
export function recordKeyV2(name: string, record: string): Buffer {
  return recordKeyV2Under(domainKey(name), record);
}

/**
 * {@link recordKeyV2} under an already-derived {@link domainKey}, shared by a name's records.
 *
 * @throws RangeError if `domain` is not 32 bytes.
 */
export function recordKeyV2Under(domain: Uint8Array, record: string): Buffer {
  return nameAccountKey(hashedRecordV2(record), CENTRAL_STATE_SNS_RECORDS, domain);
}

/**
 * The SDK's `getReverseKeyFromDomainKey(domainKey, parent?)`.
 *
 * @param domain 32 bytes or base58 text (as an RPC reply carries it).
 */
export function reverseKeyFromDomainKey(domain: Uint8Array | string, parent?: Uint8Array): Buffer {
  const text = typeof domain === 'string' ? domain : toBase58(domain);
  return nameAccountKey(hashName(text), REVERSE_LOOKUP_CLASS, parent);
}

export { fromBase58, toBase58 };
