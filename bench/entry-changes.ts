/**
 * `npx tsx bench/entry-changes.ts`: what one change costs under a parent of 100,000 subdomains in
 * the configured endpoint's split layout (src/core/cache/subdomain-cache.ts), against what a scan's
 * put of the same parent costs. Prints wall times (client + Redis) and the script's own time in
 * Redis (SLOWLOG is not used: the difference of two clocks around one call on an idle client).
 * Uses database 9 unless BENCH_REDIS_URL names another (never 0), and its own key prefix.
 */
import { Redis } from 'ioredis';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import {
  domainKey,
  hashName,
  nameAccountKey,
  reverseKeyFromDomainKey,
  toBase58,
} from '../src/core/sns/pda.js';

const MEMBERS = 100_000;

async function main(): Promise<void> {
  const url = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379/9';
  if (/\/0$/.test(url)) throw new Error('refusing database 0');
  const redis = new Redis(url);
  const prefix = `snsgw-bench-entry-${process.pid}`;
  const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
  const parentKey = domainKey('big');
  const accounts: Record<string, readonly [string, string]> = {};
  const owner = toBase58(hashName('owner'));
  for (let i = 0; i < MEMBERS; i++) {
    accounts[toBase58(nameAccountKey(hashName(`\0label${i}`), undefined, parentKey))] = [
      `label${i}`,
      owner,
    ];
  }
  const keys = Object.keys(accounts);
  // What the scan's decode thread hands the put: the put derives none of them.
  const reverses = new Map(
    keys.map((a) => [a, toBase58(reverseKeyFromDomainKey(a, parentKey))] as const),
  );
  try {
    const puts: number[] = [];
    for (let r = 0; r < 3; r++) {
      const t = performance.now();
      await cache.put(
        'e',
        'big',
        { labels: [], fetchedAt: 1_000 + r, slot: 10 + r },
        accounts,
        reverses,
      );
      puts.push(performance.now() - t);
    }
    const t = performance.now();
    for (const account of keys) toBase58(reverseKeyFromDomainKey(account, parentKey));
    const pdaMs = performance.now() - t;
    const applies: number[] = [];
    for (let i = 0; i < 200; i++) {
      const account = keys[(i * 7919) % keys.length] as string;
      const reverse = toBase58(reverseKeyFromDomainKey(account, parentKey));
      const started = performance.now();
      await cache.applyChanges(
        'e',
        'big',
        [{ account, reverse, member: [`label-${i}`, owner] }],
        100 + i,
      );
      applies.push(performance.now() - started);
    }
    applies.sort((a, b) => a - b);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
    console.log(
      JSON.stringify({
        members: MEMBERS,
        firstPutMs: Math.round(puts[0] as number),
        rescanPutMsMedianOf2: Math.round(median(puts.slice(1))),
        reverseKeysMs: Math.round(pdaMs),
        applyChangesMsMedian: Number(median(applies).toFixed(3)),
        applyChangesMsP99: Number(
          (applies[Math.floor(applies.length * 0.99)] as number).toFixed(3),
        ),
      }),
    );
  } finally {
    const left = await redis.keys(`${prefix}*`);
    if (left.length) await redis.del(...left);
    redis.disconnect();
  }
}

await main();
