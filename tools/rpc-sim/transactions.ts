/**
 * The simulator's transactions: instructions behind chain writes, their logs, and the JSON a node
 * gives (`getTransaction`, `getSignaturesForAddress`, `logsNotification`). Data and accounts follow
 * the SPL Name Service (borsh; Create 0, Update 1, Transfer 2, Delete 3) and the SDK's builders;
 * log lines are the runtime's and the name program's `msg!`s. Compute units and payers' balances
 * are made up.
 */
import { createHash, randomBytes } from 'node:crypto';
import { HASH_PREFIX, NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { PublicKey, SystemProgram } from '@solana/web3.js';
import { base58Encode } from './base58.js';

/** One instruction account, as web3.js's `AccountMeta`. */
export interface SimAccountMeta {
  pubkey: PublicKey;
  isSigner: boolean;
  isWritable: boolean;
}

/** An instruction: what a program was called with and what it logged. */
export interface SimInstruction {
  readonly programId: PublicKey;
  readonly accounts: readonly SimAccountMeta[];
  readonly data: Buffer;
  /** The program's own messages (no "Program log: "), before its CPIs. */
  readonly logs: readonly string[];
  /** Cross-program invocations, in order. */
  readonly inner: readonly SimInstruction[];
  /** Own compute units (CPIs add theirs); undefined for builtins, which log no "consumed" line. */
  readonly units?: number;
  /**
   * Fails after its own logs: `message` logged by the program, `error` the InstructionError
   * ("InvalidArgument"), `text` the runtime's line. Later instructions do not run.
   */
  readonly fails?: { message: string; error: string; text: string };
  /** jsonParsed `{type, info}` where agave parses (system program); `info` lazy: base58 is slow. */
  readonly parsed?: { program: string; type: string; info: () => Record<string, unknown> };
}

/** A legacy message header. */
export interface MessageHeader {
  numRequiredSignatures: number;
  numReadonlySignedAccounts: number;
  numReadonlyUnsignedAccounts: number;
}

/** A kept transaction. */
export interface SimTransaction {
  /** Base58 of the first signature: the id. */
  readonly signature: string;
  /** One per required signer. */
  readonly signatures: readonly string[];
  readonly slot: number;
  /** Unix seconds. */
  readonly blockTime: number;
  /** Chain clock (ms) when run; decides what a lagging node sees. */
  readonly time: number;
  /** Order in the chain, from 0. */
  readonly index: number;
  /** null on success; else e.g. `{"InstructionError":[0,"InvalidArgument"]}` (nothing written). */
  readonly err: TransactionErrorJson | null;
  readonly header: MessageHeader;
  /** Base58: signers (fee payer first), writable, read-only. */
  readonly accountKeys: readonly string[];
  readonly writable: readonly boolean[];
  readonly recentBlockhash: string;
  readonly instructions: readonly SimInstruction[];
  readonly fee: number;
  /** Lamports per key before and after: exact for written accounts and the payer, others lazy. */
  readonly preBalances: readonly number[];
  readonly postBalances: readonly number[];
  readonly logs: readonly string[];
  readonly computeUnitsConsumed: number;
  /** `pubkey` is an account key (logsSubscribe `mentions`). */
  mentions(pubkey: PublicKey): boolean;
}

/** A TransactionError as JSON. */
export type TransactionErrorJson = { InstructionError: [number, string] };

/** What the chain records when a transaction runs; the rest is derived lazily. */
export interface TransactionRecord {
  readonly signature: Buffer;
  readonly slot: number;
  readonly blockTime: number;
  readonly time: number;
  readonly index: number;
  readonly feePayer: PublicKey;
  readonly instructions: readonly SimInstruction[];
  readonly err: TransactionErrorJson | null;
  /** Lamports before and after per written account, by base58 key. */
  readonly written: ReadonlyMap<string, readonly [number, number]>;
  /** The payer's, when it is a wallet the chain does not store. */
  readonly payer: readonly [number, number] | undefined;
  /** Lamports of any other key, read lazily. */
  readonly balanceOf: (key: string) => number;
}

/** A kept transaction; JSON-facing fields computed once, when first read. */
export class RecordedTransaction implements SimTransaction {
  #signature: string | undefined;
  #signatures: string[] | undefined;
  #keys: ReturnType<typeof compileKeys> | undefined;
  #logs: ReturnType<typeof renderLogs> | undefined;
  #balances: [number[], number[]] | undefined;

  constructor(readonly record: TransactionRecord) {}

  get signature(): string {
    return (this.#signature ??= base58Encode(this.record.signature));
  }
  get signatures(): readonly string[] {
    if (!this.#signatures) {
      const more = Array.from({ length: this.header.numRequiredSignatures - 1 }, () =>
        base58Encode(newSignature()),
      );
      this.#signatures = [this.signature, ...more];
    }
    return this.#signatures;
  }
  get slot(): number {
    return this.record.slot;
  }
  get err(): TransactionErrorJson | null {
    return this.record.err;
  }
  get blockTime(): number {
    return this.record.blockTime;
  }
  get time(): number {
    return this.record.time;
  }
  get index(): number {
    return this.record.index;
  }
  get instructions(): readonly SimInstruction[] {
    return this.record.instructions;
  }
  get header(): MessageHeader {
    return this.#compiled().header;
  }
  get accountKeys(): readonly string[] {
    return this.#compiled().keys;
  }
  get writable(): readonly boolean[] {
    return this.#compiled().writable;
  }
  get recentBlockhash(): string {
    return blockhashOf(this.record.slot - 1);
  }
  get fee(): number {
    return LAMPORTS_PER_SIGNATURE * this.header.numRequiredSignatures;
  }
  get preBalances(): readonly number[] {
    return this.#balanceLists()[0];
  }
  get postBalances(): readonly number[] {
    return this.#balanceLists()[1];
  }
  get logs(): readonly string[] {
    return (this.#logs ??= renderLogs(this.record.instructions)).logs;
  }
  get computeUnitsConsumed(): number {
    return (this.#logs ??= renderLogs(this.record.instructions)).units;
  }
  mentions(pubkey: PublicKey): boolean {
    return mentions(this.record.feePayer, this.record.instructions, pubkey);
  }

  #compiled(): ReturnType<typeof compileKeys> {
    return (this.#keys ??= compileKeys(this.record.feePayer, this.record.instructions));
  }

  #balanceLists(): [number[], number[]] {
    if (!this.#balances) {
      const pre: number[] = [];
      const post: number[] = [];
      const { written, payer, balanceOf } = this.record;
      this.accountKeys.forEach((key, i) => {
        const seen = written.get(key) ?? (i === 0 ? payer : undefined);
        const balance = seen ? undefined : balanceOf(key);
        pre.push(seen?.[0] ?? balance ?? 0);
        post.push(seen?.[1] ?? balance ?? 0);
      });
      this.#balances = [pre, post];
    }
    return this.#balances;
  }
}

/** Mainnet's base fee. */
export const LAMPORTS_PER_SIGNATURE = 5000;
/** Agave's default per top-level instruction. */
const UNITS_PER_INSTRUCTION = 200_000;
const MAX_UNITS = 1_400_000;
/** Made up. */
const NAME_UNITS = { create: 6_200, update: 2_500, transfer: 2_900, delete: 3_100 } as const;
const REGISTRAR_UNITS = 8_400;
const WRAPPER_UNITS = 1_800;
/** Balance of program and sysvar accounts, which are not stored. */
export const PROGRAM_LAMPORTS = 1_141_440;

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

/** Visits every instruction, parents before their CPIs. */
export function walkInstructions(
  instructions: readonly SimInstruction[],
  visit: (ix: SimInstruction, depth: number) => void,
  depth = 1,
): void {
  for (const ix of instructions) {
    visit(ix, depth);
    walkInstructions(ix.inner, visit, depth + 1);
  }
}

interface KeyFlags {
  pubkey: PublicKey;
  signer: boolean;
  writable: boolean;
}

/** A cheap map key for a public key (base58 costs microseconds). */
export function keyId(pubkey: PublicKey): string {
  return pubkey.toBuffer().toString('latin1');
}

/** Distinct accounts (fee payer first) with merged signer/writable flags. */
function accountFlags(feePayer: PublicKey, instructions: readonly SimInstruction[]): KeyFlags[] {
  const flags = new Map<string, KeyFlags>();
  const add = (pubkey: PublicKey, signer: boolean, writable: boolean): void => {
    const id = keyId(pubkey);
    const seen = flags.get(id);
    if (seen) {
      seen.signer ||= signer;
      seen.writable ||= writable;
    } else flags.set(id, { pubkey, signer, writable });
  };
  add(feePayer, true, true);
  // Privileges come from top-level instructions: invoke_signed signs in a CPI only.
  walkInstructions(instructions, (ix, depth) => {
    for (const m of ix.accounts) add(m.pubkey, depth === 1 && m.isSigner, m.isWritable);
    add(ix.programId, false, false);
  });
  return [...flags.values()];
}

/** Distinct signers (the fee is per signer). */
export function signerCount(feePayer: PublicKey, instructions: readonly SimInstruction[]): number {
  return accountFlags(feePayer, instructions).filter((f) => f.signer).length;
}

/** `pubkey` is an account key, without base58. */
export function mentions(
  feePayer: PublicKey,
  instructions: readonly SimInstruction[],
  pubkey: PublicKey,
): boolean {
  if (feePayer.equals(pubkey)) return true;
  let found = false;
  walkInstructions(instructions, (ix) => {
    found ||= ix.programId.equals(pubkey) || ix.accounts.some((m) => m.pubkey.equals(pubkey));
  });
  return found;
}

/** Account keys and header of a legacy message, as web3.js compiles one. */
export function compileKeys(
  feePayer: PublicKey,
  instructions: readonly SimInstruction[],
): { keys: string[]; writable: boolean[]; header: MessageHeader } {
  const [payer, ...rest] = accountFlags(feePayer, instructions);
  const group = (signer: boolean, writable: boolean): KeyFlags[] =>
    rest.filter((f) => f.signer === signer && f.writable === writable);
  const ordered = [
    ...(payer ? [payer] : []),
    ...group(true, true),
    ...group(true, false),
    ...group(false, true),
    ...group(false, false),
  ];
  const signers = ordered.filter((f) => f.signer);
  return {
    keys: ordered.map((f) => f.pubkey.toBase58()),
    writable: ordered.map((f) => f.writable),
    header: {
      numRequiredSignatures: signers.length,
      numReadonlySignedAccounts: signers.filter((f) => !f.writable).length,
      numReadonlyUnsignedAccounts: ordered.filter((f) => !f.signer && !f.writable).length,
    },
  };
}

/** The runtime's log lines and compute units of `instructions`. */
export function renderLogs(instructions: readonly SimInstruction[]): {
  logs: string[];
  units: number;
} {
  const logs: string[] = [];
  let available = Math.min(MAX_UNITS, UNITS_PER_INSTRUCTION * instructions.length);
  let total = 0;
  let failed = false;
  const run = (ix: SimInstruction, depth: number, budget: number): number => {
    const id = ix.programId.toBase58();
    logs.push(`Program ${id} invoke [${depth}]`);
    for (const line of ix.logs) logs.push(`Program log: ${line}`);
    let used = ix.units ?? 0;
    if (ix.fails) {
      logs.push(`Program log: ${ix.fails.message}`);
      failed = true;
    }
    for (const call of ix.inner) {
      if (failed) break;
      used += run(call, depth + 1, budget - used);
    }
    if (ix.units !== undefined) {
      logs.push(`Program ${id} consumed ${used} of ${budget} compute units`);
    }
    const cause = failed ? failureOf(ix) : undefined;
    logs.push(cause ? `Program ${id} failed: ${cause}` : `Program ${id} success`);
    return used;
  };
  for (const ix of instructions) {
    const used = run(ix, 1, available);
    available -= used;
    total += used;
    if (failed) break;
  }
  return { logs, units: total };
}

/** The runtime's text of a failure in `ix` or its CPIs. */
function failureOf(ix: SimInstruction): string | undefined {
  if (ix.fails) return ix.fails.text;
  for (const call of ix.inner) {
    const text = failureOf(call);
    if (text) return text;
  }
  return undefined;
}

/** null when none fails. */
export function errorOf(instructions: readonly SimInstruction[]): TransactionErrorJson | null {
  const find = (ix: SimInstruction): string | undefined =>
    ix.fails?.error ?? ix.inner.map(find).find((e) => e !== undefined);
  for (const [i, ix] of instructions.entries()) {
    const error = find(ix);
    if (error) return { InstructionError: [i, error] };
  }
  return null;
}

/** Random bytes, one system call per thousand signatures. */
let signaturePool = Buffer.alloc(0);
let signatureAt = 0;

/** A random 64-byte signature. */
export function newSignature(): Buffer {
  if (signatureAt + 64 > signaturePool.length) {
    signaturePool = randomBytes(64 * 1024);
    signatureAt = 0;
  }
  signatureAt += 64;
  return signaturePool.subarray(signatureAt - 64, signatureAt);
}

/** Base58 of SHA-256 of the slot number. */
export function blockhashOf(slot: number): string {
  return base58Encode(createHash('sha256').update(`sim-blockhash-${slot}`).digest());
}

// ---- JSON ------------------------------------------------------------------------------

/** Encodings `getTransaction` serves. */
export type TransactionEncoding = 'json' | 'jsonParsed';

/** Finalized at {@link FINALIZED_DEPTH} slots deep (a mainnet root), else confirmed (no forks). */
export function confirmationOf(slot: number, nodeSlot: number): 'confirmed' | 'finalized' {
  return nodeSlot - slot >= FINALIZED_DEPTH ? 'finalized' : 'confirmed';
}

export const FINALIZED_DEPTH = 32;

/**
 * The `getTransaction` result (EncodedConfirmedTransactionWithStatusMeta); json: raw message,
 * jsonParsed: keys as objects and system calls parsed.
 */
export function transactionJson(
  tx: SimTransaction,
  encoding: TransactionEncoding,
  withVersion: boolean,
): Record<string, unknown> {
  const index = new Map(tx.accountKeys.map((key, i) => [key, i]));
  const compiled = (ix: SimInstruction, stackHeight: number | null): Record<string, unknown> => ({
    programIdIndex: index.get(ix.programId.toBase58()) ?? 0,
    accounts: ix.accounts.map((m) => index.get(m.pubkey.toBase58()) ?? 0),
    data: base58Encode(ix.data),
    stackHeight,
  });
  const parsed = (ix: SimInstruction, stackHeight: number | null): Record<string, unknown> =>
    ix.parsed
      ? {
          program: ix.parsed.program,
          programId: ix.programId.toBase58(),
          parsed: { info: ix.parsed.info(), type: ix.parsed.type },
          stackHeight,
        }
      : {
          programId: ix.programId.toBase58(),
          accounts: ix.accounts.map((m) => m.pubkey.toBase58()),
          data: base58Encode(ix.data),
          stackHeight,
        };
  const render = encoding === 'json' ? compiled : parsed;
  const innerInstructions = tx.instructions
    .map((ix, i) => {
      const flat: Record<string, unknown>[] = [];
      walkInstructions(ix.inner, (call, depth) => flat.push(render(call, depth + 1)));
      return { index: i, instructions: flat };
    })
    .filter((group) => group.instructions.length > 0);
  const signerCount = tx.header.numRequiredSignatures;
  const message =
    encoding === 'json'
      ? {
          header: tx.header,
          accountKeys: tx.accountKeys,
          recentBlockhash: tx.recentBlockhash,
          instructions: tx.instructions.map((ix) => compiled(ix, null)),
        }
      : {
          accountKeys: tx.accountKeys.map((pubkey, i) => ({
            pubkey,
            writable: tx.writable[i] ?? false,
            signer: i < signerCount,
            source: 'transaction',
          })),
          recentBlockhash: tx.recentBlockhash,
          instructions: tx.instructions.map((ix) => parsed(ix, null)),
        };
  const result: Record<string, unknown> = {
    slot: tx.slot,
    transaction: { signatures: tx.signatures, message },
    meta: {
      err: tx.err,
      status: tx.err ? { Err: tx.err } : { Ok: null },
      fee: tx.fee,
      preBalances: tx.preBalances,
      postBalances: tx.postBalances,
      innerInstructions,
      logMessages: tx.logs,
      preTokenBalances: [],
      postTokenBalances: [],
      rewards: [],
      loadedAddresses: { writable: [], readonly: [] },
      computeUnitsConsumed: tx.computeUnitsConsumed,
    },
  };
  if (withVersion) result.version = 'legacy';
  result.blockTime = tx.blockTime;
  return result;
}

/** One `getSignaturesForAddress` row. */
export function signatureInfoJson(tx: SimTransaction, nodeSlot: number): Record<string, unknown> {
  return {
    signature: tx.signature,
    slot: tx.slot,
    err: tx.err,
    memo: null,
    blockTime: tx.blockTime,
    confirmationStatus: confirmationOf(tx.slot, nodeSlot),
  };
}
