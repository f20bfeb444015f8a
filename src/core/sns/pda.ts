import { hash } from 'node:crypto';
import { boundedMemo } from '../cache/bounded-memo.js';
import { fromBase58, toBase58 } from './base58.js';
import { isOnCurve } from './ed25519.js';

/**
 * SNS key derivations, offline and fast: the same keys as `@bonfida/spl-name-service` 3.x, which
 * derives them through `PublicKey.findProgramAddressSync` of @solana/web3.js 1.99 (noble's BigInt
 * sha256 and curve check, about 0.6 ms a record key). Here: Node's native sha256 on one reused seed
 * buffer, and the BigInt-free curve check of ./ed25519.ts. test/pda.test.ts holds them
 * bit-identical to the SDK on the published vectors and on generated corpora.
 */

/** The SPL Name Service program (the SDK's `NAME_PROGRAM_ID`). */
export const NAME_PROGRAM_ID = fromBase58('namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX');
/**
 * The root name account, parent of every top-level name: SDK 3's `ROOT_DOMAIN_ACCOUNT` (the `.sol`
 * TLD), SDK 4's `SNS_ROOT_DOMAIN_ACCOUNT` (the `.sns` TLD); one account, so one key per bare name.
 * Names issued through SRS, SDK 4's registry for new `.sol` names, live elsewhere (README).
 */
export const ROOT_DOMAIN_ACCOUNT = fromBase58('58PwtjSDuFHuUkYjH9BYnnQKHfwo9reZhC2zMJv9JPkx');
/** Class of reverse records, the registrar's central state (`REVERSE_LOOKUP_CLASS`). */
export const REVERSE_LOOKUP_CLASS = fromBase58('33m47vH6Eav6jr5Ry86XjhRft2jRBLDnDgPSHoquXi2Z');
/** The SNS records program (`SNS_RECORDS_ID` of `@bonfida/sns-records`, which the SDK bundles). */
export const SNS_RECORDS_ID = fromBase58('HP3D4D1ZCmohQGFVms2SS4LCANgJyksBf5s1F77FuFjZ');

/** The SDK's `HASH_PREFIX`, prepended to every name before hashing. */
const HASH_PREFIX = 'SPL Name Service';
const PDA_MARKER = Buffer.from('ProgramDerivedAddress');

/**
 * `sha256(seeds || bump || programId || "ProgramDerivedAddress")`, the bump from 255 down, first
 * result off the curve: web3.js's `findProgramAddressSync` for seeds of one shape. `seeds` is the
 * concatenated seeds; the program id and the marker follow at fixed offsets of a reused buffer.
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

/** `CENTRAL_STATE_SNS_RECORDS`: the records program's PDA of its own id, class of V2 records. */
export const CENTRAL_STATE_SNS_RECORDS = findProgramAddress(SNS_RECORDS_ID, SNS_RECORDS_ID);

/** Seeds of a name account: hashed name, class, parent, then the bump and the rest. */
const NAME_SEEDS = Buffer.alloc(96 + 1 + 32 + PDA_MARKER.length);
NAME_SEEDS.set(NAME_PROGRAM_ID, 97);
NAME_SEEDS.set(PDA_MARKER, 129);
const ZERO_KEY = new Uint8Array(32);

/**
 * The SDK's `getHashedNameSync(name)`: `sha256("SPL Name Service" + name)`, UTF-8 (a lone
 * surrogate becomes U+FFFD, as the SDK's Buffer writes it).
 */
export function hashName(name: string): Buffer {
  return hash('sha256', HASH_PREFIX + name, 'buffer');
}

/**
 * The SDK's `getNameAccountKeySync(hashed, nameClass?, parent?)`: the name program's PDA of
 * `[hashed, nameClass or 32 zero bytes, parent or 32 zero bytes]`.
 *
 * @param hashed a 32-byte hashed name ({@link hashName}).
 * @returns the 32-byte key.
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

/**
 * The name account of a `.sol` name given without its suffix: one label is hashed under
 * `ROOT_DOMAIN_ACCOUNT`; `sub.parent` is `"\0" + sub` hashed under the parent's key. The SDK's
 * `getDomainKeySync(name + ".sol").pubkey` (which strips the suffix it is given).
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

/**
 * Bounds of each memo below: labels may be thousands of characters long, the names people ask
 * for are short. Memoized keys are only ever read (copied into the seeds).
 */
const MEMO_BOUNDS = { maxEntries: 4096, maxInputLength: 64 };

/**
 * The name account of a top-level name, remembered: every subdomain of a parent derives the
 * parent's key first (a program-address search of about two attempts), and the names people ask
 * for share few parents.
 */
const parentKey = boundedMemo(
  (label) => nameAccountKey(hashName(label), undefined, ROOT_DOMAIN_ACCOUNT),
  MEMO_BOUNDS,
);

/** `sha256("SPL Name Service\x02" + record)`, remembered: there are a few dozen record types. */
const hashedRecordV2 = boundedMemo((record) => hashName(`\x02${record}`), MEMO_BOUNDS);

/**
 * The SDK's `getRecordV2Key(name + ".sol", record)`: `"\x02" + record` hashed (the V2 marker
 * byte the SDK prepends), with class `CENTRAL_STATE_SNS_RECORDS`, under the domain's name account.
 */
export function recordKeyV2(name: string, record: string): Buffer {
  return recordKeyV2Under(domainKey(name), record);
}

/**
 * {@link recordKeyV2} under a domain key already derived ({@link domainKey}): the records of one
 * name share it, and it is almost half of each key's cost (about 18 of 40 µs, measured).
 *
 * @param domain the domain's 32-byte name-account key.
 * @throws RangeError if `domain` is not 32 bytes.
 */
export function recordKeyV2Under(domain: Uint8Array, record: string): Buffer {
  return nameAccountKey(hashedRecordV2(record), CENTRAL_STATE_SNS_RECORDS, domain);
}

/**
 * The SDK's `getReverseKeyFromDomainKey(domainKey, parent?)`: the domain key's base58 text,
 * hashed, with class `REVERSE_LOOKUP_CLASS` under `parent` (none for a top-level name).
 *
 * @param domain the domain's key, as bytes or as its base58 text (what an RPC reply carries).
 */
export function reverseKeyFromDomainKey(domain: Uint8Array | string, parent?: Uint8Array): Buffer {
  const text = typeof domain === 'string' ? domain : toBase58(domain);
  return nameAccountKey(hashName(text), REVERSE_LOOKUP_CLASS, parent);
}

export { fromBase58, toBase58 };
