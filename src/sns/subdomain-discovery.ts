import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { RpcClient } from '../rpc/client.js';
import { RpcCallError } from '../rpc/client.js';
import type { RpcEndpoint } from '../rpc/endpoint.js';
import {
  domainKey,
  NAME_PROGRAM_ID,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  toBase58,
} from './pda.js';

/**
 * Name-account layout (SPL Name Service): a 96-byte header `parent(32) | owner(32) | class(32)`,
 * then the data. A reverse record's data is `u32 LE length | UTF-8 bytes` (the SDK's
 * `deserializeReverse`); a subdomain's reverse text starts with a NUL byte.
 */
const CLASS_OFFSET = 64;
const HEADER_LEN = 96;
/**
 * Reverse-text bytes fetched inline with the single `getProgramAccounts` call. Every account under
 * the parent returns this slice, so it is kept small; longer reverse texts (rare) are completed
 * with one `getMultipleAccounts` call per 100 accounts. 30 makes the slice 66 bytes, a multiple of
 * 3, so its base64 carries no padding: the same 88 characters per account as 28 bytes would take,
 * with two more bytes of text. Measured on a 10,000-subdomain parent (BENCHMARKS.md): 6.2 MB per
 * refresh against the SDK's 8.4 MB, and sizes from 20 to 32 within 1% of each other in bytes.
 */
export const INLINE_TEXT_BYTES = 30;
const SLICE_LEN = 32 + 4 + INLINE_TEXT_BYTES;
const MULTIPLE_ACCOUNTS_BATCH = 100;
/** Derivations between two yields to the event loop, so lock renewals and scrapes keep running. */
const DERIVATIONS_PER_TICK = 256;
/** Accounts sorted between two yields (a cheap step: base64 prefix test, a decode for reverses). */
const ACCOUNTS_PER_TICK = 2048;
/**
 * The base64 text of the reverse-lookup class's first 30 bytes (40 characters, no padding): every
 * slice of a reverse record starts with it, so other accounts are skipped without decoding.
 */
const REVERSE_CLASS_B64_PREFIX = REVERSE_LOOKUP_CLASS.subarray(0, 30).toString('base64');

type EncodedAccount = { pubkey: string; account: { data: [string, string] | string } };
type ProgramAccountsReply =
  EncodedAccount[] | { context?: { slot?: number }; value: EncodedAccount[] };
type MultipleAccountsReply = { value: Array<{ data: [string, string] | string } | null> };

export type Discovery = { labels: string[]; slot: number | undefined; accounts: number };

const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

function decodeData(data: [string, string] | string): Buffer {
  if (typeof data === 'string' || data[1] !== 'base64') {
    throw new RpcCallError('account data is not base64', 'http_error', false);
  }
  return Buffer.from(data[0], 'base64');
}

/** The SDK's `deserializeReverse(data, true)`: the text, minus one leading NUL. */
function reverseText(payload: Buffer): string | undefined {
  if (payload.length < 4) return undefined;
  const len = payload.readUInt32LE(0);
  return payload
    .subarray(4, 4 + len)
    .toString('utf8')
    .replace(/^\0/, '');
}

/**
 * Lists the subdomain labels of a top-level `.sol` parent, with the SDK's semantics
 * (`findSubdomains` of @bonfida/spl-name-service 3.x, utils/findSubdomains): every account whose
 * parent is the parent's name account counts when a reverse record exists at
 * `getReverseKeyFromDomainKey(account, parent)` with that parent and the reverse-lookup class; its
 * label is the reverse text. Empty texts are dropped, as the SDK drops them. Labels come back
 * sorted (DESIGN.md: stable answers).
 *
 * The keys come from ./pda.ts (`domainKey`, `reverseKeyFromDomainKey`): bit-identical to the
 * SDK's `getDomainKeySync` and `getReverseKeyFromDomainKey` (test/pda.test.ts), and far faster
 * (BENCHMARKS.md). A reverse key is derived from the base58 text the RPC returns (canonical, as
 * the SDK's `toBase58()` writes it), without decoding it.
 *
 * Where the SDK makes two `getProgramAccounts` calls (reverse records in full, then every child
 * with no data), this makes one: `memcmp` on the parent, and a `dataSlice` over the class and the
 * start of the reverse text, so one round trip tells reverse records from subdomains.
 *
 * @throws RpcCallError when the RPC fails or answers with something that is not account data.
 */
export async function discoverSubdomains(
  rpc: RpcClient,
  endpoint: RpcEndpoint,
  parent: string,
  signal?: AbortSignal,
): Promise<Discovery> {
  const parentKey = domainKey(parent);
  const reply = await rpc.call<ProgramAccountsReply>(
    endpoint,
    'getProgramAccounts',
    [
      NAME_PROGRAM,
      {
        encoding: 'base64',
        withContext: true,
        filters: [{ memcmp: { offset: 0, bytes: toBase58(parentKey) } }],
        dataSlice: { offset: CLASS_OFFSET, length: SLICE_LEN },
      },
    ],
    signal,
  );
  const accounts = Array.isArray(reply) ? reply : reply?.value;
  if (!Array.isArray(accounts))
    throw new RpcCallError('getProgramAccounts: no account list', 'http_error', true);
  const slot = Array.isArray(reply) ? undefined : reply.context?.slot;

  // Reverse records under this parent, by key: the text bytes fetched so far.
  const reverses = new Map<string, Buffer>();
  const truncated: string[] = [];
  for (let i = 0; i < accounts.length; i++) {
    if (i > 0 && i % ACCOUNTS_PER_TICK === 0) await yieldToLoop(undefined, { signal });
    const { pubkey, account } = accounts[i] as EncodedAccount;
    const data = account.data;
    if (
      Array.isArray(data) &&
      data[1] === 'base64' &&
      !data[0].startsWith(REVERSE_CLASS_B64_PREFIX)
    )
      continue;
    const slice = decodeData(data);
    if (slice.length < 32 || !slice.subarray(0, 32).equals(REVERSE_LOOKUP_CLASS)) continue;
    const payload = slice.subarray(32);
    reverses.set(pubkey, payload);
    if (slice.length === SLICE_LEN && payload.readUInt32LE(0) > INLINE_TEXT_BYTES)
      truncated.push(pubkey);
  }
  await completeTruncated(rpc, endpoint, truncated, reverses, signal);

  const labels: string[] = [];
  for (let i = 0; i < accounts.length; i++) {
    if (i > 0 && i % DERIVATIONS_PER_TICK === 0) await yieldToLoop(undefined, { signal });
    const child = (accounts[i] as EncodedAccount).pubkey;
    if (typeof child !== 'string')
      throw new RpcCallError('getProgramAccounts: account without a pubkey', 'http_error', true);
    const payload = reverses.get(toBase58(reverseKeyFromDomainKey(child, parentKey)));
    const label = payload && reverseText(payload);
    if (label) labels.push(label);
  }
  labels.sort();
  return { labels, slot: typeof slot === 'number' ? slot : undefined, accounts: accounts.length };
}

/** Fetches the full reverse text of records whose text did not fit the inline slice. */
async function completeTruncated(
  rpc: RpcClient,
  endpoint: RpcEndpoint,
  keys: string[],
  reverses: Map<string, Buffer>,
  signal?: AbortSignal,
): Promise<void> {
  for (let start = 0; start < keys.length; start += MULTIPLE_ACCOUNTS_BATCH) {
    const batch = keys.slice(start, start + MULTIPLE_ACCOUNTS_BATCH);
    const reply = await rpc.call<MultipleAccountsReply>(
      endpoint,
      'getMultipleAccounts',
      [batch, { encoding: 'base64', dataSlice: { offset: HEADER_LEN, length: 2 ** 20 } }],
      signal,
    );
    if (!Array.isArray(reply?.value) || reply.value.length !== batch.length) {
      throw new RpcCallError('getMultipleAccounts: wrong account list', 'http_error', true);
    }
    reply.value.forEach((account, i) => {
      const key = batch[i] as string;
      // Gone since the first call: the record no longer exists, so neither does the label.
      if (account === null) reverses.delete(key);
      else reverses.set(key, decodeData(account.data));
    });
  }
}
