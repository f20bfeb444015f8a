/** The JSON a node gives of a transaction: `getTransaction`, `getSignaturesForAddress`. */
import { base58Encode } from './base58.js';
import { walkInstructions, type SimInstruction, type SimTransaction } from './transactions.js';

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
