/**
 * The simulator's history methods, getTransaction and getSignaturesForAddress: what a node knows
 * of the transactions the chain kept (its lag, its commitment, a stingy provider's page cap).
 */
import { PublicKey } from '@solana/web3.js';
import { base58Decode } from './base58.js';
import type { SimChain } from './chain.js';
import type { ChainView } from './chain-view.js';
import { MAX_SIGNATURES_LIMIT } from './limits.js';
import type { ResultJson } from './methods.js';
import {
  invalidParams,
  optionalConfig,
  pubkeyParam,
  readContext,
  readLimit,
  type Config,
} from './params.js';
import { FINALIZED_DEPTH, signatureInfoJson, transactionJson } from './transaction-json.js';
import type { SimTransaction } from './transactions.js';

/** Which transactions a node has. */
export interface TransactionView {
  readonly chain: SimChain;
  /** Transactions after this chain time (ms) are unknown yet. */
  readonly cutoff: number;
  /** Rows getSignaturesForAddress answers at most once its `limit` is checked (Infinity: none). */
  readonly signaturesPageCap: number;
}

/**
 * getTransaction: a kept transaction, or null when the node does not know it (forgotten, younger
 * than the lag, or under `finalized` not 32 slots deep yet).
 * @throws RpcError -32602 on a bad signature, `processed` (as agave), a version above 0, or an
 *   encoding other than json, jsonParsed.
 */
export function getTransaction(
  _view: ChainView,
  params: unknown[],
  slot: number,
  txs: TransactionView,
): ResultJson {
  const signature = signatureParam(params[0]);
  const config: Config =
    typeof params[1] === 'string' ? { encoding: params[1] } : optionalConfig(params[1]);
  const finalized = readHistoryCommitment(config);
  const { encoding, maxSupportedTransactionVersion: version } = config;
  if (encoding !== undefined && encoding !== 'json' && encoding !== 'jsonParsed') {
    throw invalidParams(
      `Invalid params: unsupported encoding ${JSON.stringify(encoding)} (simulator serves json, jsonParsed)`,
    );
  }
  if (version !== undefined && version !== null && version !== 0) {
    throw invalidParams('Invalid params: maxSupportedTransactionVersion must be 0');
  }
  const tx = txs.chain.getTransaction(signature);
  if (!tx || !visible(tx, slot, txs, finalized)) return 'null';
  const withVersion = version === 0;
  return JSON.stringify(transactionJson(tx, encoding ?? 'json', withVersion));
}

/**
 * getSignaturesForAddress: transactions naming `address`, newest first, between `before` and
 * `until` (exclusive), at most `limit` (≤ 1000). As agave, an unknown `before` gives [] and an
 * unknown `until` reaches the oldest kept.
 * @throws RpcError -32602 on bad params or `processed`; -32016 for `minContextSlot` ahead.
 */
export function getSignaturesForAddress(
  _view: ChainView,
  params: unknown[],
  slot: number,
  txs: TransactionView,
): ResultJson {
  const address = pubkeyParam(params[0]);
  const config = optionalConfig(params[1]);
  const finalized = readHistoryCommitment(config);
  readContext({ minContextSlot: config.minContextSlot }, slot);
  const limit = readLimit(
    config,
    MAX_SIGNATURES_LIMIT,
    MAX_SIGNATURES_LIMIT,
    `Invalid limit; max ${MAX_SIGNATURES_LIMIT}`,
  );
  // Checked before the cap cuts it: a node refuses a bad limit however little it would send.
  const rowsAtMost = Math.min(limit, txs.signaturesPageCap);
  const before = config.before == null ? undefined : signatureParam(config.before);
  const until = config.until == null ? undefined : signatureParam(config.until);
  const beforeTx = before === undefined ? undefined : txs.chain.getTransaction(before);
  if (before !== undefined && (!beforeTx || !visible(beforeTx, slot, txs, finalized))) {
    return '[]';
  }
  const rows: string[] = [];
  const addressKey = new PublicKey(address);
  for (const tx of txs.chain.transactionsNewestFirst()) {
    if (beforeTx && tx.index >= beforeTx.index) continue;
    if (tx.signature === until) break;
    if (!visible(tx, slot, txs, finalized) || !tx.mentions(addressKey)) continue;
    rows.push(JSON.stringify(signatureInfoJson(tx, slot)));
    if (rows.length >= rowsAtMost) break;
  }
  return `[${rows.join(',')}]`;
}

function visible(
  tx: SimTransaction,
  slot: number,
  txs: TransactionView,
  finalized: boolean,
): boolean {
  if (tx.time > txs.cutoff || tx.slot > slot) return false;
  return !finalized || slot - tx.slot >= FINALIZED_DEPTH;
}

/**
 * History commitment: at least confirmed, default finalized (agave's
 * `check_is_at_least_confirmed`); true if finalized.
 */
function readHistoryCommitment(config: Config): boolean {
  const { commitment } = config;
  readContext({ commitment }, 0);
  if (commitment === 'processed' || commitment === 'recent' || commitment === 'single') {
    throw invalidParams('Method does not support commitment below `confirmed`');
  }
  return commitment === undefined || ['finalized', 'max', 'root'].includes(commitment as string);
}

/** A 64-byte base58 signature; else -32602 as agave's `verify_signature`. */
function signatureParam(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a signature string');
  const bytes = base58Decode(value);
  if (!bytes) throw invalidParams('Invalid param: Invalid');
  if (bytes.length !== 64) throw invalidParams('Invalid param: WrongSize');
  return value;
}
