/**
 * The instructions behind the simulator's chain writes, as the SPL Name Service and the system
 * program take them (borsh; Create 0, Update 1, Transfer 2, Delete 3), with the name program's
 * `msg!` lines and made-up compute units.
 */
import { createHash } from 'node:crypto';
import { HASH_PREFIX, NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { PublicKey, SystemProgram } from '@solana/web3.js';
import type { SimAccountMeta, SimInstruction } from './transactions.js';

/** Made up. */
const NAME_UNITS = { create: 6_200, update: 2_500, transfer: 2_900, delete: 3_100 } as const;
const REGISTRAR_UNITS = 8_400;
const WRAPPER_UNITS = 1_800;

/** Lines every name-program instruction logs first. */
const NAME_PROGRAM_PREAMBLE = ['Entrypoint', 'Beginning processing', 'Instruction unpacked'];

/** The name program's line per instruction. */
export const NAME_INSTRUCTION_LOG = {
  create: 'Instruction: Create',
  update: 'Instruction: Update Data',
  transfer: 'Instruction: Transfer Ownership',
  delete: 'Instruction: Delete Name',
} as const;

/** Borsh enum index. */
export const NAME_INSTRUCTION_TAG = { create: 0, update: 1, transfer: 2, delete: 3 } as const;

const SYSTEM_ID = SystemProgram.programId;
const meta = (pubkey: PublicKey, isSigner: boolean, isWritable: boolean): SimAccountMeta => ({
  pubkey,
  isSigner,
  isWritable,
});

/** The `hashed_name` of a Create. */
export function hashedName(name: string): Buffer {
  return createHash('sha256')
    .update(HASH_PREFIX + name, 'utf8')
    .digest();
}

/** What `nameCreate` takes. */
export interface NameCreateArgs {
  payer: PublicKey;
  nameKey: PublicKey;
  owner: PublicKey;
  nameClass: PublicKey;
  parent: PublicKey;
  /** Signs for a non-zero parent. */
  parentOwner?: PublicKey;
  name: string;
  lamports: number;
  /** Data bytes after the header. */
  space: number;
  /** Then the program makes no system-program calls. */
  existed: boolean;
}

/**
 * The name program's Create (tag 0, borsh `{hashed_name, lamports: u64, space: u32}`), accounts as
 * the SDK's `createInstruction`; a new account is funded, allocated and assigned by three system
 * calls.
 */
export function nameCreate(a: NameCreateArgs): SimInstruction {
  const hashed = hashedName(a.name);
  const data = Buffer.alloc(1 + 4 + hashed.length + 8 + 4);
  data.writeUInt8(NAME_INSTRUCTION_TAG.create, 0);
  data.writeUInt32LE(hashed.length, 1);
  hashed.copy(data, 5);
  data.writeBigUInt64LE(BigInt(a.lamports), 5 + hashed.length);
  data.writeUInt32LE(a.space, 13 + hashed.length);
  const classSigns = !a.nameClass.equals(PublicKey.default);
  const accounts = [
    meta(SYSTEM_ID, false, false),
    meta(a.payer, true, true),
    meta(a.nameKey, false, true),
    meta(a.owner, false, false),
    meta(a.nameClass, classSigns, false),
    meta(a.parent, false, false),
  ];
  if (a.parentOwner) accounts.push(meta(a.parentOwner, true, false));
  const inner = a.existed
    ? []
    : [
        systemTransfer(a.payer, a.nameKey, a.lamports),
        systemAllocate(a.nameKey, 96 + a.space),
        systemAssign(a.nameKey, NAME_PROGRAM_ID),
      ];
  return nameInstruction('create', accounts, data, inner);
}

/** Update (tag 1, borsh `{offset: u32, data: Vec<u8>}`) by `signer`. */
export function nameUpdate(
  nameKey: PublicKey,
  signer: PublicKey,
  offset: number,
  bytes: Uint8Array,
): SimInstruction {
  const data = Buffer.alloc(1 + 4 + 4 + bytes.length);
  data.writeUInt8(NAME_INSTRUCTION_TAG.update, 0);
  data.writeUInt32LE(offset, 1);
  data.writeUInt32LE(bytes.length, 5);
  Buffer.from(bytes).copy(data, 9);
  return nameInstruction('update', [meta(nameKey, false, true), meta(signer, true, false)], data);
}

/** Transfer (tag 2: the new owner's 32 bytes) by the current owner. */
export function nameTransfer(
  nameKey: PublicKey,
  owner: PublicKey,
  newOwner: PublicKey,
): SimInstruction {
  const data = Buffer.concat([Buffer.from([NAME_INSTRUCTION_TAG.transfer]), newOwner.toBuffer()]);
  return nameInstruction('transfer', [meta(nameKey, false, true), meta(owner, true, false)], data);
}

/** Delete (tag 3): zeroes the data, moves all lamports to the refund target. */
export function nameDelete(
  nameKey: PublicKey,
  owner: PublicKey,
  refund: PublicKey,
): SimInstruction {
  return nameInstruction(
    'delete',
    [meta(nameKey, false, true), meta(owner, true, false), meta(refund, false, true)],
    Buffer.from([NAME_INSTRUCTION_TAG.delete]),
  );
}

function nameInstruction(
  kind: keyof typeof NAME_INSTRUCTION_LOG,
  accounts: SimAccountMeta[],
  data: Buffer,
  inner: SimInstruction[] = [],
): SimInstruction {
  return {
    programId: NAME_PROGRAM_ID,
    accounts,
    data,
    logs: [...NAME_PROGRAM_PREAMBLE, NAME_INSTRUCTION_LOG[kind]],
    inner,
    units: NAME_UNITS[kind],
  };
}

/**
 * The registrar's createReverse (tag 12, borsh `{name}`), accounts as the SDK's
 * `createReverseInstruction`, running `inner`; its own logs are not modelled.
 */
export function registrarCall(
  registrar: PublicKey,
  accounts: SimAccountMeta[],
  name: string,
  inner: SimInstruction[],
): SimInstruction {
  const text = Buffer.from(name, 'utf8');
  const data = Buffer.alloc(1 + 4 + text.length);
  data.writeUInt8(12, 0);
  data.writeUInt32LE(text.length, 1);
  text.copy(data, 5);
  return { programId: registrar, accounts, data, logs: [], inner, units: REGISTRAR_UNITS };
}

/** A call of `programId` that only invokes `inner` (data: one zero byte; accounts: theirs). */
export function wrapperCall(programId: PublicKey, inner: SimInstruction[]): SimInstruction {
  const accounts = new Map<string, SimAccountMeta>();
  for (const ix of inner) {
    for (const m of [meta(ix.programId, false, false), ...ix.accounts]) {
      const key = m.pubkey.toBase58();
      const seen = accounts.get(key);
      accounts.set(key, {
        pubkey: m.pubkey,
        isSigner: m.isSigner || (seen?.isSigner ?? false),
        isWritable: m.isWritable || (seen?.isWritable ?? false),
      });
    }
  }
  return {
    programId,
    accounts: [...accounts.values()],
    data: Buffer.from([0]),
    logs: [],
    inner,
    units: WRAPPER_UNITS,
  };
}

function systemTransfer(from: PublicKey, to: PublicKey, lamports: number): SimInstruction {
  const data = Buffer.alloc(12);
  data.writeUInt32LE(2, 0);
  data.writeBigUInt64LE(BigInt(lamports), 4);
  return systemCall([meta(from, true, true), meta(to, false, true)], data, 'transfer', () => ({
    destination: to.toBase58(),
    lamports,
    source: from.toBase58(),
  }));
}

function systemAllocate(account: PublicKey, space: number): SimInstruction {
  const data = Buffer.alloc(12);
  data.writeUInt32LE(8, 0);
  data.writeBigUInt64LE(BigInt(space), 4);
  return systemCall([meta(account, true, true)], data, 'allocate', () => ({
    account: account.toBase58(),
    space,
  }));
}

function systemAssign(account: PublicKey, owner: PublicKey): SimInstruction {
  const data = Buffer.concat([Buffer.from([1, 0, 0, 0]), owner.toBuffer()]);
  return systemCall([meta(account, true, true)], data, 'assign', () => ({
    account: account.toBase58(),
    owner: owner.toBase58(),
  }));
}

function systemCall(
  accounts: SimAccountMeta[],
  data: Buffer,
  type: string,
  info: () => Record<string, unknown>,
): SimInstruction {
  return {
    programId: SYSTEM_ID,
    accounts,
    data,
    logs: [],
    inner: [],
    parsed: { program: 'system', type, info },
  };
}
