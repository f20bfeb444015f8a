import { Cluster } from 'ioredis';
import type { RedisClient } from '../../src/core/redis.js';

/**
 * Deletes every key under `prefix` (`prefix:*`): only what a test or benchmark created, never the
 * whole database. On a cluster, every master is scanned. No vitest import: bench/ uses it too.
 *
 * @returns how many keys were deleted.
 */
export async function deletePrefix(redis: RedisClient, prefix: string): Promise<number> {
  if (redis instanceof Cluster) {
    let deleted = 0;
    for (const node of redis.nodes('master')) deleted += await deletePrefix(node, prefix);
    return deleted;
  }
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    // One DEL per key: on a cluster node, a multi-key DEL across slots is refused.
    for (const key of keys) deleted += await redis.del(key);
  } while (cursor !== '0');
  return deleted;
}
