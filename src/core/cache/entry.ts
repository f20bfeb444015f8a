import { isSlot } from '../rpc/slot.js';

/**
 * One cached answer of `/subdomains` (docs/design.md, "The subdomain cache"), whichever store
 * holds it: the configured endpoint's split entries (./split-entries.ts) or the `?rpc=` overrides'
 * (./override-entries.ts).
 */
export type CacheEntry = {
  /** Sorted subdomain labels; an empty list is an answer like any other. */
  readonly labels: readonly string[];
  /** When the answer was last known whole (a scan, or a deletion check), in Unix milliseconds. */
  readonly fetchedAt: number;
  /** The slot the answer reflects (`withContext`), when the RPC said. */
  readonly slot?: number;
  /**
   * How many times the stored entry changed (a scan, a change applied, a check): with `fetchedAt`
   * and `slot` it names a revision (`rev` starts again at 1 when an expired entry is written anew).
   */
  readonly rev?: number;
  /**
   * The slot of the last full scan (`getProgramAccounts`) behind the labels: `slot` also moves
   * with patches and deletion checks, this only with scans.
   */
  readonly scanSlot?: number;
  /** When that scan began, in Unix milliseconds. */
  readonly scannedAt?: number;
  /**
   * The slot a re-read of the entry must reach that the follower owes and could not make (the
   * day's budget spent) or asked during a heal: while set, the stream does not vouch for the
   * entry (it is fresh by its window only). A scan that far clears it.
   */
  readonly owes?: number;
  /**
   * The name accounts behind the labels, inside the entry: for `?rpc=` overrides, whose entries
   * are one JSON string (short-lived, within a byte budget); the configured endpoint keeps them in
   * the entry's members hash (`SplitEntries.getWithAccounts`, ./split-entries.ts).
   */
  readonly accounts?: EntryAccounts;
};

/** What the cache knows of one subdomain: its label, and the owner in its name account's header. */
export type Member = readonly [label: string, owner: string];

/**
 * The name accounts behind an entry's labels: subdomain name account (base58) -> its label and
 * owner (base58). Kept with the configured endpoint's entries (a hash, each member with the slot it
 * was written at), so changes and deletions are applied account by account (docs/design.md,
 * "Freshness") and answers can carry keys and owners.
 */
export type EntryAccounts = Readonly<Record<string, Member>>;

/** The labels of `accounts`, sorted as answers list them. */
export const labelsOf = (accounts: EntryAccounts): string[] =>
  Object.values(accounts)
    .map((m) => m[0])
    .sort();

export type Freshness = 'fresh' | 'stale';

/**
 * The head and the rest of an entry's stored JSON, as the scripts take them.
 *
 * @throws TypeError when `slot` or `scanSlot` is not a slot ({@link isSlot}) or `fetchedAt` not a
 *   safe integer: such a value is never stored (the scripts refuse it too).
 */
export function entryArgs(entry: CacheEntry): [slot: string, fetchedAt: string, rest: string] {
  for (const field of ['slot', 'scanSlot'] as const) {
    const value: number | undefined = entry[field];
    if (value !== undefined && !isSlot(value)) {
      throw new TypeError(`${field} ${String(value)} is not a slot`);
    }
  }
  const at: number = entry.fetchedAt;
  if (!isSlot(at)) throw new TypeError(`fetchedAt ${String(at)} is not a time`);
  return [
    entry.slot === undefined ? 'null' : String(entry.slot),
    String(entry.fetchedAt),
    JSON.stringify({
      scanSlot: entry.scanSlot,
      scannedAt: entry.scannedAt,
      accounts: entry.accounts,
      labels: entry.labels,
    }).slice(1),
  ];
}
