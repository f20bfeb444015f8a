/**
 * The name-program instructions a chain write amounts to when no helper says which: a bare
 * `setAccount` of a name account (Create, Transfer or Update, from what changed), and the
 * registrar's createReverse behind a reverse record.
 */
import {
  CENTRAL_STATE,
  NAME_PROGRAM_ID,
  REGISTER_PROGRAM_ID,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
} from '@bonfida/spl-name-service';
import { SYSVAR_RENT_PUBKEY, SystemProgram } from '@solana/web3.js';
import type { PublicKey } from '@solana/web3.js';
import type { StoredAccount } from './chain-view.js';
import { nameCreate, nameTransfer, nameUpdate, registrarCall } from './instructions.js';
import { NAME_HEADER_LEN, ZERO_KEY, headerOf, rentExemptLamports } from './name-layout.js';
import type { NameHeader } from './name-layout.js';
import type { SimInstruction } from './transactions.js';

/** A name account's owner, read from the chain; undefined if there is none. */
export type OwnerOf = (key: PublicKey) => PublicKey | undefined;

/**
 * The instruction a bare write of `data` (header `header`) at `pubkey` amounts to: Create when no
 * name account was there, Transfer when only the owner bytes changed, else Update from the first
 * changed byte.
 */
export function implicitWrite(
  pubkey: PublicKey,
  previous: StoredAccount | undefined,
  data: Buffer,
  header: NameHeader,
  ownerOf: OwnerOf,
): SimInstruction {
  if (!previous || previous.ownerKey !== NAME_PROGRAM_ID.toBase58()) {
    const space = Math.max(0, data.length - NAME_HEADER_LEN);
    return nameCreate({
      payer: header.owner,
      nameKey: pubkey,
      owner: header.owner,
      nameClass: header.nameClass,
      parent: header.parent,
      parentOwner: header.parent.equals(ZERO_KEY) ? undefined : ownerOf(header.parent),
      name: pubkey.toBase58(),
      lamports: rentExemptLamports(data.length),
      space,
      existed: previous !== undefined,
    });
  }
  const before = previous.data;
  const onlyOwner =
    before.length === data.length &&
    before.length >= NAME_HEADER_LEN &&
    before.compare(data, 0, 32, 0, 32) === 0 &&
    before.compare(data, 64, data.length, 64, before.length) === 0;
  const old = headerOf(before);
  if (onlyOwner) return nameTransfer(pubkey, old.owner, header.owner);
  let from = 0;
  while (from < data.length && data[from] === before[from]) from++;
  const offset = Math.max(0, from - NAME_HEADER_LEN);
  const signer = old.nameClass.equals(ZERO_KEY) ? old.owner : old.nameClass;
  return nameUpdate(pubkey, signer, offset, data.subarray(NAME_HEADER_LEN + offset));
}

/** A reverse record as written: its name account's key and the record's. */
export interface ReverseWrite {
  readonly payer: PublicKey;
  /** The name the record points back to. */
  readonly nameKey: PublicKey;
  readonly reverseKey: PublicKey;
  /** Undefined at top level. */
  readonly parentKey: PublicKey | undefined;
  /** The parent's owner, a signer of a subdomain's record. */
  readonly parentOwner: PublicKey | undefined;
  /** The registrar's name argument ("\0" + label for a subdomain). */
  readonly name: string;
  /** The record's data after the header (`encodeReverseData(name)`). */
  readonly body: Buffer;
  /** Whether an account was at `reverseKey` before. */
  readonly existed: boolean;
}

/** The registrar's createReverse writing a reverse record: inner Create, then Update. */
export function createReverse(w: ReverseWrite): SimInstruction {
  const { payer, reverseKey, parentKey, parentOwner } = w;
  const accounts = [
    { pubkey: NAME_PROGRAM_ID, isSigner: false, isWritable: false },
    { pubkey: ROOT_DOMAIN_ACCOUNT, isSigner: false, isWritable: false },
    { pubkey: reverseKey, isSigner: false, isWritable: true },
    { pubkey: SystemProgram.programId, isSigner: false, isWritable: false },
    { pubkey: CENTRAL_STATE, isSigner: false, isWritable: false },
    { pubkey: payer, isSigner: true, isWritable: true },
    { pubkey: SYSVAR_RENT_PUBKEY, isSigner: false, isWritable: false },
  ];
  if (parentKey && parentOwner) {
    accounts.push({ pubkey: parentKey, isSigner: false, isWritable: true });
    accounts.push({ pubkey: parentOwner, isSigner: true, isWritable: true });
  }
  return registrarCall(REGISTER_PROGRAM_ID, accounts, w.name, [
    nameCreate({
      payer,
      nameKey: reverseKey,
      owner: CENTRAL_STATE,
      nameClass: REVERSE_LOOKUP_CLASS,
      parent: parentKey ?? ZERO_KEY,
      parentOwner,
      name: w.nameKey.toBase58(),
      lamports: rentExemptLamports(NAME_HEADER_LEN + w.body.length),
      space: w.body.length,
      existed: w.existed,
    }),
    nameUpdate(reverseKey, REVERSE_LOOKUP_CLASS, 0, w.body),
  ]);
}
