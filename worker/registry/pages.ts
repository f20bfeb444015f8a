import { setImmediate } from 'node:timers/promises';
import type { PieceMember } from '../../src/core/cache/registry-index.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import { reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import { ownerIn } from '../follow/backstop.js';
import { headLists, wholeRecordSlice } from '../follow/lane-rpc.js';
import { malformed } from '../rpc/envelope.js';
import { subdomainKey } from '../sns/change.js';
import { HEADER_LEN } from '../sns/discovery-decode.js';
import { accountsInBatches, type DiscoveryLane } from '../sns/subdomain-discovery.js';

/**
 * What the pages of a bootstrap piece hold (docs/design.md, "The registry index"): a page of
 * `getProgramAccounts[V2]` as sent, and its members, from reverse records (each pass of a shard)
 * or from name accounts (shard `00`'s second pass), with the reads that complete them.
 */

/** Records of a page checked between two turns of the event loop. */
const DERIVE_CHUNK = 500;

export type Page = {
  slot: number;
  accounts: Array<{ pubkey: string; data: string }>;
  next: string | null;
};

/** A page of `getProgramAccounts[V2]` as sent: accounts, slot, pagination key. */
export function pageOf(result: unknown, v2: boolean): Page {
  const bad = (why: string) => malformed(`registry piece: ${why}`);
  if (typeof result !== 'object' || result === null) throw bad('no result');
  const r = result as { context?: { slot?: unknown }; value?: unknown };
  // V2 answers `{accounts, paginationKey, context?}`, or, with context, `{context, value: {...}}`.
  let body: unknown = v2 ? (r.value ?? result) : r.value;
  const slot = r.context?.slot;
  if (!isSlot(slot)) throw bad('no context slot');
  let next: string | null = null;
  if (v2) {
    const b = body as { accounts?: unknown; paginationKey?: unknown };
    next = typeof b.paginationKey === 'string' && b.paginationKey !== '' ? b.paginationKey : null;
    body = b.accounts;
  }
  if (!Array.isArray(body)) throw bad('no account list');
  const accounts: Page['accounts'] = [];
  for (const item of body as Array<{ pubkey?: unknown; account?: { data?: unknown } }>) {
    const data = item?.account?.data;
    if (typeof item?.pubkey !== 'string' || !Array.isArray(data) || typeof data[0] !== 'string') {
      throw bad('an account of the wrong shape');
    }
    accounts.push({ pubkey: item.pubkey, data: data[0] });
  }
  return { slot, accounts, next };
}

/**
 * The subdomain reverse records of one page: each one's parent key, label and the subdomain name
 * account derived from it (checked: its reverse key must be the record's, as `findSubdomains`
 * pairs them). Texts cut at the slice are returned apart, to read whole.
 */
function reverseRecordsOf(accounts: Page['accounts']): {
  found: Array<Omit<PieceMember, 'owner'>>;
  cut: string[];
} {
  const found: Array<Omit<PieceMember, 'owner'>> = [];
  const cut: string[] = [];
  for (const { pubkey, data } of accounts) {
    const record = reverseRecordOf(pubkey, Buffer.from(data, 'base64'));
    if (record === 'cut') cut.push(pubkey);
    else if (record) found.push(record);
  }
  return { found, cut };
}

/**
 * The subdomain reverse record `pubkey` of `bytes` (its data from byte 0): 'cut' when its text
 * runs past them, undefined when it names no subdomain (too short, a top-level name's, an empty
 * text, or a key not derived from its text).
 */
function reverseRecordOf(
  pubkey: string,
  bytes: Buffer,
): Omit<PieceMember, 'owner'> | 'cut' | undefined {
  if (bytes.length < HEADER_LEN + 4) return undefined;
  const parent = bytes.subarray(0, 32);
  if (parent.every((b) => b === 0)) return undefined;
  const len = bytes.readUInt32LE(HEADER_LEN);
  const text = bytes.subarray(HEADER_LEN + 4);
  if (len > text.length) return 'cut';
  const label = text.subarray(0, len).toString('utf8').replace(/^\0/, '');
  if (!label) return undefined;
  const account = subdomainKey(label, parent);
  if (toBase58(reverseKeyFromDomainKey(account, parent)) !== pubkey) return undefined;
  return { parentKey: toBase58(parent), account, reverse: pubkey, label };
}

/** The members of a page of reverse records, their owners read at its slot or later. */
export async function reversesPage(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  page: Page,
): Promise<{ members: PieceMember[]; ownersSlot: number }> {
  const found: Array<Omit<PieceMember, 'owner'>> = [];
  const cut: string[] = [];
  // Two derivations a record, on this thread: a page is cut so refreshes' callbacks run between.
  for (let at = 0; at < page.accounts.length; at += DERIVE_CHUNK) {
    if (at > 0) await setImmediate();
    const some = reverseRecordsOf(page.accounts.slice(at, at + DERIVE_CHUNK));
    found.push(...some.found);
    cut.push(...some.cut);
  }
  const long = await readLongTexts(lane, endpoint, cut, page.slot);
  found.push(...long);
  const { members, slot } = await ownersOf(lane, endpoint, found, page.slot);
  return { members, ownersSlot: slot };
}

/**
 * The members of a page of name accounts (shard `00`'s second pass), as `findSubdomains` pairs
 * them: each account's reverse record is derived from its key and parent, and read (at the page's
 * slot or later); one that exists and names a label deriving back to the account makes a member,
 * whatever its text's first byte, with the owner the page read.
 */
export async function namesPage(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  page: Page,
): Promise<{ members: PieceMember[]; ownersSlot: number }> {
  const owners = new Map<string, string>();
  const reverses: string[] = [];
  for (let at = 0; at < page.accounts.length; at += DERIVE_CHUNK) {
    if (at > 0) await setImmediate();
    for (const { pubkey, data } of page.accounts.slice(at, at + DERIVE_CHUNK)) {
      const head = Buffer.from(data, 'base64');
      if (head.length < 64) continue;
      const parent = head.subarray(0, 32);
      if (parent.every((b) => b === 0)) continue;
      owners.set(pubkey, toBase58(head.subarray(32, 64)));
      reverses.push(toBase58(reverseKeyFromDomainKey(pubkey, parent)));
    }
  }
  const members: PieceMember[] = [];
  for (const f of await readLongTexts(lane, endpoint, reverses, page.slot)) {
    const owner = owners.get(f.account);
    if (owner !== undefined) members.push({ ...f, owner });
  }
  return { members, ownersSlot: page.slot };
}

/**
 * Owners of the found subdomains (`getMultipleAccounts`, bytes 0..64) at `slot` or later, and the
 * slot they are read at: the oldest of the batches' (each at least `slot`), so a change the stream
 * saw after it wins over the page's owner (registry-piece.lua) whichever batch read the account.
 * An owner is null where the account is gone or under another parent (`ownerIn`).
 *
 * @throws RpcCallError for a failed read, or a reply that is not one account entry per key.
 */
export async function ownersOf(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  found: ReadonlyArray<Omit<PieceMember, 'owner'>>,
  slot: number,
): Promise<{ members: PieceMember[]; slot: number }> {
  const batches = await accountsInBatches(
    lane,
    endpoint,
    found.map((f) => f.account),
    { dataSlice: { offset: 0, length: 64 }, minContextSlot: slot, decode: headLists(lane) },
  );
  const members: PieceMember[] = [];
  let read: number | undefined;
  let i = 0;
  for (const { result } of batches) {
    const at = result.slot;
    // A batch of no known slot was read at `slot` or later: no later than that is proven.
    read = Math.min(read ?? Infinity, isSlot(at) ? Math.max(at, slot) : slot);
    for (const account of result.accounts) {
      const f = found[i++] as Omit<PieceMember, 'owner'>;
      members.push({ ...f, owner: ownerIn(account, f.parentKey) ?? null });
    }
  }
  return { members, slot: read ?? slot };
}

/**
 * Reverse records read whole (up to the lane's label bound): texts cut at the slice, or the
 * records derived from name accounts.
 */
async function readLongTexts(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  keys: readonly string[],
  slot: number,
): Promise<Array<Omit<PieceMember, 'owner'>>> {
  if (keys.length === 0) return [];
  const batches = await accountsInBatches(lane, endpoint, keys, {
    dataSlice: wholeRecordSlice(lane),
    minContextSlot: slot,
    decode: headLists(lane, true),
  });
  const found: Array<Omit<PieceMember, 'owner'>> = [];
  for (const { batch, result } of batches) {
    result.accounts.forEach((account, i) => {
      const record = account && reverseRecordOf(batch[i] as string, account.head);
      if (record && record !== 'cut') found.push(record);
    });
  }
  return found;
}
