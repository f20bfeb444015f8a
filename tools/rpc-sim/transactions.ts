/**
 * Transactions of the RPC simulator: the instructions a chain write is made of, their log lines,
 * and the JSON a node gives for them (`getTransaction`, `getSignaturesForAddress`,
 * `logsNotification`).
 *
 * Instruction data and accounts follow the SPL Name Service program (instruction enum: Create = 0,
 * Update = 1, Transfer = 2, Delete = 3; borsh) and the SNS SDK's instruction builders. Log lines
 * are the runtime's ("Program <id> invoke [<depth>]", "Program <id> consumed <n> of <m> compute
 * units", "Program <id> success"; builtins such as the system program log no "consumed" line) and
 * the name program's own `msg!` lines ("Entrypoint", "Beginning processing", "Instruction
 * unpacked", then "Instruction: Create" / "Instruction: Update Data" / "Instruction: Transfer
 * Ownership" / "Instruction: Delete Name"), each prefixed "Program log: ". Compute-unit figures
 * are made up (fixed per instruction), as are fees' payers' balances.
 */
import { createHash, randomBytes } from 'node:crypto';
import { HASH_PREFIX, NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { PublicKey, SystemProgram } from '@solana/web3.js';
import { base58Encode } from './base58.js';

/** One account of an instruction, as web3.js's `AccountMeta`. */
export interface SimAccountMeta {
  pubkey: PublicKey;
  isSigner: boolean;
  isWritable: boolean;
}

/** An instruction as the simulator runs it: what a program was called with and what it logged. */
export interface SimInstruction {
  readonly programId: PublicKey;
  readonly accounts: readonly SimAccountMeta[];
  readonly data: Buffer;
  /** The program's own log messages (without "Program log: "), written before its CPIs. */
  readonly logs: readonly string[];
  /** Instructions this one invokes (cross-program invocations), in order. */
  readonly inner: readonly SimInstruction[];
  /**
   * Compute units the program uses itself (its CPIs add theirs); undefined for builtins, which
   * log no "consumed" line.
   */
  readonly units?: number;
  /**
   * The instruction fails after its own log lines: `message` is logged by the program, `error`
   * names the InstructionError (e.g. "InvalidArgument") and `text` is how the runtime logs it
   * ("invalid program argument"). Later instructions do not run.
   */
  readonly fails?: { message: string; error: string; text: string };
  /**
   * jsonParsed form (`{type, info}`) for programs agave parses (the system program here); `info`
   * is built when asked for (base58 is slow, and most transactions are never read).
   */
  readonly parsed?: { program: string; type: string; info: () => Record<string, unknown> };
}

/** The message header of a legacy transaction. */
export interface MessageHeader {
  numRequiredSignatures: number;
  numReadonlySignedAccounts: number;
  numReadonlyUnsignedAccounts: number;
}

/** A transaction the chain ran, kept for `getTransaction` and `getSignaturesForAddress`. */
export interface SimTransaction {
  /** Base58 of the first signature (64 bytes): the transaction id. */
  readonly signature: string;
  /** Base58 signatures, one per required signer (the first is `signature`). */
  readonly signatures: readonly string[];
  readonly slot: number;
  /** Unix seconds. */
  readonly blockTime: number;
  /** The chain clock (ms) when it ran; decides what a lagging node sees. */
  readonly time: number;
  /** Order among all transactions of the chain, from 0. */
  readonly index: number;
  /**
   * null when it succeeded; else the TransactionError as the RPC writes it, e.g.
   * `{"InstructionError":[0,"InvalidArgument"]}` (then none of its writes happened).
   */
  readonly err: TransactionErrorJson | null;
  readonly header: MessageHeader;
  /** Base58 account keys: signers first (fee payer at 0), then writable, then read-only. */
  readonly accountKeys: readonly string[];
  /** Per account key: writable in this transaction. */
  readonly writable: readonly boolean[];
  readonly recentBlockhash: string;
  /** Top-level instructions. */
  readonly instructions: readonly SimInstruction[];
  readonly fee: number;
  /**
   * Lamports per account key before and after. Accounts the transaction wrote, and its fee
   * payer, are exact; others are read when first asked for.
   */
  readonly preBalances: readonly number[];
  readonly postBalances: readonly number[];
  /** Log messages as the runtime collects them. */
  readonly logs: readonly string[];
  readonly computeUnitsConsumed: number;
  /** Whether `pubkey` is one of the account keys (what logsSubscribe `mentions` matches). */
  mentions(pubkey: PublicKey): boolean;
}

/** A TransactionError as JSON (`{"InstructionError":[index, error]}` for a failed instruction). */
export type TransactionErrorJson = { InstructionError: [number, string] };

/** What the chain records when a transaction runs; the rest is derived when first asked for. */
export interface TransactionRecord {
  readonly signature: Buffer;
  readonly slot: number;
  readonly blockTime: number;
  readonly time: number;
  readonly index: number;
  readonly feePayer: PublicKey;
  readonly instructions: readonly SimInstruction[];
  /** Set when an instruction failed (see `SimInstruction.fails`). */
  readonly err: TransactionErrorJson | null;
  /** Lamports before and after of each account the transaction wrote, by base58 key. */
  readonly written: ReadonlyMap<string, readonly [number, number]>;
  /** The fee payer's lamports before and after, when it is a wallet the chain does not store. */
  readonly payer: readonly [number, number] | undefined;
  /** Lamports of any other account key (read when balances are first asked for). */
  readonly balanceOf: (key: string) => number;
}

/** A kept transaction: the record, with JSON-facing fields computed once, when first read. */
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

/** Lamports per signature, mainnet's base fee. */
export const LAMPORTS_PER_SIGNATURE = 5000;
/** Compute-unit limit per top-level instruction when a transaction sets none (agave's default). */
const UNITS_PER_INSTRUCTION = 200_000;
/** Most compute units a transaction may use. */
const MAX_UNITS = 1_400_000;
/** Made-up compute units of each instruction's own work. */
const NAME_UNITS = { create: 6_200, update: 2_500, transfer: 2_900, delete: 3_100 } as const;
const REGISTRAR_UNITS = 8_400;
const WRAPPER_UNITS = 1_800;
/** Balance the simulator gives program and sysvar accounts, which it does not store. */
export const PROGRAM_LAMPORTS = 1_141_440;

/** Lines every name-program instruction logs before its own (the entrypoint and processor). */
const NAME_PROGRAM_PREAMBLE = ['Entrypoint', 'Beginning processing', 'Instruction unpacked'];

/** The name program's log line for each instruction, as its processor writes it. */
export const NAME_INSTRUCTION_LOG = {
  create: 'Instruction: Create',
  update: 'Instruction: Update Data',
  transfer: 'Instruction: Transfer Ownership',
  delete: 'Instruction: Delete Name',
} as const;

/** Name-program instruction tags (the borsh enum index). */
export const NAME_INSTRUCTION_TAG = { create: 0, update: 1, transfer: 2, delete: 3 } as const;

const SYSTEM_ID = SystemProgram.programId;
const meta = (pubkey: PublicKey, isSigner: boolean, isWritable: boolean): SimAccountMeta => ({
  pubkey,
  isSigner,
  isWritable,
});

/** SHA-256 of the SNS hash prefix + name: the `hashed_name` of a Create. */
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
  /** Signs for the parent when there is one (header parent not the zero key). */
  parentOwner?: PublicKey;
  /** The name hashed into the account's address. */
  name: string;
  lamports: number;
  /** Data bytes after the header. */
  space: number;
  /** Whether the account existed already (then the program makes no system-program calls). */
  existed: boolean;
}

/**
 * The name program's Create (tag 0: borsh `{hashed_name: Vec<u8>, lamports: u64, space: u32}`),
 * accounts as the SDK's `createInstruction` lists them; a new account is funded, allocated and
 * assigned through three system-program calls.
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

/** The name program's Update (tag 1: borsh `{offset: u32, data: Vec<u8>}`) by `signer`. */
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

/** The name program's Transfer (tag 2: the new owner's 32 bytes), signed by the current owner. */
export function nameTransfer(
  nameKey: PublicKey,
  owner: PublicKey,
  newOwner: PublicKey,
): SimInstruction {
  const data = Buffer.concat([Buffer.from([NAME_INSTRUCTION_TAG.transfer]), newOwner.toBuffer()]);
  return nameInstruction('transfer', [meta(nameKey, false, true), meta(owner, true, false)], data);
}

/**
 * The name program's Delete (tag 3, no arguments): accounts name record, owner (signer), refund
 * target; the program zeroes the data and moves all lamports to the refund target.
 */
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
 * The SNS registrar's createReverse (tag 12, borsh `{name: string}`), accounts as the SDK's
 * `createReverseInstruction`, running `inner` (the name-program Create and Update of the reverse
 * record). Its own log lines are not modelled (none are written).
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

/**
 * An instruction of another program (`programId`) that invokes `inner` (cross-program
 * invocations): its accounts are the union of theirs. Data: one zero byte. Logs nothing itself.
 */
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

/** Calls `visit` on every instruction of the tree, parents before their CPIs. */
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

/** Each distinct account of a transaction (fee payer first) with its merged signer/writable flags. */
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
  // Privileges come from the top-level instructions: a program signs for its addresses in a CPI
  // (invoke_signed) without their being signers of the transaction.
  walkInstructions(instructions, (ix, depth) => {
    for (const m of ix.accounts) add(m.pubkey, depth === 1 && m.isSigner, m.isWritable);
    add(ix.programId, false, false);
  });
  return [...flags.values()];
}

/** Number of distinct signers of a transaction (what its fee is per). */
export function signerCount(feePayer: PublicKey, instructions: readonly SimInstruction[]): number {
  return accountFlags(feePayer, instructions).filter((f) => f.signer).length;
}

/** Whether `pubkey` is among the transaction's account keys, without base58. */
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

/**
 * Log messages and compute units of a run of `instructions`, as the runtime writes them: each
 * invocation's "invoke [depth]", the program's own lines as "Program log: ...", its CPIs, then
 * (programs that are not builtins) "consumed <used> of <available> compute units" and "success".
 */
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

/** The runtime's text of the failure inside `ix` (its own or a CPI's), if any. */
function failureOf(ix: SimInstruction): string | undefined {
  if (ix.fails) return ix.fails.text;
  for (const call of ix.inner) {
    const text = failureOf(call);
    if (text) return text;
  }
  return undefined;
}

/** The TransactionError of a run of instructions, null when none fails. */
export function errorOf(instructions: readonly SimInstruction[]): TransactionErrorJson | null {
  const find = (ix: SimInstruction): string | undefined =>
    ix.fails?.error ?? ix.inner.map(find).find((e) => e !== undefined);
  for (const [i, ix] of instructions.entries()) {
    const error = find(ix);
    if (error) return { InstructionError: [i, error] };
  }
  return null;
}

/** Random bytes handed out 64 at a time: one system call per thousand signatures. */
let signaturePool = Buffer.alloc(0);
let signatureAt = 0;

/** A new random 64-byte signature. */
export function newSignature(): Buffer {
  if (signatureAt + 64 > signaturePool.length) {
    signaturePool = randomBytes(64 * 1024);
    signatureAt = 0;
  }
  signatureAt += 64;
  return signaturePool.subarray(signatureAt - 64, signatureAt);
}

/** A recent blockhash for `slot`: base58 of SHA-256 of the slot number (32 bytes). */
export function blockhashOf(slot: number): string {
  return base58Encode(createHash('sha256').update(`sim-blockhash-${slot}`).digest());
}

// ---- JSON ------------------------------------------------------------------------------

/** Encodings `getTransaction` serves. */
export type TransactionEncoding = 'json' | 'jsonParsed';

/**
 * Confirmation status of a transaction at `slot` seen from a node at `nodeSlot`: finalized once
 * 32 slots deep (the depth of a root on mainnet), else confirmed (the simulator has no forks).
 */
export function confirmationOf(slot: number, nodeSlot: number): 'confirmed' | 'finalized' {
  return nodeSlot - slot >= FINALIZED_DEPTH ? 'finalized' : 'confirmed';
}

/** Slots a transaction needs under the tip before it counts as finalized. */
export const FINALIZED_DEPTH = 32;

/**
 * The `getTransaction` result (EncodedConfirmedTransactionWithStatusMeta): slot, transaction
 * {signatures, message}, meta, version (when `maxSupportedTransactionVersion` was given:
 * "legacy"), blockTime. json: raw message with index-based instructions (data base58);
 * jsonParsed: account keys as objects, instructions by program id (system-program calls parsed).
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

/** One row of `getSignaturesForAddress`. */
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
