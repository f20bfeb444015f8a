/**
 * Solana JSON-RPC methods served by the simulator, answering from a `SimChain`. Results are
 * produced as JSON text (not objects) so account lists are built without intermediate objects
 * and `rentEpoch` can be written as the exact u64 the real RPC sends.
 */
import { PublicKey } from '@solana/web3.js';
import { base58Decode, base58Encode, isBase58Pubkey } from './base58.js';
import type { ChainView, SimChain, StoredAccount } from './chain.js';
import { FINALIZED_DEPTH, signatureInfoJson, transactionJson } from './transactions.js';
import type { SimTransaction } from './transactions.js';

/** Version the simulator claims (`getVersion`, `context.apiVersion`). */
export const SIM_SOLANA_VERSION = '2.2.0';
/** Most filters a getProgramAccounts call may carry (as on the real RPC). */
export const MAX_FILTERS = 4;
/** Most pubkeys a getMultipleAccounts call may carry (as on the real RPC). */
export const MAX_MULTIPLE_ACCOUNTS = 100;
/** Largest memcmp filter, and largest data the base58 encoding may return, in bytes. */
export const MAX_BASE58_BYTES = 128;
/** Most rows getSignaturesForAddress gives (agave's MAX_GET_CONFIRMED_SIGNATURES_FOR_ADDRESS2_LIMIT). */
export const MAX_SIGNATURES_LIMIT = 1000;
/** u64::MAX, what the real RPC reports as `rentEpoch` of rent-exempt accounts. */
const RENT_EPOCH_JSON = '18446744073709551615';

/** JSON-RPC 2.0 error codes used by the simulator. */
export const RpcErrorCode = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  minContextSlotNotReached: -32016,
} as const;

/** A JSON-RPC error to answer with (`{ code, message, data? }`). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

/** The result of one call, as JSON text. */
export type ResultJson = string;

/** What the transaction methods need beyond the accounts: which transactions a node has. */
export interface TransactionView {
  readonly chain: SimChain;
  /** Transactions run after this chain time (ms) are not known to the node yet. */
  readonly cutoff: number;
}

type Handler = (
  chain: ChainView,
  params: unknown[],
  slot: number,
  txs: TransactionView,
) => ResultJson;

const HANDLERS: Record<string, Handler> = {
  getProgramAccounts,
  getTransaction,
  getSignaturesForAddress,
  getMultipleAccounts,
  getAccountInfo,
  getTokenLargestAccounts,
  getSlot: (chain, params, slot) => {
    readContext(optionalConfig(params[0]), slot);
    return String(slot);
  },
  getHealth: () => '"ok"',
  getVersion: () => JSON.stringify({ 'solana-core': SIM_SOLANA_VERSION, 'feature-set': 1 }),
};

/**
 * Simulator-only methods that change the chain, so a running simulator can be driven with
 * curl. No real node has them; the `sim` prefix says so.
 */
const SIM_HANDLERS: Record<string, (chain: SimChain, params: unknown[]) => ResultJson> = {
  simAddSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    const keys = chainCall(() => chain.addSubdomain(parent, label));
    return JSON.stringify({
      subdomain: keys.subKey.toBase58(),
      reverse: keys.reverseKey.toBase58(),
      signature: keys.signature,
    });
  },
  simDeleteSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    return String(chainCall(() => chain.deleteSubdomain(parent, label)));
  },
  simTransferSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    const newOwner = pubkeyParam(params[2]);
    const keys = chainCall(() => chain.transferSubdomain(parent, label, new PublicKey(newOwner)));
    return JSON.stringify({ subdomain: keys.subKey.toBase58(), signature: keys.signature });
  },
};

/** Names of the methods the simulator serves (the read methods a real node has). */
export const SUPPORTED_METHODS: readonly string[] = Object.keys(HANDLERS);

/**
 * Simulator-only JSON-RPC methods, served over HTTP next to `SUPPORTED_METHODS`:
 * - `simAddSubdomain` `[parent, label]` → `{subdomain, reverse, signature}` (base58): writes the
 *   subdomain's name account and reverse record with `SimChain.addSubdomain` (one transaction).
 * - `simDeleteSubdomain` `[parent, label]` → boolean (whether anything existed): deletes both
 *   with `SimChain.deleteSubdomain` (name-program Deletes).
 * - `simTransferSubdomain` `[parent, label, newOwner]` → `{subdomain, signature}`: the
 *   name-program Transfer of `SimChain.transferSubdomain`.
 * They write to the chain now, whatever the HTTP lag.
 */
export const SIM_ONLY_METHODS: readonly string[] = Object.keys(SIM_HANDLERS);

/**
 * Runs one JSON-RPC method: read methods against `view` as of `slot`, simulator-only methods
 * (`SIM_ONLY_METHODS`) against `chain`. Transaction methods see only transactions at least
 * `txLagMs` old (by the chain's clock) and no later than `slot`.
 * @param params the request's `params` (absent, or an array).
 * @param view what read methods see; default the chain now (a lagging node passes
 *   `chain.asOf(lag)` and its slot).
 * @returns the result as JSON text.
 * @throws RpcError -32601 for an unknown method, -32602 for bad params, -32016 when
 *   `minContextSlot` is ahead of `slot`.
 */
export function callMethod(
  chain: SimChain,
  method: string,
  params: unknown,
  slot: number,
  view: ChainView = chain,
  txLagMs = 0,
): ResultJson {
  const handler = Object.hasOwn(HANDLERS, method) ? HANDLERS[method] : undefined;
  const simHandler = Object.hasOwn(SIM_HANDLERS, method) ? SIM_HANDLERS[method] : undefined;
  if (!handler && !simHandler) throw new RpcError(RpcErrorCode.methodNotFound, 'Method not found');
  const list = paramList(params);
  return handler
    ? handler(view, list, slot, { chain, cutoff: chain.nowMs() - txLagMs })
    : (simHandler as NonNullable<typeof simHandler>)(chain, list);
}

function paramList(params: unknown): unknown[] {
  if (params !== undefined && !Array.isArray(params)) {
    throw invalidParams('Invalid params: expected an array of parameters');
  }
  return (params as unknown[] | undefined) ?? [];
}

function nameParams(params: unknown[]): [string, string] {
  const [parent, label] = params;
  if (typeof parent !== 'string' || typeof label !== 'string') {
    throw invalidParams('Invalid params: expected [parent, label] strings');
  }
  return [parent, label];
}

/** Turns the chain helpers' name errors into -32602. */
function chainCall<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw invalidParams(`Invalid params: ${err instanceof Error ? err.message : String(err)}`);
  }
}

// ---- methods ---------------------------------------------------------------------------

function getProgramAccounts(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const programKey = pubkeyParam(params[0]);
  const config = optionalConfig(params[1]);
  const encoding = readEncoding(config);
  const dataSlice = readDataSlice(config);
  const withContext = readBoolean(config, 'withContext');
  const filters = readFilters(config);
  const context = readContext(config, slot);
  const parts: string[] = [];
  for (const account of chain.ownedBy(programKey)) {
    if (!filters.every((filter) => filter(account.data))) continue;
    parts.push(
      `{"account":${accountJson(account, encoding, dataSlice)},"pubkey":"${account.key}"}`,
    );
  }
  const list = `[${parts.join(',')}]`;
  return withContext ? `{"context":${context},"value":${list}}` : list;
}

function getMultipleAccounts(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const keys = params[0];
  if (!Array.isArray(keys)) throw invalidParams('Invalid params: expected an array of pubkeys');
  if (keys.length > MAX_MULTIPLE_ACCOUNTS) {
    throw invalidParams(`Too many inputs provided; max ${MAX_MULTIPLE_ACCOUNTS}`);
  }
  const config = optionalConfig(params[1]);
  const encoding = readEncoding(config);
  const dataSlice = readDataSlice(config);
  const context = readContext(config, slot);
  const values = keys.map((key) => {
    const account = chain.lookup(pubkeyParam(key));
    return account ? accountJson(account, encoding, dataSlice) : 'null';
  });
  return `{"context":${context},"value":[${values.join(',')}]}`;
}

function getAccountInfo(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const key = pubkeyParam(params[0]);
  const config = optionalConfig(params[1]);
  const encoding = readEncoding(config);
  const dataSlice = readDataSlice(config);
  const context = readContext(config, slot);
  const account = chain.lookup(key);
  return `{"context":${context},"value":${account ? accountJson(account, encoding, dataSlice) : 'null'}}`;
}

/**
 * getTransaction `[signature, {encoding?, commitment?, maxSupportedTransactionVersion?}]` (or
 * `[signature, encoding]`): the EncodedConfirmedTransactionWithStatusMeta of a kept transaction
 * (see `transactionJson`), or null when the node does not know it (yet): forgotten, younger than
 * the lag, or, at the default `finalized` commitment, not yet 32 slots deep.
 * @throws RpcError -32602 on a bad signature, a `processed` commitment (agave's "Method does not
 *   support commitment below `confirmed`"), a version above 0, or an encoding other than json,
 *   jsonParsed.
 */
function getTransaction(
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
 * getSignaturesForAddress `[address, {limit?, before?, until?, commitment?, minContextSlot?}]`:
 * transactions whose account keys hold `address`, newest first, strictly older than `before`
 * and strictly newer than `until`, at most `limit` (default and most 1000), as
 * `{signature, slot, err, memo, blockTime, confirmationStatus}`. As agave: a `before` the node
 * does not know gives [], an `until` it does not know reaches back to the oldest kept.
 * @throws RpcError -32602 on bad params or a `processed` commitment; -32016 when
 *   `minContextSlot` is ahead of the node.
 */
function getSignaturesForAddress(
  _view: ChainView,
  params: unknown[],
  slot: number,
  txs: TransactionView,
): ResultJson {
  const address = pubkeyParam(params[0]);
  const config = optionalConfig(params[1]);
  const finalized = readHistoryCommitment(config);
  readContext({ minContextSlot: config.minContextSlot }, slot);
  const limit = config.limit ?? MAX_SIGNATURES_LIMIT;
  if (
    typeof limit !== 'number' ||
    !Number.isSafeInteger(limit) ||
    limit < 1 ||
    limit > MAX_SIGNATURES_LIMIT
  ) {
    throw invalidParams(`Invalid limit; max ${MAX_SIGNATURES_LIMIT}`);
  }
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
    if (rows.length >= limit) break;
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
 * The commitment of a history method (getTransaction, getSignaturesForAddress): at least
 * confirmed, default finalized, as agave's `check_is_at_least_confirmed`.
 * @returns whether it is finalized.
 */
function readHistoryCommitment(config: Config): boolean {
  const { commitment } = config;
  readContext({ commitment }, 0);
  if (commitment === 'processed' || commitment === 'recent' || commitment === 'single') {
    throw invalidParams('Method does not support commitment below `confirmed`');
  }
  return commitment === undefined || ['finalized', 'max', 'root'].includes(commitment as string);
}

/**
 * A base58 transaction signature (64 bytes).
 * @throws RpcError -32602 "Invalid param: ..." as agave's `verify_signature`.
 */
function signatureParam(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a signature string');
  const bytes = base58Decode(value);
  if (!bytes) throw invalidParams('Invalid param: Invalid');
  if (bytes.length !== 64) throw invalidParams('Invalid param: WrongSize');
  return value;
}

/**
 * The simulator holds no SPL token state, so a mint is never found. The SDK's
 * `NameRegistryState.retrieve` (used by `reverseLookup`) calls this to check whether a name
 * is tokenized and treats -32602 as "not tokenized", which is what mainnet answers for a
 * mint that does not exist.
 */
function getTokenLargestAccounts(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const key = pubkeyParam(params[0]);
  const context = readContext(optionalConfig(params[1]), slot);
  const account = chain.lookup(key);
  if (!account) throw invalidParams('Invalid param: could not find account');
  if (account.ownerKey !== TOKEN_PROGRAM && account.ownerKey !== TOKEN_2022_PROGRAM) {
    throw invalidParams('Invalid param: not a Token mint');
  }
  return `{"context":${context},"value":[]}`;
}

const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const TOKEN_2022_PROGRAM = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';

// ---- encoding --------------------------------------------------------------------------

/**
 * How account data is written: `base64` and `base58` as `["<data>","<encoding>"]`; `binary`
 * (the pubsub default, "legacy binary") as a bare base58 string. `jsonParsed` is served as
 * `base64`, as the real RPC does for accounts it cannot parse.
 */
export type Encoding = 'base64' | 'base58' | 'binary';

/** `dataSlice` of a request: bytes `offset .. offset+length` of the data, clamped. */
export interface DataSlice {
  offset: number;
  length: number;
}

/** Test run on an account's whole data (a getProgramAccounts/programSubscribe filter). */
export type Filter = (data: Buffer) => boolean;

/** Text agave's account decoder puts in place of base58 data over `MAX_BASE58_BYTES`. */
const BASE58_TOO_LARGE = 'error: data too large for bs58 encoding';
const SYSTEM_PROGRAM = '11111111111111111111111111111111';

/**
 * One account as the RPC writes it (`{"data":…,"executable":false,"lamports":…,"owner":…,
 * "rentEpoch":…,"space":…}`), data cut by `slice`.
 * @param base58TooLarge what to do when base58/binary data is over `MAX_BASE58_BYTES`:
 *   `'throw'` (HTTP methods: RpcError -32600) or `'placeholder'` (pubsub notifications: the
 *   text agave's account decoder writes instead of the data).
 */
export function accountJson(
  account: StoredAccount,
  encoding: Encoding,
  slice: DataSlice | undefined,
  base58TooLarge: 'throw' | 'placeholder' = 'throw',
): string {
  const { data } = account;
  let encoded: string;
  if (encoding === 'base58' || encoding === 'binary') {
    const bytes = slice ? data.subarray(slice.offset, slice.offset + slice.length) : data;
    if (bytes.length <= MAX_BASE58_BYTES) encoded = base58Encode(bytes);
    else if (base58TooLarge === 'placeholder') encoded = BASE58_TOO_LARGE;
    else {
      throw new RpcError(
        RpcErrorCode.invalidRequest,
        `Encoded binary (base 58) data should be less than ${MAX_BASE58_BYTES} bytes, please use Base64 encoding.`,
      );
    }
  } else if (slice) {
    const bytes = data.subarray(slice.offset, slice.offset + slice.length);
    encoded = bytes.length === 0 ? '' : bytes.toString('base64');
  } else {
    encoded = account.base64 ??= data.toString('base64');
  }
  const dataJson = encoding === 'binary' ? `"${encoded}"` : `["${encoded}","${encoding}"]`;
  return (
    `{"data":${dataJson},"executable":false,"lamports":${account.lamports},` +
    `"owner":"${account.ownerKey}","rentEpoch":${RENT_EPOCH_JSON},"space":${data.length}}`
  );
}

/**
 * A deleted account as accountNotification reports it: what the runtime stores for a closed
 * account (0 lamports, no data, owned by the system program, rentEpoch 0).
 */
export function closedAccountJson(encoding: Encoding): string {
  const dataJson = encoding === 'binary' ? '""' : `["","${encoding}"]`;
  return (
    `{"data":${dataJson},"executable":false,"lamports":0,` +
    `"owner":"${SYSTEM_PROGRAM}","rentEpoch":0,"space":0}`
  );
}

// ---- pubsub params ---------------------------------------------------------------------

/** What accountSubscribe/programSubscribe asked for, validated. */
export interface SubscriptionParams {
  /** Base58 account (accountSubscribe) or program (programSubscribe) key. */
  key: string;
  encoding: Encoding;
  dataSlice: DataSlice | undefined;
  /** programSubscribe only; all must pass. Empty for accountSubscribe. */
  filters: Filter[];
}

/**
 * Validates accountSubscribe params `[pubkey, {encoding?, commitment?, dataSlice?}]` with the
 * same rules as the HTTP methods; the encoding defaults to `binary`, as on agave.
 * `minContextSlot` is accepted and ignored (agave ignores it too).
 * @throws RpcError -32602 on bad params (`base64+zstd` included: the simulator has no zstd).
 */
export function readAccountSubscribe(params: unknown): SubscriptionParams {
  const list = paramList(params);
  const key = pubkeyParam(list[0]);
  const config = optionalConfig(list[1]);
  readContext({ commitment: config.commitment }, 0);
  return {
    key,
    encoding: readEncoding(config, 'binary'),
    dataSlice: readDataSlice(config),
    filters: [],
  };
}

/**
 * Validates programSubscribe params `[programId, {encoding?, commitment?, filters?,
 * dataSlice?, withContext?}]` with the same rules as getProgramAccounts (filters included);
 * the encoding defaults to `binary`, as on agave.
 * @throws RpcError -32602 on bad params.
 */
export function readProgramSubscribe(params: unknown): SubscriptionParams {
  const list = paramList(params);
  const key = pubkeyParam(list[0]);
  const config = optionalConfig(list[1]);
  readContext({ commitment: config.commitment }, 0);
  readBoolean(config, 'withContext');
  return {
    key,
    encoding: readEncoding(config, 'binary'),
    dataSlice: readDataSlice(config),
    filters: readFilters(config),
  };
}

/** What logsSubscribe asked for: transactions mentioning `mentions`, or all (undefined). */
export interface LogsParams {
  mentions: PublicKey | undefined;
}

/**
 * Validates logsSubscribe params `[filter, {commitment?}]`, filter `"all"`, `"allWithVotes"`
 * (the simulator has no votes: the same as all) or `{mentions: [pubkey]}`, as agave's
 * RpcTransactionLogsFilter.
 * @throws RpcError -32602 on a bad filter or commitment; "Invalid Request: Only 1 address
 *   supported" when `mentions` does not hold exactly one key, as agave.
 */
export function readLogsSubscribe(params: unknown): LogsParams {
  const list = paramList(params);
  const [filter, rawConfig] = list;
  readContext({ commitment: optionalConfig(rawConfig).commitment }, 0);
  if (filter === 'all' || filter === 'allWithVotes') return { mentions: undefined };
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw invalidParams(
      'Invalid params: unknown variant, expected one of `all`, `allWithVotes`, `mentions`.',
    );
  }
  const { mentions } = filter as Config;
  if (!Array.isArray(mentions)) throw invalidParams('Invalid params: mentions must be an array');
  if (mentions.length !== 1) {
    throw invalidParams('Invalid Request: Only 1 address supported');
  }
  return { mentions: new PublicKey(pubkeyParam(mentions[0])) };
}

/**
 * Validates the `[subscriptionId]` of accountUnsubscribe/programUnsubscribe/logsUnsubscribe.
 * @throws RpcError -32602 unless it is a non-negative integer.
 */
export function readSubscriptionId(params: unknown): number {
  const [id] = paramList(params);
  return readCount(id, 'subscription id');
}

// ---- params ----------------------------------------------------------------------------

type Config = Record<string, unknown>;

const COMMITMENTS = new Set([
  'processed',
  'confirmed',
  'finalized',
  'recent',
  'single',
  'singleGossip',
  'root',
  'max',
]);

function invalidParams(message: string): RpcError {
  return new RpcError(RpcErrorCode.invalidParams, message);
}

function pubkeyParam(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a pubkey string');
  if (!isBase58Pubkey(value)) throw invalidParams(`Invalid param: Invalid pubkey ${value}`);
  return value;
}

function optionalConfig(value: unknown): Config {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParams('Invalid params: expected a config object');
  }
  return value as Config;
}

function readBoolean(config: Config, key: string): boolean {
  const value = config[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw invalidParams(`Invalid params: ${key} must be a boolean`);
  return value;
}

function readCount(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalidParams(`Invalid params: ${what} must be a non-negative integer`);
  }
  return value;
}

/** Validates `commitment` and `minContextSlot`; returns the context JSON. */
function readContext(config: Config, slot: number): string {
  const { commitment, minContextSlot } = config;
  if (
    commitment !== undefined &&
    (typeof commitment !== 'string' || !COMMITMENTS.has(commitment))
  ) {
    throw invalidParams(`Invalid params: unknown commitment ${JSON.stringify(commitment)}`);
  }
  if (minContextSlot !== undefined && readCount(minContextSlot, 'minContextSlot') > slot) {
    throw new RpcError(
      RpcErrorCode.minContextSlotNotReached,
      'Minimum context slot has not been reached',
      { contextSlot: slot },
    );
  }
  return `{"apiVersion":"${SIM_SOLANA_VERSION}","slot":${slot}}`;
}

/**
 * `jsonParsed` falls back to base64, as the real RPC does for accounts it cannot parse.
 * `binary` (legacy) is accepted only where it is the default (pubsub).
 */
function readEncoding(config: Config, fallback: Encoding = 'base64'): Encoding {
  const { encoding } = config;
  if (encoding === undefined) return fallback;
  if (encoding === 'base64' || encoding === 'jsonParsed') return 'base64';
  if (encoding === 'base58') return 'base58';
  if (encoding === 'binary' && fallback === 'binary') return 'binary';
  const served =
    fallback === 'binary' ? 'base64, base58, binary, jsonParsed' : 'base64, base58, jsonParsed';
  throw invalidParams(
    `Invalid params: unsupported encoding ${JSON.stringify(encoding)} (simulator serves ${served})`,
  );
}

function readDataSlice(config: Config): DataSlice | undefined {
  const { dataSlice } = config;
  if (dataSlice === undefined || dataSlice === null) return undefined;
  if (typeof dataSlice !== 'object') throw invalidParams('Invalid params: bad dataSlice');
  const { offset, length } = dataSlice as Config;
  return {
    offset: readCount(offset, 'dataSlice.offset'),
    length: readCount(length, 'dataSlice.length'),
  };
}

function readFilters(config: Config): Filter[] {
  const { filters } = config;
  if (filters === undefined || filters === null) return [];
  if (!Array.isArray(filters)) throw invalidParams('Invalid params: filters must be an array');
  if (filters.length > MAX_FILTERS) {
    throw invalidParams(`Too many filters provided; max ${MAX_FILTERS}`);
  }
  return filters.map(readFilter);
}

function readFilter(filter: unknown): Filter {
  if (typeof filter !== 'object' || filter === null) {
    throw invalidParams('Invalid params: bad filter');
  }
  const { memcmp, dataSize } = filter as Config;
  if (dataSize !== undefined) {
    const size = readCount(dataSize, 'dataSize');
    return (data) => data.length === size;
  }
  if (typeof memcmp !== 'object' || memcmp === null) {
    throw invalidParams('Invalid params: unsupported filter (simulator serves memcmp, dataSize)');
  }
  const { offset: rawOffset, bytes: text, encoding } = memcmp as Config;
  const offset = readCount(rawOffset, 'memcmp.offset');
  if (typeof text !== 'string')
    throw invalidParams('Invalid params: memcmp.bytes must be a string');
  let bytes: Buffer | undefined;
  if (encoding === undefined || encoding === 'base58' || encoding === 'binary') {
    bytes = base58Decode(text);
    if (!bytes) throw invalidParams('Invalid param: invalid base58 in memcmp.bytes');
  } else if (encoding === 'base64') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
      throw invalidParams('Invalid param: invalid base64 in memcmp.bytes');
    }
    bytes = Buffer.from(text, 'base64');
  } else {
    throw invalidParams(`Invalid params: unknown memcmp encoding ${JSON.stringify(encoding)}`);
  }
  if (bytes.length > MAX_BASE58_BYTES) throw invalidParams('Invalid param: DataTooLarge');
  const needle = bytes;
  const end = offset + needle.length;
  return (data) => data.length >= end && data.compare(needle, 0, needle.length, offset, end) === 0;
}
