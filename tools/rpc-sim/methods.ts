/**
 * The simulator's JSON-RPC methods. Results are JSON text, so account lists need no intermediate
 * objects and `rentEpoch` can be the exact u64 the real RPC sends.
 */
import { PublicKey } from '@solana/web3.js';
import { isBase58Pubkey } from './base58.js';
import type { SimChain } from './chain.js';
import type { ChainView, MemcmpHint, StoredAccount } from './chain-view.js';
import { getSignaturesForAddress, getTransaction } from './history-methods.js';
import type { TransactionView } from './history-methods.js';
import { accountJson, type Filter } from './account-json.js';
import {
  invalidParams,
  optionalConfig,
  paramList,
  pubkeyParam,
  readBoolean,
  readContext,
  readCount,
  readDataSlice,
  readEncoding,
  readFilters,
  readLimit,
} from './params.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';
import {
  DEFAULT_V2_LIMIT,
  MAX_MULTIPLE_ACCOUNTS,
  MAX_V2_LIMIT,
  SIM_SOLANA_VERSION,
} from './limits.js';

/** One call's result, as JSON text. */
export type ResultJson = string;

/** How the answering node differs from the chain now; every field optional. */
export interface NodeOptions {
  /** What reads see: default the chain now; a lagging node passes `chain.asOf(lag)`. */
  readonly view?: ChainView;
  /** Transaction methods see transactions at least this old (ms); default 0. */
  readonly txLagMs?: number;
  /** Methods answered as unknown ones, as a provider without them does. */
  readonly refused?: ReadonlySet<string>;
  /** A stingy provider's cap on getSignaturesForAddress's rows; default Infinity. */
  readonly signaturesPageCap?: number;
}

type Handler = (
  chain: ChainView,
  params: unknown[],
  slot: number,
  txs: TransactionView,
) => ResultJson;

const HANDLERS: Record<string, Handler> = {
  getProgramAccounts,
  getProgramAccountsV2,
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

/** Chain-changing methods for driving a simulator with curl; no real node has them. */
const SIM_HANDLERS: Record<string, (chain: SimChain, params: unknown[]) => ResultJson> = {
  simAddSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    const keys = chainCall(() => chain.addSubdomain(parent, label));
    // The README quotes this answer.
    return JSON.stringify({
      subdomain: keys.subKey.toBase58(),
      reverse: keys.reverseKey.toBase58(),
    });
  },
  simDeleteSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    const { via } = optionalConfig(params[2]);
    const opts = via === undefined ? {} : { via: new PublicKey(pubkeyParam(via)) };
    return String(chainCall(() => chain.deleteSubdomain(parent, label, opts)));
  },
  simTransferSubdomain: (chain, params) => {
    const [parent, label] = nameParams(params);
    const newOwner = pubkeyParam(params[2]);
    const keys = chainCall(() => chain.transferSubdomain(parent, label, new PublicKey(newOwner)));
    return JSON.stringify({ subdomain: keys.subKey.toBase58(), signature: keys.signature });
  },
};

/** The read methods served. */
export const SUPPORTED_METHODS: readonly string[] = Object.keys(HANDLERS);

/**
 * Simulator-only methods, writing now whatever the lag: `simAddSubdomain [parent, label]`,
 * `simDeleteSubdomain [parent, label, {via?}]`, `simTransferSubdomain [parent, label, newOwner]`
 * (the `SimChain` helpers of those names).
 */
export const SIM_ONLY_METHODS: readonly string[] = Object.keys(SIM_HANDLERS);

/**
 * Runs one method: reads against `node.view`, `sim*` against `chain`. Transaction methods see
 * transactions at least `node.txLagMs` old and no later than `slot`. Methods in `node.refused`
 * answer as unknown ones (most providers refuse `getProgramAccountsV2`).
 * @returns the result as JSON text.
 * @throws RpcError -32601 unknown or refused method, -32602 bad params, -32016 `minContextSlot`
 *   ahead.
 */
export function callMethod(
  chain: SimChain,
  method: string,
  params: unknown,
  slot: number,
  node: NodeOptions = {},
): ResultJson {
  const { view = chain, txLagMs = 0, refused = NONE_REFUSED } = node;
  if (refused.has(method)) throw new RpcError(RpcErrorCode.methodNotFound, 'Method not found');
  const handler = Object.hasOwn(HANDLERS, method) ? HANDLERS[method] : undefined;
  const simHandler = Object.hasOwn(SIM_HANDLERS, method) ? SIM_HANDLERS[method] : undefined;
  if (!handler && !simHandler) throw new RpcError(RpcErrorCode.methodNotFound, 'Method not found');
  const list = paramList(params);
  return handler
    ? handler(view, list, slot, {
        chain,
        cutoff: chain.nowMs() - txLagMs,
        signaturesPageCap: node.signaturesPageCap ?? Infinity,
      })
    : (simHandler as NonNullable<typeof simHandler>)(chain, list);
}

const NONE_REFUSED: ReadonlySet<string> = new Set();

function nameParams(params: unknown[]): [string, string] {
  const [parent, label] = params;
  if (typeof parent !== 'string' || typeof label !== 'string') {
    throw invalidParams('Invalid params: expected [parent, label] strings');
  }
  return [parent, label];
}

/** Chain helpers' name errors as -32602. */
function chainCall<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw invalidParams(`Invalid params: ${err instanceof Error ? err.message : String(err)}`);
  }
}

// ---- methods ---------------------------------------------------------------------------

/**
 * The parameters `getProgramAccounts` and `getProgramAccountsV2` share: `[program, {encoding,
 * dataSlice, filters, withContext, commitment, minContextSlot}]`, read at `slot`.
 * @throws RpcError -32602 on bad params.
 */
function programQuery(params: unknown[], slot: number) {
  const config = optionalConfig(params[1]);
  return {
    programKey: pubkeyParam(params[0]),
    config,
    encoding: readEncoding(config),
    dataSlice: readDataSlice(config),
    withContext: readBoolean(config, 'withContext'),
    filters: readFilters(config),
    context: readContext(config, slot),
  };
}

function getProgramAccounts(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const { programKey, encoding, dataSlice, withContext, filters, context } = programQuery(
    params,
    slot,
  );
  const parts: string[] = [];
  for (const account of chain.candidates(programKey, hintsOf(filters))) {
    if (!filters.every((filter) => filter(account.data))) continue;
    parts.push(
      `{"account":${accountJson(account, encoding, dataSlice)},"pubkey":"${account.key}"}`,
    );
  }
  const list = `[${parts.join(',')}]`;
  return withContext ? `{"context":${context},"value":${list}}` : list;
}

/**
 * getProgramAccountsV2 as Helius serves it: `[program, {encoding, filters, dataSlice, limit,
 * paginationKey, changedSinceSlot, withContext, commitment, minContextSlot}]`, answered as
 * `{accounts: [{pubkey, account}], paginationKey, totalResults, context?}`. Pages walk the
 * candidate accounts in the order of their base58 keys: each looks at `limit` of them after
 * `paginationKey` and returns those passing the filters (so a page may hold fewer than `limit`,
 * none included), with the last key looked at as the next `paginationKey`, or null once the walk
 * reached the end. `changedSinceSlot` keeps accounts written after that slot (deletions are not
 * reported). `totalResults` counts every account passing the filters.
 * @throws RpcError -32602 on bad params (`limit` outside 1..10,000 included).
 */
function getProgramAccountsV2(chain: ChainView, params: unknown[], slot: number): ResultJson {
  const { programKey, config, encoding, dataSlice, withContext, filters, context } = programQuery(
    params,
    slot,
  );
  const limit = readLimit(
    config,
    DEFAULT_V2_LIMIT,
    MAX_V2_LIMIT,
    `Invalid params: limit must be an integer from 1 to ${MAX_V2_LIMIT}`,
  );
  const after = config.paginationKey ?? undefined;
  if (after !== undefined && (typeof after !== 'string' || !isBase58Pubkey(after))) {
    throw invalidParams('Invalid params: paginationKey must be a key a previous page returned');
  }
  const since =
    config.changedSinceSlot == null
      ? undefined
      : readCount(config.changedSinceSlot, 'changedSinceSlot');
  const passes = (account: StoredAccount): boolean =>
    (since === undefined || account.slot > since) &&
    filters.every((filter) => filter(account.data));
  const rest: StoredAccount[] = [];
  let totalResults = 0;
  for (const account of chain.candidates(programKey, hintsOf(filters))) {
    if (passes(account)) totalResults++;
    if (after === undefined || account.key > after) rest.push(account);
  }
  rest.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const page = rest.slice(0, limit);
  const parts: string[] = [];
  for (const account of page) {
    if (!passes(account)) continue;
    parts.push(
      `{"account":${accountJson(account, encoding, dataSlice)},"pubkey":"${account.key}"}`,
    );
  }
  const next = rest.length > limit ? `"${page[page.length - 1]?.key ?? ''}"` : 'null';
  return (
    `{"accounts":[${parts.join(',')}],"paginationKey":${next},"totalResults":${totalResults}` +
    (withContext ? `,"context":${context}}` : '}')
  );
}

/** The memcmp filters' bytes, for `ChainView.candidates`. */
function hintsOf(filters: readonly Filter[]): MemcmpHint[] {
  return filters.flatMap((filter) => (filter.memcmp ? [filter.memcmp] : []));
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
 * No SPL token state: never a mint. The SDK's `reverseLookup` asks whether a name is tokenized
 * and reads -32602 as "no", which is what mainnet answers for a missing mint.
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
