import type { CacheEntry, EntryAccounts } from '../../src/core/cache/subdomain-cache.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';

/**
 * Name accounts for `labels`, for a test that cares only about the labels of an entry it puts:
 * one account per label (a label listed twice gets two), named from the label's position and its
 * UTF-8 bytes in hex (no space or newline, which the put's script arguments use as separators),
 * each owned by `owner`.
 */
export function accountsOf(labels: readonly string[], owner = 'Owner'): EntryAccounts {
  return Object.fromEntries(
    labels.map((label, i) => [`acct${i}x${Buffer.from(label).toString('hex')}`, [label, owner]]),
  );
}

/**
 * The reverse record (base58) of each of `accounts` under `parent`, derived as the decode thread
 * finds them on the chain (`reverseKeyFromDomainKey`): what a scan hands `put` beside its accounts.
 */
function reversesOf(parent: string, accounts: EntryAccounts): Map<string, string> {
  const parentKey = domainKey(parent);
  return new Map(
    Object.keys(accounts).map((a) => [a, toBase58(reverseKeyFromDomainKey(a, parentKey))]),
  );
}

/** `entry` with `accounts` and their {@link reversesOf} under `parent`: `put`'s arguments after the parent. */
export const withReverses = (
  parent: string,
  entry: CacheEntry,
  accounts: EntryAccounts,
): [CacheEntry, EntryAccounts, Map<string, string>] => [
  entry,
  accounts,
  reversesOf(parent, accounts),
];

/** `entry` with {@link accountsOf} its labels and their reverse records under `parent` ({@link withReverses}). */
export const withAccounts = (
  parent: string,
  entry: CacheEntry,
): [CacheEntry, EntryAccounts, Map<string, string>] =>
  withReverses(parent, entry, accountsOf(entry.labels));
