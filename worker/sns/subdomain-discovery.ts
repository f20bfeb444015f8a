import type { ReplyDecoder, RpcClient } from '../rpc/client.js';
import { malformed } from '../rpc/envelope.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import {
  INLINE_TEXT_BYTES,
  reverseTextSlice,
  SCAN_SLICE,
  type ListedPart,
  type ProgramAccountsSummary,
} from './discovery-decode.js';
import type { Member } from '../../src/core/cache/subdomain-cache.js';
import { DecodeThread } from './decode-thread.js';
import { domainKey, NAME_PROGRAM_ID, toBase58 } from '../../src/core/sns/pda.js';

export { INLINE_TEXT_BYTES } from './discovery-decode.js';

/** The RPC's limit of keys per `getMultipleAccounts`. */
export const MULTIPLE_ACCOUNTS_BATCH = 100;

/** What discovery found under a parent. */
export type Discovery = {
  /** Sorted, as the contract lists them. */
  labels: string[];
  /** Subdomain account (base58) -> label and owner. */
  members: Record<string, Member>;
  /** Subdomain account (base58) -> its reverse record (base58), for each of `members`. */
  reverses: Map<string, string>;
  slot: number | undefined;
  /** Accounts the scan returned (all kinds). */
  accounts: number;
};

const NAME_PROGRAM = toBase58(NAME_PROGRAM_ID);

/**
 * RPC client, decode thread and bounds of one endpoint class (configured or `?rpc=`): one each,
 * so the two never share a thread, a slot or a budget.
 */
export type DiscoveryLane = {
  readonly rpc: RpcClient;
  readonly thread: DecodeThread;
  /** Longest label, UTF-8 bytes; a longer one fails the answer. */
  readonly maxLabelBytes: number;
  /** Most label bytes in one answer. */
  readonly maxAnswerBytes: number;
  /**
   * Ms one refresh may take from queueing, follow-ups included. For overrides: a server answering
   * each call just in time would otherwise hold a slot nobody waits on.
   */
  readonly refreshMs?: number;
};

/**
 * Sorted subdomain labels of a `.sol` parent with the SDK's `findSubdomains` semantics (reverse
 * record must exist; empty texts dropped), in one sliced `getProgramAccounts` where the SDK makes
 * two (docs/design.md, "Discovery").
 *
 * @param minContextSlot a notification's slot: a node behind it answers -32016 (retried).
 * @throws RpcCallError when the RPC fails, answers the wrong data (final), or breaks the bounds.
 */
export async function discoverSubdomains(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  parent: string,
  signal?: AbortSignal,
  minContextSlot?: number,
): Promise<Discovery> {
  return discoverUnder(lane, endpoint, domainKey(parent), signal, minContextSlot);
}

/**
 * {@link discoverSubdomains} of the parent whose name account is `parentKey` (32 bytes): the
 * registry audit knows parents by key, not name.
 *
 * @throws RpcCallError as {@link discoverSubdomains}.
 */
export async function discoverUnder(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  parentKey: Buffer,
  signal?: AbortSignal,
  minContextSlot?: number,
): Promise<Discovery> {
  const found = await scanUnder(lane, endpoint, parentKey, signal, minContextSlot);
  const {
    labels,
    children,
    owners,
    reverses: reverseList,
    waiting,
    truncated,
    slot,
    accounts,
  } = found;
  // Labels still to complete are longer than the inline text: fail now if they cannot fit.
  checkAnswerBounds(lane, labels, pendingBytes(waiting));
  const completed = await completeTruncated(lane, endpoint, truncated, slot, signal);
  const members: Record<string, Member> = {};
  const reverses = new Map<string, string>();
  for (let i = 0; i < labels.length; i++) {
    members[children[i] as string] = [labels[i] as string, owners[i] as string];
    reverses.set(children[i] as string, reverseList[i] as string);
  }
  const count = labels.length;
  for (const { reverse, children: waitingChildren, owners: waitingOwners } of waiting) {
    const label = completed.get(reverse);
    if (!label) continue;
    waitingChildren.forEach((child, i) => {
      labels.push(label);
      members[child] = [label, waitingOwners[i] as string];
      reverses.set(child, reverse);
    });
  }
  if (labels.length > count) labels.sort();
  checkAnswerBounds(lane, labels);
  return { labels, members, reverses, slot, accounts };
}

/** The scan's call, decoded in the lane's thread; with `stream`, its members in parts. */
export async function scanUnder(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  parentKey: Buffer,
  signal?: AbortSignal,
  minContextSlot?: number,
  stream?: {
    partMembers: number;
    firstPartMembers?: number;
    /** A request waits on the scan: a large one lists its labels ({@link ProgramAccountsSummary.answer}). */
    answer?: boolean;
    onPart: (part: ListedPart) => void;
  },
): Promise<ProgramAccountsSummary> {
  const { rpc, thread } = lane;
  thread.warm(); // boots (first call only) while the RPC answers
  return rpc.call(endpoint, 'getProgramAccounts', scanParams(parentKey, minContextSlot), {
    signal,
    decode: (body, { method, id }) =>
      thread.run(
        {
          kind: 'program-accounts',
          method,
          id,
          body: DecodeThread.transferable(body),
          parentKey: new Uint8Array(parentKey),
          ...(stream
            ? {
                partMembers: stream.partMembers,
                cutBatch: MULTIPLE_ACCOUNTS_BATCH,
                ...(stream.answer === true ? { answer: true } : {}),
                ...(stream.firstPartMembers === undefined
                  ? {}
                  : { firstPartMembers: stream.firstPartMembers }),
              }
            : {}),
        },
        signal,
        stream?.onPart,
      ),
  });
}

/**
 * The params of a scan's `getProgramAccounts` for the parent whose name account is `parentKey`:
 * its accounts (`memcmp` on the parent), each cut to {@link SCAN_SLICE}, with the reply's slot.
 */
export function scanParams(parentKey: Uint8Array, minContextSlot?: number): unknown[] {
  return [
    NAME_PROGRAM,
    {
      encoding: 'base64',
      // As the subscriptions: a notification's slot is confirmed; finalized would lag ~32 slots.
      commitment: 'confirmed',
      withContext: true,
      ...(minContextSlot === undefined ? {} : { minContextSlot }),
      filters: [{ memcmp: { offset: 0, bytes: toBase58(parentKey) } }],
      dataSlice: SCAN_SLICE,
    },
  ];
}

/** Label bytes the subdomains waiting for cut texts will bring at least. */
export function pendingBytes(waiting: ProgramAccountsSummary['waiting']): number {
  let pending = 0;
  for (const { children } of waiting) pending += children.length;
  return pending * (INLINE_TEXT_BYTES + 3);
}

/**
 * @param more label bytes known to come on top.
 * @throws RpcCallError (final) past the lane's bounds: every hit would carry an endless label.
 */
function checkAnswerBounds(lane: DiscoveryLane, labels: readonly string[], more = 0): void {
  const bounds = new AnswerBounds(lane);
  bounds.within(more);
  for (const label of labels) bounds.label(label, more);
}

/** The lane's bounds on one label and on a whole answer, its labels counted as they come. */
export class AnswerBounds {
  /** Bytes of the answer so far (each label and 3 for its quotes and comma). */
  private bytes = 0;

  constructor(private readonly lane: DiscoveryLane) {}

  /**
   * Counts one label.
   * @param more label bytes known to come on top.
   * @throws RpcCallError (final) for a label past its bound, or an answer past its own.
   */
  label(label: string, more = 0): void {
    const size = Buffer.byteLength(label);
    if (size > this.lane.maxLabelBytes) {
      throw malformed(`a label over ${this.lane.maxLabelBytes} bytes`);
    }
    this.bytes += size + 3;
    this.within(more);
  }

  /**
   * Counts labels already sized ({@link ListedPart}): `answerBytes` their bytes with 3 each,
   * `longest` the longest one's bytes.
   * @throws RpcCallError (final) as {@link label}.
   */
  sized(answerBytes: number, longest: number): void {
    if (longest > this.lane.maxLabelBytes) {
      throw malformed(`a label over ${this.lane.maxLabelBytes} bytes`);
    }
    this.bytes += answerBytes;
    this.within();
  }

  /** @throws RpcCallError (final) when the labels counted and `more` bytes pass the answer bound. */
  within(more = 0): void {
    if (this.bytes + more > this.lane.maxAnswerBytes) {
      throw malformed(`an answer over ${this.lane.maxAnswerBytes} bytes`);
    }
  }
}

/** Full texts of cut reverse records at the scan's slot or later; null for one gone since. */
export async function completeTruncated(
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
 * `getMultipleAccounts` over `keys` in sequential batches, `confirmed`, at `minContextSlot` or
 * later, each reply through `decode(count)`.
 *
 * @returns each batch with its decoded reply, in order.
 * @throws RpcCallError when a call fails.
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
