import type { CacheEntry, EntryAccounts } from '../../src/core/cache/subdomain-cache.js';

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

/** `entry` with {@link accountsOf} its labels: the arguments `put` takes after the parent. */
export const withAccounts = (entry: CacheEntry): [CacheEntry, EntryAccounts] => [
  entry,
  accountsOf(entry.labels),
];
