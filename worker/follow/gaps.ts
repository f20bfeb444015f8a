import type { Logger } from 'pino';
import { toBase58 } from '../../src/core/sns/pda.js';
import type { Deletions } from './deletions.js';
import type { FollowRpc } from './rpc.js';
import { NAME_PROGRAM } from './name-program.js';
import { nameWrites } from './transaction.js';
import type { AccountNote } from './types.js';

/**
 * The most transactions a gap is healed by reading: past it (a long outage on a busy chain) the
 * follower starts a new epoch instead (entries fetched before it are re-read when asked), which
 * costs what is asked for rather than what happened.
 */
const GAP_MAX_SIGNATURES = 500;

/** How a gap ended: healed (nothing missed), or a new epoch is needed. */
export type GapOutcome =
  { healed: true; newest: string | undefined } | { healed: false; why: string };

export type GapDeps = {
  rpc: FollowRpc;
  deletions: Pick<Deletions, 'removeDeleted'>;
  /** Routes an account read in the gap as if notified (the follower's filter, then the patcher). */
  feed: (note: AccountNote, parentKey: string) => void;
  logger: Logger;
  maxSignatures?: number;
  /**
   * The newest slot the new stream has shown: the gap's end. The signatures are read at it or
   * later, so a node lagging the websocket's cannot answer without the gap's last transactions.
   */
  minContextSlot?: number;
  /** Waits before a transaction a lagging node answered null is asked again (none: no retry). */
  wait?: (ms: number) => Promise<void>;
};

/** Tries of a transaction a lagging node does not have yet, within a gap. */
const GAP_TRANSACTION_TRIES = 4;
/**
 * Pages of `getSignaturesForAddress` a gap read asks at most: a provider that caps `limit` (a
 * stingy or hostile one) answers short pages, each 1 credit; past this many the gap is given up
 * (a new epoch) rather than read for ever.
 */
export const GAP_MAX_PAGES = 20;

/**
 * The name program's signatures newer than `anchor`, newest first, or why they could not be known.
 * The pages are read with `before` (no `until`) until one holds the anchor itself: a page shorter
 * than asked proves nothing (a provider may cap `limit`, or lag), only seeing the anchor proves
 * that nothing between it and the newest was left out. More than `max` signatures, more than
 * {@link GAP_MAX_PAGES} pages, an empty page before the anchor (a node that does not know it, or
 * a refusal) or a failed call: the gap cannot be read.
 */
async function signaturesSince(
  deps: GapDeps,
  anchor: string,
  max: number,
): Promise<Array<{ signature: string; slot: number; failed: boolean }> | string> {
  const out: Array<{ signature: string; slot: number; failed: boolean }> = [];
  const seen = new Set<string>();
  let before: string | undefined;
  for (let page = 0; page < GAP_MAX_PAGES; page++) {
    let rows;
    try {
      rows = await deps.rpc.signatures({
        // One more than may be read: the anchor itself ends the page.
        limit: Math.min(SIGNATURES_PAGE_MAX, max + 1 - out.length),
        ...(before === undefined ? {} : { before }),
        ...(deps.minContextSlot === undefined ? {} : { minContextSlot: deps.minContextSlot }),
      });
    } catch (err) {
      return `signatures: ${String(err)}`;
    }
    if (rows.length === 0) return 'the anchor was not reached (an empty page)';
    for (const row of rows) {
      if (row.signature === anchor) return out;
      // A provider repeating itself would otherwise loop within the bound for nothing.
      if (seen.has(row.signature)) return 'a page repeated a signature';
      seen.add(row.signature);
      out.push(row);
      if (out.length > max) return `more than ${max} transactions`;
    }
    before = rows[rows.length - 1]?.signature;
  }
  return `the anchor was not reached in ${GAP_MAX_PAGES} pages`;
}

/** The largest `limit` of `getSignaturesForAddress` (agave's). */
const SIGNATURES_PAGE_MAX = 1_000;

/**
 * Heals a gap in the stream (a reconnect, a silent stream, a worker taking over): the name
 * program's transactions since the last one seen (`getSignaturesForAddress` until it), each read
 * (`getTransaction`), the accounts they wrote read once (`getMultipleAccounts`, sliced as the
 * stream) and fed to the patcher like notifications, the accounts they deleted removed. Cost
 * follows what changed in the gap (1 + one per transaction + one per 100 accounts), not parents.
 */
export async function healGap(deps: GapDeps, until: string | undefined): Promise<GapOutcome> {
  if (until === undefined) return { healed: false, why: 'no transaction seen before the gap' };
  const max = deps.maxSignatures ?? GAP_MAX_SIGNATURES;
  const read = await signaturesSince(deps, until, max);
  if (typeof read === 'string') return { healed: false, why: read };
  const signatures = read;
  const deleted: Array<{ accounts: string[]; slot: number }> = [];
  const written = new Set<string>();
  let top = 0;
  // Oldest first, so a later write of an account wins over an earlier one.
  for (const sig of [...signatures].reverse()) {
    if (sig.failed) continue;
    let writes: ReturnType<typeof nameWrites>;
    for (let attempt = 1, wait = 250; ; attempt++, wait *= 2) {
      try {
        writes = nameWrites(await deps.rpc.transaction(sig.signature));
      } catch (err) {
        return { healed: false, why: `transaction: ${String(err)}` };
      }
      if (writes !== undefined || !deps.wait || attempt >= GAP_TRANSACTION_TRIES) break;
      await deps.wait(wait);
    }
    // Null to the end, or a reply that is not a transaction: what it wrote is unknown.
    if (writes === undefined) return { healed: false, why: 'a transaction not read' };
    if (writes === 'failed') continue;
    top = Math.max(top, writes.slot);
    for (const account of writes.deleted) written.delete(account);
    for (const account of writes.written) written.add(account);
    if (writes.deleted.length > 0) deleted.push({ accounts: writes.deleted, slot: writes.slot });
  }
  if (written.size > 0) {
    const keys = [...written];
    let read;
    try {
      read = await deps.rpc.accounts(keys);
    } catch (err) {
      return { healed: false, why: `accounts: ${String(err)}` };
    }
    const slot = read.slot ?? top;
    read.accounts.forEach((account, i) => {
      const pubkey = keys[i];
      if (!account || pubkey === undefined || account.owner !== NAME_PROGRAM) return;
      if (account.head.length < 32) return;
      deps.feed({ slot, pubkey, head: account.head }, toBase58(account.head.subarray(0, 32)));
    });
  }
  for (const { accounts, slot } of deleted) await deps.deletions.removeDeleted(accounts, slot);
  return { healed: true, newest: signatures[0]?.signature };
}
