import { hash } from 'node:crypto';
import { boundedMemo } from '../cache/bounded-memo.js';
import { fromBase58, fromBase58Into, toBase58 } from './base58.js';
import { isOnCurve } from './ed25519.js';
import type { KeySet } from './key-set.js';
import { pdaMemory, pdaWasm, pdaWords } from './pda-wasm.js';

/**
 * SNS key derivations, offline: the keys of `@bonfida/spl-name-service` 3.x (web3.js's
 * `findProgramAddressSync`). The name-account search runs whole in WebAssembly (./pda.wat: SHA-256
 * and the curve check of ./ed25519.ts), one call a search: its first block (hashed name and
 * class) hashed once, not per bump, and for a record key kept per record type; its last block's
 * schedule, the same for every name, computed once (BENCHMARKS.md, docs/design.md). test/pda.test.ts
 * holds the keys bit-identical to the SDK.
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

const ZERO_KEY = new Uint8Array(32);

/** The module's name-search message: hashed name at 0, class at 32, parent at 64, bump at 96. */
const SEEDS = pdaWasm.SEEDS.value;
const MID = pdaWasm.MID.value;
const MSG = pdaWasm.MSG.value;
pdaMemory.set(NAME_PROGRAM_ID, SEEDS + 97);
pdaMemory.set(PDA_MARKER, SEEDS + 129);
pdaWasm.init_search();
const PREFIX_BYTES = pdaMemory.write(HASH_PREFIX, MSG, 'latin1');
/** Code units of a name hashed in the module: at 3 UTF-8 bytes each, with room for the padding. */
const MAX_MODULE_NAME = Math.floor((pdaMemory.length - MSG - PREFIX_BYTES - 72) / 3);

/** {@link hashName} into the module's message, as its hashed name (bytes 0 to 31). */
function hashNameIntoSeeds(name: string): void {
  if (name.length <= MAX_MODULE_NAME) {
    // ASCII byte by byte: Buffer's `write` costs more than the hash of a short name.
    let length = 0;
    for (; length < name.length; length++) {
      const code = name.charCodeAt(length);
      if (code >= 0x80) break;
      pdaMemory[MSG + PREFIX_BYTES + length] = code;
    }
    if (length < name.length) length = pdaMemory.write(name, MSG + PREFIX_BYTES, 'utf8');
    pdaWasm.hash_name(PREFIX_BYTES + length);
  } else {
    pdaMemory.set(hash('sha256', HASH_PREFIX + name, 'buffer'), SEEDS);
  }
}

/** The key a search of the module left at address 0, copied; its `bump` 0 means none was found. */
function searched(bump: number): Buffer {
  if (bump === 0) throw new Error('Unable to find a viable program address nonce');
  return copied(0);
}

/** The 32 bytes of the module's memory at `at`, copied (a loop: `Buffer.from` of a view costs more). */
function copied(at: number): Buffer {
  const out = Buffer.allocUnsafe(32);
  for (let i = 0; i < 32; i++) out[i] = pdaMemory[at + i] as number;
  return out;
}

/**
 * The SDK's `getHashedNameSync`: UTF-8 (lone surrogate -> U+FFFD, as Buffer writes it).
 *
 * @returns 32 bytes.
 */
export function hashName(name: string): Buffer {
  hashNameIntoSeeds(name);
  return copied(SEEDS);
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
  pdaMemory.set(hashed, SEEDS);
  pdaMemory.set(nameClass ?? ZERO_KEY, SEEDS + 32);
  pdaMemory.set(parent ?? ZERO_KEY, SEEDS + 64);
  return searched(pdaWasm.search());
}

/** `nameAccountKey(hashName(name), undefined, parent)`, the name hashed in the module. */
function nameKeyUnder(name: string, parent: Uint8Array): Buffer {
  hashNameIntoSeeds(name);
  pdaMemory.fill(0, SEEDS + 32, SEEDS + 64);
  pdaMemory.set(parent, SEEDS + 64);
  return searched(pdaWasm.search());
}

/** Candidates looked up before the search (see {@link existingNameAccountKey}). */
const LOOKAHEAD = 8;

/**
 * {@link nameAccountKey}`(hashName(name), nameClass, parent)` when `known` holds an account there
 * (its value there), else undefined: cheaper than deriving then looking up, because a candidate
 * address that is an account needs no curve check. The name program creates its accounts only at
 * derived addresses, and two seeds give one candidate only through a SHA-256 collision: a
 * candidate that is an account is the derived address. The first candidates are looked up with no
 * curve check; past them, the derivation (curve checks included) says which address to look up,
 * or that none is there. The search runs in the module, the first block hashed once, and each
 * candidate is looked up where the module wrote it (BENCHMARKS.md, "Cold scans of a large
 * parent").
 *
 * @param known the accounts known (one reply's).
 */
export function existingNameAccountKey<T>(
  name: string,
  nameClass: Uint8Array,
  parent: Uint8Array,
  known: KeySet<T>,
): T | undefined {
  if (nameClass.length !== 32 || parent.length !== 32) {
    throw new RangeError('name-account seeds are 32 bytes each');
  }
  hashNameIntoSeeds(name);
  pdaMemory.set(nameClass, SEEDS + 32);
  pdaMemory.set(parent, SEEDS + 64);
  pdaWasm.midstate();
  // Each candidate is written at address 0: words 0 to 7.
  for (let bump = 255; bump > 255 - LOOKAHEAD; bump--) {
    pdaWasm.candidate(bump);
    const found = known.find(pdaWords, 0);
    if (found !== undefined) return found;
  }
  // The derived address is the first candidate off the curve: looked up already if among those.
  const bump = pdaWasm.search_from_mid();
  if (bump === 0) throw new Error('Unable to find a viable program address nonce');
  return bump > 255 - LOOKAHEAD ? undefined : known.find(pdaWords, 0);
}

/**
 * The SDK's `getDomainKeySync(name + ".sol").pubkey`, `name` without suffix (`sub.parent`: `"\0" +
 * sub` under the parent).
 *
 * @throws RangeError for more than two labels (the SDK's "The domain is malformed").
 */
export function domainKey(name: string): Buffer {
  const labels = name.split('.');
  if (labels.length === 1) return nameKeyUnder(name, ROOT_DOMAIN_ACCOUNT);
  if (labels.length !== 2) throw new RangeError('The domain is malformed');
  // The parent first: its search uses the module's message too.
  const parent = parentKey(labels[1] as string);
  return nameKeyUnder(`\0${labels[0] as string}`, parent);
}

/** Memo bounds: labels may be huge, asked names are short. Memoized keys are only read. */
const MEMO_BOUNDS = { maxEntries: 4096, maxInputLength: 64 };

/** Top-level keys, remembered: every subdomain derives its parent's first, and parents are few. */
const parentKey = boundedMemo((label) => nameKeyUnder(label, ROOT_DOMAIN_ACCOUNT), MEMO_BOUNDS);

/**
 * Record types' search states after the first block (the hashed `"\x02" + record` and
 * {@link CENTRAL_STATE_SNS_RECORDS}), remembered: there are a few dozen types.
 */
const recordMidstate = boundedMemo((record) => {
  hashNameIntoSeeds(`\x02${record}`);
  pdaMemory.set(CENTRAL_STATE_SNS_RECORDS, SEEDS + 32);
  pdaWasm.midstate();
  return copied(MID);
}, MEMO_BOUNDS);

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
  if (domain.length !== 32) throw new RangeError('a parent key is 32 bytes');
  const mid = recordMidstate(record);
  pdaMemory.set(mid, MID);
  pdaMemory.set(domain, SEEDS + 64);
  return searched(pdaWasm.search_from_mid());
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

export { fromBase58, fromBase58Into, toBase58 };
export { KeySet } from './key-set.js';
