import type { SlotClock } from '../../src/core/rpc/slot.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import { DecodeThread } from '../sns/decode-thread.js';
import { accountsInBatches, type DiscoveryLane } from '../sns/subdomain-discovery.js';
import type { FollowRpc } from './rpc.js';
import { HEAD_SLICE, headOf, NAME_PROGRAM } from './stream.js';

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
    async accounts(keys) {
      type Reply = {
        context?: { slot?: unknown };
        value?: Array<{ owner?: unknown; data?: unknown } | null>;
      };
      const batches = await accountsInBatches<Reply>(lane, endpoint, keys, {
        dataSlice: HEAD_SLICE,
        decode: () => envelope<Reply>(),
      });
      let slot: number | undefined;
      let unknown = false;
      const accounts: Array<{ owner: string; head: Buffer } | null> = [];
      for (const { batch, result } of batches) {
        const verdict = slots.observe(result.context?.slot);
        if (verdict !== 'trusted') unknown = true;
        else slot = Math.min(slot ?? Infinity, result.context?.slot as number);
        batch.forEach((_key, i) => {
          const entry = result.value?.[i];
          const data = (entry?.data as unknown[] | undefined)?.[0];
          if (!entry || typeof entry.owner !== 'string' || typeof data !== 'string') {
            accounts.push(null);
            return;
          }
          accounts.push({
            owner: entry.owner,
            head: headOf(data),
          });
        });
      }
      return { slot: unknown ? undefined : slot, accounts };
    },
    async existence(keys, minContextSlot) {
      const exists = new Map<string, boolean>();
      let slot: number | undefined;
      let unknown = false;
      const batches = await accountsInBatches(lane, endpoint, keys, {
        dataSlice: { offset: 0, length: 0 },
        minContextSlot,
        decode:
          (count) =>
          (body, { method, id }) =>
            lane.thread.run({
              kind: 'existence',
              method,
              id,
              body: DecodeThread.transferable(body),
              count,
            }),
      });
      for (const { batch, result } of batches) {
        batch.forEach((key, i) => exists.set(key, result.exists[i] === true));
        // A slot not believed raises nothing: the check says what exists, not since when.
        if (slots.observe(result.slot) !== 'trusted' || result.slot === undefined) unknown = true;
        else slot = Math.min(slot ?? result.slot, result.slot);
      }
      return { exists, slot: unknown ? undefined : slot };
    },
  };
}
