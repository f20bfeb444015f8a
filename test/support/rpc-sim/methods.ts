/**
 * Solana JSON-RPC methods served by the simulator, answering from a `SimChain`. Results are
 * produced as JSON text (not objects) so account lists are built without intermediate objects
 * and `rentEpoch` can be written as the exact u64 the real RPC sends.
 */
import { base58Decode, base58Encode, isBase58Pubkey } from './base58.js';
import type { SimChain, StoredAccount } from './chain.js';

/** Version the simulator claims (`getVersion`, `context.apiVersion`). */
export const SIM_SOLANA_VERSION = '2.2.0';
/** Most filters a getProgramAccounts call may carry (as on the real RPC). */
export const MAX_FILTERS = 4;
/** Most pubkeys a getMultipleAccounts call may carry (as on the real RPC). */
export const MAX_MULTIPLE_ACCOUNTS = 100;
/** Largest memcmp filter, and largest data the base58 encoding may return, in bytes. */
export const MAX_BASE58_BYTES = 128;
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

type Handler = (chain: SimChain, params: unknown[], slot: number) => ResultJson;

const HANDLERS: Record<string, Handler> = {
  getProgramAccounts,
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

/** Names of the methods the simulator serves. */
export const SUPPORTED_METHODS: readonly string[] = Object.keys(HANDLERS);

/**
 * Runs one JSON-RPC method against the chain as of `slot`.
 * @param params the request's `params` (absent, or an array).
 * @returns the result as JSON text.
 * @throws RpcError -32601 for an unknown method, -32602 for bad params, -32016 when
 *   `minContextSlot` is ahead of `slot`.
 */
export function callMethod(
  chain: SimChain,
  method: string,
  params: unknown,
  slot: number,
): ResultJson {
  const handler = Object.hasOwn(HANDLERS, method) ? HANDLERS[method] : undefined;
  if (!handler) throw new RpcError(RpcErrorCode.methodNotFound, 'Method not found');
  if (params !== undefined && !Array.isArray(params)) {
    throw invalidParams('Invalid params: expected an array of parameters');
  }
  return handler(chain, (params as unknown[] | undefined) ?? [], slot);
}

// ---- methods ---------------------------------------------------------------------------

function getProgramAccounts(chain: SimChain, params: unknown[], slot: number): ResultJson {
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

function getMultipleAccounts(chain: SimChain, params: unknown[], slot: number): ResultJson {
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

function getAccountInfo(chain: SimChain, params: unknown[], slot: number): ResultJson {
  const key = pubkeyParam(params[0]);
  const config = optionalConfig(params[1]);
  const encoding = readEncoding(config);
  const dataSlice = readDataSlice(config);
  const context = readContext(config, slot);
  const account = chain.lookup(key);
  return `{"context":${context},"value":${account ? accountJson(account, encoding, dataSlice) : 'null'}}`;
}

/**
 * The simulator holds no SPL token state, so a mint is never found. The SDK's
 * `NameRegistryState.retrieve` (used by `reverseLookup`) calls this to check whether a name
 * is tokenized and treats -32602 as "not tokenized", which is what mainnet answers for a
 * mint that does not exist.
 */
function getTokenLargestAccounts(chain: SimChain, params: unknown[], slot: number): ResultJson {
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

type Encoding = 'base64' | 'base58';
interface DataSlice {
  offset: number;
  length: number;
}

function accountJson(
  account: StoredAccount,
  encoding: Encoding,
  slice: DataSlice | undefined,
): string {
  const { data } = account;
  let encoded: string;
  if (encoding === 'base58') {
    const bytes = slice ? data.subarray(slice.offset, slice.offset + slice.length) : data;
    if (bytes.length > MAX_BASE58_BYTES) {
      throw new RpcError(
        RpcErrorCode.invalidRequest,
        `Encoded binary (base 58) data should be less than ${MAX_BASE58_BYTES} bytes, please use Base64 encoding.`,
      );
    }
    encoded = base58Encode(bytes);
  } else if (slice) {
    const bytes = data.subarray(slice.offset, slice.offset + slice.length);
    encoded = bytes.length === 0 ? '' : bytes.toString('base64');
  } else {
    encoded = account.base64 ??= data.toString('base64');
  }
  return (
    `{"data":["${encoded}","${encoding}"],"executable":false,"lamports":${account.lamports},` +
    `"owner":"${account.ownerKey}","rentEpoch":${RENT_EPOCH_JSON},"space":${data.length}}`
  );
}

// ---- params ----------------------------------------------------------------------------

type Config = Record<string, unknown>;
type Filter = (data: Buffer) => boolean;

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

/** `jsonParsed` falls back to base64, as the real RPC does for accounts it cannot parse. */
function readEncoding(config: Config): Encoding {
  const { encoding } = config;
  if (encoding === undefined || encoding === 'base64' || encoding === 'jsonParsed') {
    return 'base64';
  }
  if (encoding === 'base58') return 'base58';
  throw invalidParams(
    `Invalid params: unsupported encoding ${JSON.stringify(encoding)} (simulator serves base64, base58, jsonParsed)`,
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
