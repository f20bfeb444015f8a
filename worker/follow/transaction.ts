import { fromBase58 } from '../../src/core/sns/pda.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import { NAME_PROGRAM } from './name-program.js';

/**
 * The name program's instruction tags (spl-name-service, `NameRegistryInstruction`: a Borsh enum,
 * the tag its first byte) and, for each, the index of the name account among the instruction's
 * accounts.
 */
const NAME_ACCOUNT_AT: ReadonlyMap<number, number> = new Map([
  [0, 2], // Create: system program, payer, name account, ...
  [1, 0], // Update: name account, ...
  [2, 0], // Transfer: name account, owner, ...
  [3, 0], // Delete: name account, owner, refund target
  [4, 2], // Realloc: system program, payer, name account, owner
]);
const DELETE_TAG = 3;
/** The log line of a Delete (`msg!` in the program's processor). */
const DELETE_LOG = 'Instruction: Delete Name';
/** Longest instruction data decoded (base58 decoding is quadratic); only its first byte counts. */
const MAX_DATA_CHARS = 4096;
/**
 * Decoding work allowed per transaction, in squared characters (about 50 ms): a real one fits
 * 1,232 bytes, so its name-program instructions cost under a twentieth of it, but a hostile reply
 * of 64 MiB holding thousands of 4,096-character instructions would hold the event loop for
 * minutes. Past it the reply is not believed (as a transaction that could not be read).
 */
const MAX_DECODE_WORK = 4 * MAX_DATA_CHARS * MAX_DATA_CHARS;
/**
 * Instructions of one transaction read at most, top-level and inner together: the runtime runs at
 * most 64 per transaction (its instruction trace limit), so a reply holding more is not a
 * transaction (a hostile one of 100,000 Deletes would otherwise cost 100,000 look-ups).
 */
export const MAX_INSTRUCTIONS = 256;

/** What one transaction did to name accounts (both lists without repeats, in order). */
export type NameWrites = {
  slot: number;
  /** Accounts a Delete closed (the first account of each Delete, inner instructions included). */
  deleted: string[];
  /** Accounts another instruction of the program wrote (created, updated, transferred). */
  written: string[];
};

type Instruction = {
  programIdIndex?: unknown;
  programId?: unknown;
  accounts?: unknown;
  data?: unknown;
};

/**
 * Reads a `getTransaction` result (encoding `json` or `jsonParsed`, legacy or version 0) for the
 * name program's instructions, top level and inner. Returns `failed` for a transaction that
 * failed (it changed nothing), undefined for a result that cannot be read as a transaction: null
 * (not found yet, a lagging node), no slot or no status, no message, more instructions than
 * {@link MAX_INSTRUCTIONS}, or more decoding than {@link MAX_DECODE_WORK}. The callers treat undefined as unknown (tried again, then a new
 * epoch), never as "nothing deleted".
 */
export function nameWrites(tx: unknown): NameWrites | 'failed' | undefined {
  if (typeof tx !== 'object' || tx === null) return undefined;
  const t = tx as {
    slot?: unknown;
    meta?: {
      err?: unknown;
      innerInstructions?: unknown;
      loadedAddresses?: { writable?: unknown; readonly?: unknown };
    } | null;
    transaction?: { message?: { accountKeys?: unknown; instructions?: unknown } };
  };
  const message = t.transaction?.message;
  if (!isSlot(t.slot) || typeof t.meta !== 'object' || t.meta === null) return undefined;
  if (t.meta.err != null) return 'failed';
  if (typeof message !== 'object' || message === null || !Array.isArray(message.accountKeys)) {
    return undefined;
  }
  const keys = [
    ...keyList(message?.accountKeys),
    ...keyList(t.meta?.loadedAddresses?.writable),
    ...keyList(t.meta?.loadedAddresses?.readonly),
  ];
  // In the order they ran: each top-level instruction, then the inner ones it invoked (a CPI
  // of instruction i runs before instruction i + 1), so the last write of an account wins.
  const topLevel = list<Instruction>(message?.instructions);
  let count = topLevel.length;
  if (count > MAX_INSTRUCTIONS) return undefined;
  const innerOf = new Map<number, Instruction[]>();
  for (const inner of list<{ index?: unknown; instructions?: unknown }>(
    t.meta?.innerInstructions,
  )) {
    const at = typeof inner?.index === 'number' ? inner.index : -1;
    const instructions = list<Instruction>(inner?.instructions);
    count += instructions.length + 1;
    if (count > MAX_INSTRUCTIONS) return undefined;
    innerOf.set(at, [...(innerOf.get(at) ?? []), ...instructions]);
  }
  const all: Instruction[] = [];
  topLevel.forEach((ix, i) => {
    all.push(ix, ...(innerOf.get(i) ?? []));
    innerOf.delete(i);
  });
  // Inner instructions naming no top-level one: still read, after the rest.
  for (const rest of innerOf.values()) all.push(...rest);
  const deleted = new Set<string>();
  const written = new Set<string>();
  let work = 0;
  for (const ix of all) {
    if (typeof ix !== 'object' || ix === null) continue;
    const program =
      typeof ix.programId === 'string'
        ? ix.programId
        : typeof ix.programIdIndex === 'number'
          ? keys[ix.programIdIndex]
          : undefined;
    if (program !== NAME_PROGRAM) continue;
    if (typeof ix.data === 'string') work += ix.data.length * ix.data.length;
    if (work > MAX_DECODE_WORK) return undefined;
    const tag = firstByte(ix.data);
    const at = tag === undefined ? undefined : NAME_ACCOUNT_AT.get(tag);
    if (at === undefined) continue;
    const accounts = list<unknown>(ix.accounts);
    const ref = accounts[at];
    const account = typeof ref === 'string' ? ref : typeof ref === 'number' ? keys[ref] : undefined;
    if (account === undefined) continue;
    // What the last instruction did to an account is what the transaction left: a name deleted
    // and created again in one transaction exists.
    if (tag === DELETE_TAG) {
      deleted.add(account);
      written.delete(account);
    } else {
      written.add(account);
      deleted.delete(account);
    }
  }
  return { slot: t.slot, deleted: [...deleted], written: [...written] };
}

/** The lines of the name program's instructions that write an account (not Delete). */
const WRITE_LOGS = [
  'Instruction: Create',
  'Instruction: Update Data',
  'Instruction: Transfer Ownership',
  'Instruction: Realloc',
];
const INVOKE = /^Program (\S+) invoke \[\d+\]$/;
const RETURN = /^Program (\S+) (?:success|failed)/;

/**
 * Whether a successful transaction's logs say the name program itself wrote a name account
 * (Create, Update, Transfer, Realloc). Such a write brings an account notification on a
 * whole-program stream that works.
 */
export const logsWrite = (logs: readonly string[]): boolean => nameProgramSaid(logs, WRITE_LOGS);

/** The line the runtime writes in place of the logs past its limit (10 KB). */
const LOG_TRUNCATED = 'Log truncated';

/**
 * Whether a transaction's logs say it deleted a name (it is worth a `getTransaction`): the name
 * program's own line, or logs cut short by the runtime (the line may be in the part cut).
 */
export const logsDelete = (logs: readonly string[]): boolean =>
  logs.includes(LOG_TRUNCATED) || nameProgramSaid(logs, [DELETE_LOG]);

/**
 * Whether a `Program log:` line holding one of `words` was written by the name program: lines are
 * attributed to the program on top of the invocation stack, so another program writing the same
 * words (any transaction may mention the name program) costs nothing.
 */
function nameProgramSaid(logs: readonly string[], words: readonly string[]): boolean {
  const stack: string[] = [];
  for (const line of logs) {
    const invoke = INVOKE.exec(line);
    if (invoke) {
      stack.push(invoke[1] as string);
      continue;
    }
    if (RETURN.test(line)) {
      stack.pop();
      continue;
    }
    if (
      stack.at(-1) === NAME_PROGRAM &&
      line.startsWith('Program log: ') &&
      words.some((w) => line.includes(w))
    ) {
      return true;
    }
  }
  return false;
}

function list<T>(value: unknown): T[] {
  return Array.isArray(value) ? (value as T[]) : [];
}

/** Account keys as `json` (strings) or `jsonParsed` (`{pubkey}`) writes them. */
function keyList(value: unknown): string[] {
  return list<unknown>(value).map((k) =>
    typeof k === 'string'
      ? k
      : typeof (k as { pubkey?: unknown })?.pubkey === 'string'
        ? (k as { pubkey: string }).pubkey
        : '',
  );
}

function firstByte(data: unknown): number | undefined {
  if (typeof data !== 'string' || data.length === 0 || data.length > MAX_DATA_CHARS)
    return undefined;
  try {
    const bytes = fromBase58(data);
    return bytes[0];
  } catch {
    return undefined;
  }
}
