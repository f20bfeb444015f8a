import type { SlotClock } from '../../src/core/rpc/slot.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import type { ReplyDecoder } from '../rpc/client.js';
import { malformed } from '../rpc/envelope.js';
import { HEADER_LEN } from '../sns/discovery-decode.js';
import { accountsInBatches, type DiscoveryLane } from '../sns/subdomain-discovery.js';
import type { FollowRpc } from './rpc.js';
import { HEAD_SLICE, headOf, NAME_PROGRAM } from './name-program.js';

/**
 * {@link FollowRpc} over the configured endpoint's lane: every call goes through its client
 * (retries, time-outs, each call counted in `sns_rpc_credits_total` by `RPC_CREDITS`) and its
 * decode thread (no reply parsed on the main thread). Reply slots are observed by the worker's
 * slot clock, as the refreshes' are.
 */
export function laneRpc(lane: DiscoveryLane, endpoint: RpcEndpoint, slots: SlotClock): FollowRpc {
  const envelope = <T>() => lane.thread.envelope<T>();
  return {
    async slot() {
      const slot = await lane.rpc.call<unknown>(
        endpoint,
        'getSlot',
        [{ commitment: 'confirmed' }],
        { decode: envelope() },
      );
      slots.observe(slot);
    },
    async transaction(signature) {
      return lane.rpc.call<unknown>(
        endpoint,
        'getTransaction',
        [
          signature,
          { encoding: 'json', maxSupportedTransactionVersion: 0, commitment: 'confirmed' },
        ],
        { decode: envelope() },
      );
    },
    async signatures({ until, before, limit, minContextSlot }) {
      const result = await lane.rpc.call<unknown>(
        endpoint,
        'getSignaturesForAddress',
        [
          NAME_PROGRAM,
          {
            limit,
            commitment: 'confirmed',
            ...(until ? { until } : {}),
            ...(before ? { before } : {}),
            ...(minContextSlot === undefined ? {} : { minContextSlot }),
          },
        ],
        { decode: envelope() },
      );
      if (!Array.isArray(result)) return [];
      const out: Array<{ signature: string; slot: number; failed: boolean }> = [];
      for (const item of result as Array<{ signature?: unknown; slot?: unknown; err?: unknown }>) {
        if (typeof item?.signature !== 'string' || !isSlot(item.slot)) continue;
        out.push({ signature: item.signature, slot: item.slot, failed: item.err != null });
      }
      return out;
    },
    async accounts(keys, opts) {
      const whole = opts?.whole === true;
      const batches = await accountsInBatches(lane, endpoint, keys, {
        dataSlice: whole ? wholeRecordSlice(lane) : HEAD_SLICE,
        minContextSlot: opts?.minContextSlot,
        decode: headLists(lane, whole),
      });
      let slot: number | undefined;
      let unknown = false;
      const accounts: Array<HeadAccount | null> = [];
      for (const { result } of batches) {
        const verdict = slots.observe(result.slot);
        if (verdict !== 'trusted' || !isSlot(result.slot)) unknown = true;
        else slot = Math.min(slot ?? Infinity, result.slot);
        accounts.push(...result.accounts);
      }
      return { slot: unknown ? undefined : slot, accounts };
    },
  };
}

/**
 * The `dataSlice` of a reverse record read whole, from byte 0 (its parent, which the reader checks)
 * through the longest text the lane takes: the header, the text's length, a subdomain's leading
 * NUL and `maxLabelBytes` of label. What the follower and the registry read a cut text again with.
 */
export const wholeRecordSlice = (lane: Pick<DiscoveryLane, 'maxLabelBytes'>) => ({
  offset: 0,
  length: HEADER_LEN + 4 + 1 + lane.maxLabelBytes,
});

/** An account as {@link headList} reads it: the program that owns it, and its head (or whole data). */
export type HeadAccount = { owner: string; head: Buffer };

/**
 * The decoder of a `getMultipleAccounts` batch of `count` keys through the lane's decode thread,
 * then {@link headList}: what `accountsInBatches` takes as `decode`.
 */
export const headLists =
  (lane: DiscoveryLane, whole = false) =>
  (count: number): ReplyDecoder<{ slot: unknown; accounts: Array<HeadAccount | null> }> =>
  async (body, context) =>
    headList(context.method, await lane.thread.envelope<unknown>()(body, context), count, whole);

/**
 * A head-sliced `getMultipleAccounts` result checked: its slot as sent, and one entry per key,
 * null for a key without an account. Only a null entry in a list of the right length says an
 * account is gone: a reply without a list, a list of another length, or an entry that is not an
 * account proves nothing, and is refused as a whole rather than read as "gone". With `whole`, each
 * account's data is kept as read rather than cut to the head.
 *
 * @throws RpcCallError (final) for a reply of another shape.
 */
function headList(
  method: string,
  result: unknown,
  count: number,
  whole = false,
): { slot: unknown; accounts: Array<HeadAccount | null> } {
  const reply = result as { context?: { slot?: unknown }; value?: unknown } | null;
  const list = reply?.value;
  if (!Array.isArray(list) || list.length !== count) {
    throw malformed(`${method}: wrong account list`);
  }
  const accounts = list.map((entry: unknown) => {
    if (entry === null) return null;
    const { owner, data } = (entry ?? {}) as { owner?: unknown; data?: unknown };
    const text: unknown = Array.isArray(data) ? data[0] : undefined;
    if (typeof owner !== 'string' || typeof text !== 'string') {
      throw malformed(`${method}: an account entry is not an account`);
    }
    return { owner, head: whole ? Buffer.from(text, 'base64') : headOf(text) };
  });
  return { slot: reply?.context?.slot, accounts };
}
