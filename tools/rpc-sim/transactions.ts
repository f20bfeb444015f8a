/**
 * The simulator's transactions: what one holds, the accounts it names, the runtime's logs and
 * errors of its instructions, its signature and blockhash. The instructions themselves are built
 * in ./instructions.ts, the JSON a node gives in ./transaction-json.ts. Payers' balances are made
 * up.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { PublicKey } from '@solana/web3.js';
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
/** Balance of program and sysvar accounts, which are not stored. */
export const PROGRAM_LAMPORTS = 1_141_440;
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
