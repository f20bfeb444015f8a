import { isSlot } from '../../src/core/rpc/slot.js';

/** A `logsNotification`: one transaction that mentions the name program. */
export type LogsNote = { slot: number; signature: string; failed: boolean; logs: string[] };

/**
 * The slot, account and base64 data of a notification's `result`, or what is wrong with it. A slot
 * must be a slot ({@link isSlot}): `1e309`, `2^63`, `-1`, `1.5` or `"7"` would otherwise be stored
 * (docs/design.md, "Freshness").
 */
export function readAccount(
  result: unknown,
): { slot: number; pubkey: string; data: string } | string {
  const r = result as
    | { context?: { slot?: unknown }; value?: { pubkey?: unknown; account?: { data?: unknown } } }
    | undefined;
  const slot = r?.context?.slot;
  const pubkey = r?.value?.pubkey;
  const data = r?.value?.account?.data;
  if (!isSlot(slot)) return 'its slot is not a non-negative safe integer';
  if (typeof pubkey !== 'string' || pubkey.length > 64) return 'no pubkey';
  if (!Array.isArray(data) || typeof data[0] !== 'string' || data[1] !== 'base64') {
    return 'no base64 data';
  }
  return { slot, pubkey, data: data[0] };
}

/**
 * The transaction a logs notification's `result` reports, or what is wrong with it: its slot must
 * be a slot ({@link isSlot}) and its signature a string of at most 100 characters; log lines that
 * are not strings are left out.
 */
export function readLogs(result: unknown): LogsNote | string {
  const r = result as
    | {
        context?: { slot?: unknown };
        value?: { signature?: unknown; err?: unknown; logs?: unknown };
      }
    | undefined;
  const slot = r?.context?.slot;
  const signature = r?.value?.signature;
  const logs = r?.value?.logs;
  if (!isSlot(slot) || typeof signature !== 'string' || signature.length > 100) {
    return 'no slot or signature';
  }
  const lines = Array.isArray(logs) ? logs.filter((l): l is string => typeof l === 'string') : [];
  return { slot, signature, failed: r?.value?.err != null, logs: lines };
}
