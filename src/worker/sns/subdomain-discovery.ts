import type { ReplyDecoder, RpcClient } from '../rpc/client.js';
import { malformed } from '../rpc/envelope.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import { INLINE_TEXT_BYTES, reverseTextSlice, SCAN_SLICE } from './discovery-decode.js';
import type { Member } from '../../core/cache/subdomain-cache.js';
import { DecodeThread } from './decode-thread.js';
import { domainKey, NAME_PROGRAM_ID, toBase58 } from '../../core/sns/pda.js';

export { INLINE_TEXT_BYTES } from './discovery-decode.js';

/** Most keys one `getMultipleAccounts` takes (the RPC's limit). */
export const MULTIPLE_ACCOUNTS_BATCH = 100;

export type Discovery = {
  /** The labels, sorted (as the contract's answer lists them). */
  labels: string[];
  /** Subdomain name account (base58) -> its label and owner, for every label. */
  members: Record<string, Member>;
  slot: number | undefined;
  /** How many accounts the scan returned (subdomains, reverse records and others). */
  accounts: number;
};

const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/**
 * What discovery runs through for one class of endpoint (the configured one, or `?rpc=`
 * overrides): its RPC client, its decode thread, and the bounds of its answers. The worker
 * runtime makes one per class, so the two never share a thread, a queue slot or a budget.
 */
export type DiscoveryLane = {
  readonly rpc: RpcClient;
  readonly thread: DecodeThread;
  /** Longest label (reverse text) accepted, in UTF-8 bytes; a longer one fails the answer. */
  readonly maxLabelBytes: number;
  /** Most UTF-8 bytes of labels in one answer; past it the answer fails. */
  readonly maxAnswerBytes: number;
  /**
   * Longest one refresh may take from when it was queued, follow-up calls included, in
   * milliseconds (none when absent). For overrides: a server can answer each call just in time,
   * over many calls, and a refresh nobody waits for any more only holds a slot.
   */
  readonly refreshMs?: number;
};

/**
 * Lists the subdomain labels of a top-level `.sol` parent with the SDK's semantics
 * (`findSubdomains` of @bonfida/spl-name-service 3.x): an account under the parent counts when its
 * reverse record exists, and its label is the reverse text (empty ones dropped). Labels come back
 * sorted. One `getProgramAccounts` with a `dataSlice` does what the SDK does in two; every reply is
 * parsed in the lane's decode thread (./discovery-decode.ts), and the reverse texts still to fetch
 * are read at the scan's slot or later. docs/design.md, "Discovery".
 *
 * @param minContextSlot the slot the scan must reflect at least (a notification's, when one
 *   caused the refresh): a node behind it answers -32016, retried with back-off.
 * @throws RpcCallError when the RPC fails or answers with something that is not the account data
 *   asked for (not retried then), or the answer is past the lane's bounds.
 */
export async function discoverSubdomains(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  parent: string,
  signal?: AbortSignal,
  minContextSlot?: number,
): Promise<Discovery> {
  const { rpc, thread } = lane;
  const parentKey = domainKey(parent);
  thread.warm(); // boots (first call only) while the RPC answers
  const found = await rpc.call(
    endpoint,
    'getProgramAccounts',
    [
      NAME_PROGRAM,
      {
        encoding: 'base64',
        // As the subscriptions (../../worker/freshness): a notification's slot is a confirmed
        // slot, and a finalized read would stay behind it for about 32 slots.
        commitment: 'confirmed',
        withContext: true,
        ...(minContextSlot === undefined ? {} : { minContextSlot }),
        filters: [{ memcmp: { offset: 0, bytes: toBase58(parentKey) } }],
        dataSlice: SCAN_SLICE,
      },
    ],
    {
      signal,
      decode: (body, { method, id }) =>
        thread.run(
          {
            kind: 'program-accounts',
            method,
            id,
            body: DecodeThread.transferable(body),
            parentKey: new Uint8Array(parentKey),
          },
          signal,
        ),
    },
  );
  const { labels, children, owners, waiting, truncated, slot, accounts } = found;
  // Every label still to complete is longer than the inline text: when they cannot fit the
  // answer, say so now rather than after a follow-up call per 100 of them.
  let pending = 0;
  for (const { children } of waiting) pending += children.length;
  checkAnswerBounds(lane, labels, pending * (INLINE_TEXT_BYTES + 3));
  const completed = await completeTruncated(lane, endpoint, truncated, slot, signal);
  const members: Record<string, Member> = {};
  for (let i = 0; i < labels.length; i++) {
    members[children[i] as string] = [labels[i] as string, owners[i] as string];
  }
  const count = labels.length;
  for (const { reverse, children: waitingChildren, owners: waitingOwners } of waiting) {
    const label = completed.get(reverse);
    if (!label) continue;
    waitingChildren.forEach((child, i) => {
      labels.push(label);
      members[child] = [label, waitingOwners[i] as string];
    });
  }
  if (labels.length > count) labels.sort();
  checkAnswerBounds(lane, labels);
  return { labels, members, slot, accounts };
}

/**
 * @param more bytes of labels known to come on top of `labels`.
 * @throws RpcCallError (malformed, not retried) for a label or an answer past the lane's bounds:
 *   an upstream can make a label as long as it likes, and every hit would carry it.
 */
function checkAnswerBounds(lane: DiscoveryLane, labels: readonly string[], more = 0): void {
  const over = () => malformed(`an answer over ${lane.maxAnswerBytes} bytes`);
  let bytes = more;
  if (bytes > lane.maxAnswerBytes) throw over();
  for (const label of labels) {
    const size = Buffer.byteLength(label);
    if (size > lane.maxLabelBytes) throw malformed(`a label over ${lane.maxLabelBytes} bytes`);
    bytes += size + 3;
    if (bytes > lane.maxAnswerBytes) throw over();
  }
}

/**
 * Fetches the full reverse text of records whose text did not fit the inline slice, at the slot
 * of the scan or later (`minContextSlot`): by key, the text, or null for a record gone since.
 */
async function completeTruncated(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  keys: string[],
  slot: number | undefined,
  signal?: AbortSignal,
): Promise<Map<string, string | null>> {
  const completed = new Map<string, string | null>();
  const maxTextBytes = lane.maxLabelBytes + 1; // the leading NUL of a subdomain's text
  const batches = await accountsInBatches(lane, endpoint, keys, {
    dataSlice: reverseTextSlice(maxTextBytes),
    minContextSlot: slot,
    signal,
    decode:
      (count) =>
      (body, { method, id }) =>
        lane.thread.run(
          {
            kind: 'reverse-texts',
            method,
            id,
            body: DecodeThread.transferable(body),
            count,
            maxTextBytes,
          },
          signal,
        ),
  });
  for (const { batch, result } of batches) {
    result.forEach((text, i) => completed.set(batch[i] as string, text));
  }
  return completed;
}

/**
 * `getMultipleAccounts` over `keys`, {@link MULTIPLE_ACCOUNTS_BATCH} a call, at `confirmed`, sliced
 * by `dataSlice`, at `minContextSlot` or later, each reply decoded by `decode(count)` (a decoder of
 * the lane's thread for a reply of `count` accounts). Calls go one after another.
 *
 * @returns each batch of keys with what its reply decoded to, in the order of `keys`.
 * @throws RpcCallError when a call fails (the client's retries spent).
 */
export async function accountsInBatches<T>(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  keys: readonly string[],
  opts: {
    dataSlice: { offset: number; length: number };
    minContextSlot?: number;
    signal?: AbortSignal;
    decode: (count: number) => ReplyDecoder<T>;
  },
): Promise<Array<{ batch: string[]; result: T }>> {
  const out: Array<{ batch: string[]; result: T }> = [];
  for (let start = 0; start < keys.length; start += MULTIPLE_ACCOUNTS_BATCH) {
    const batch = keys.slice(start, start + MULTIPLE_ACCOUNTS_BATCH);
    const result = await lane.rpc.call(
      endpoint,
      'getMultipleAccounts',
      [
        batch,
        {
          encoding: 'base64',
          commitment: 'confirmed',
          dataSlice: opts.dataSlice,
          ...(opts.minContextSlot === undefined ? {} : { minContextSlot: opts.minContextSlot }),
        },
      ],
      { signal: opts.signal, decode: opts.decode(batch.length) },
    );
    out.push({ batch, result });
  }
  return out;
}
