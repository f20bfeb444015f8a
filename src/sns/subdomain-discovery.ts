import type { RpcClient } from '../rpc/client.js';
import { RpcCallError } from '../rpc/client.js';
import type { RpcEndpoint } from '../rpc/endpoint.js';
import {
  CLASS_OFFSET,
  decodeData,
  HEADER_LEN,
  reverseText,
  SLICE_LEN,
  type Classified,
} from './discovery-decode.js';
import { classifyInThread, closeDiscoveryThread, warmDiscoveryThread } from './discovery-runner.js';
import { domainKey, NAME_PROGRAM_ID, toBase58 } from './pda.js';

export { INLINE_TEXT_BYTES } from './discovery-decode.js';

const MULTIPLE_ACCOUNTS_BATCH = 100;

type MultipleAccountsReply = { value: Array<{ data: [string, string] | string } | null> };

export type Discovery = { labels: string[]; slot: number | undefined; accounts: number };

const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/** Ends what discovery keeps running between calls (its thread); the worker calls it on shutdown. */
export function closeDiscovery(): Promise<void> {
  return closeDiscoveryThread();
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
 * That reply runs to megabytes for a large parent, so it never touches this thread: its body moves
 * to the discovery thread (./discovery-runner.ts), which parses it, sorts the accounts and derives
 * every reverse key (./discovery-decode.ts), and sends back the labels and the few reverse texts
 * still to fetch. Failures are those of the in-process version, at the same points.
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
  warmDiscoveryThread(); // boots (first call only) while the RPC answers
  const found = await rpc.call<Classified<Error>>(
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
    {
      signal,
      decode: (body, { method, id }) => classifyInThread(method, body, id, parentKey, signal),
    },
  );
  if (found.kind === 'fails') throw found.error;
  const completed = await completeTruncated(rpc, endpoint, found.truncated, signal);
  if (found.kind === 'fails-after-truncated') throw found.error;

  const { labels, waiting, slot, accounts } = found.summary;
  const count = labels.length;
  for (const { reverse, children } of waiting) {
    const payload = completed.get(reverse);
    const label = payload && reverseText(payload);
    if (label) for (let i = 0; i < children.length; i++) labels.push(label);
  }
  if (labels.length > count) labels.sort();
  return { labels, slot, accounts };
}

/**
 * Fetches the full reverse text of records whose text did not fit the inline slice: by key, the
 * text bytes, or null for a record gone since the first call (so is its label).
 */
async function completeTruncated(
  rpc: RpcClient,
  endpoint: RpcEndpoint,
  keys: string[],
  signal?: AbortSignal,
): Promise<Map<string, Buffer | null>> {
  const completed = new Map<string, Buffer | null>();
  for (let start = 0; start < keys.length; start += MULTIPLE_ACCOUNTS_BATCH) {
    const batch = keys.slice(start, start + MULTIPLE_ACCOUNTS_BATCH);
    const reply = await rpc.call<MultipleAccountsReply>(
      endpoint,
      'getMultipleAccounts',
      [batch, { encoding: 'base64', dataSlice: { offset: HEADER_LEN, length: 2 ** 20 } }],
      { signal },
    );
    if (!Array.isArray(reply?.value) || reply.value.length !== batch.length) {
      throw new RpcCallError('getMultipleAccounts: wrong account list', 'http_error', true);
    }
    reply.value.forEach((account, i) => {
      completed.set(batch[i] as string, account === null ? null : decodeData(account.data));
    });
  }
  return completed;
}
