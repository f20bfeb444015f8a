/** The simulated RPC's parameter readers: JSON-RPC params checked as the real RPC checks them. */
import { PublicKey } from '@solana/web3.js';
import { base58Decode, isBase58Pubkey } from './base58.js';
import type { DataSlice, Encoding, Filter } from './account-json.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';
import { MAX_BASE58_BYTES, MAX_FILTERS, SIM_SOLANA_VERSION } from './limits.js';

/** The `params` of a request: an array, or none. */
export function paramList(params: unknown): unknown[] {
  if (params !== undefined && !Array.isArray(params)) {
    throw invalidParams('Invalid params: expected an array of parameters');
  }
  return (params as unknown[] | undefined) ?? [];
}

// ---- pubsub params ---------------------------------------------------------------------

/** Validated accountSubscribe/programSubscribe params. */
export interface SubscriptionParams {
  /** Account or program key, base58. */
  key: string;
  encoding: Encoding;
  dataSlice: DataSlice | undefined;
  /** programSubscribe only; all must pass. */
  filters: Filter[];
}

/**
 * accountSubscribe params, validated as the HTTP methods; default encoding `binary` and
 * `minContextSlot` ignored, as on agave.
 * @throws RpcError -32602 on bad params (`base64+zstd` included: no zstd here).
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
 * programSubscribe params, validated as getProgramAccounts; default encoding `binary`, as agave.
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

/** logsSubscribe: transactions mentioning `mentions`, or all (undefined). */
export interface LogsParams {
  mentions: PublicKey | undefined;
}

/**
 * logsSubscribe params as agave's RpcTransactionLogsFilter (`allWithVotes` = all: no votes here).
 * @throws RpcError -32602 on a bad filter or commitment, or `mentions` not holding one key.
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

/** The `[subscriptionId]` of an unsubscribe; -32602 unless a non-negative integer. */
export function readSubscriptionId(params: unknown): number {
  const [id] = paramList(params);
  return readCount(id, 'subscription id');
}

// ---- params ----------------------------------------------------------------------------

/** A request's configuration object. */
export type Config = Record<string, unknown>;

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

export function invalidParams(message: string): RpcError {
  return new RpcError(RpcErrorCode.invalidParams, message);
}

export function pubkeyParam(value: unknown): string {
  if (typeof value !== 'string') throw invalidParams('Invalid params: expected a pubkey string');
  if (!isBase58Pubkey(value)) throw invalidParams(`Invalid param: Invalid pubkey ${value}`);
  return value;
}

export function optionalConfig(value: unknown): Config {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParams('Invalid params: expected a config object');
  }
  return value as Config;
}

export function readBoolean(config: Config, key: string): boolean {
  const value = config[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw invalidParams(`Invalid params: ${key} must be a boolean`);
  return value;
}

export function readCount(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalidParams(`Invalid params: ${what} must be a non-negative integer`);
  }
  return value;
}

/**
 * `config.limit`, or `fallback` when absent or null.
 * @throws RpcError -32602 with `message` (each method words it as its node does) unless an
 *   integer from 1 to `max`.
 */
export function readLimit(config: Config, fallback: number, max: number, message: string): number {
  const limit = config.limit ?? fallback;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > max) {
    throw invalidParams(message);
  }
  return limit;
}

/** Validates `commitment` and `minContextSlot`; returns the context JSON. */
export function readContext(config: Config, slot: number): string {
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

/** `jsonParsed` falls back to base64; `binary` only where it is the default (pubsub). */
export function readEncoding(config: Config, fallback: Encoding = 'base64'): Encoding {
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

export function readDataSlice(config: Config): DataSlice | undefined {
  const { dataSlice } = config;
  if (dataSlice === undefined || dataSlice === null) return undefined;
  if (typeof dataSlice !== 'object') throw invalidParams('Invalid params: bad dataSlice');
  const { offset, length } = dataSlice as Config;
  return {
    offset: readCount(offset, 'dataSlice.offset'),
    length: readCount(length, 'dataSlice.length'),
  };
}

export function readFilters(config: Config): Filter[] {
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
  const test = (data: Buffer): boolean =>
    data.length >= end && data.compare(needle, 0, needle.length, offset, end) === 0;
  return Object.assign(test, { memcmp: { offset, bytes: needle } });
}
