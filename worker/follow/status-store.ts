import {
  readFollowStatus,
  writeFollowStatus,
  type FollowRecord,
} from '../../src/core/cache/follow-status.js';
import type { RedisClient } from '../../src/core/redis.js';
import { redisKeys } from '../../src/core/redis-keys.js';

/** How long the last signature is kept: a stream stopped longer than this starts a new epoch. */
const SIGNATURE_TTL_MS = 24 * 3_600_000;

/**
 * The follow status in Redis (src/core/cache/follow-status.ts: its epoch never moves back), and
 * beside it the last signature the stream reported, for the next owner's gap heal.
 */
export function followStatusStore(
  redis: RedisClient,
  prefix: string,
): { read(): Promise<FollowRecord | undefined>; write(status: FollowRecord): Promise<void> } {
  const keys = redisKeys(prefix);
  let written: string | undefined;
  return {
    async read() {
      const [status, signature] = await Promise.all([
        readFollowStatus(redis, prefix),
        redis.get(keys.followSignature),
      ]);
      if (!status) return undefined;
      return signature ? { ...status, lastSignature: signature } : status;
    },
    async write({ lastSignature, ...status }) {
      await writeFollowStatus(redis, prefix, status);
      if (lastSignature !== undefined && lastSignature !== written) {
        await redis.set(keys.followSignature, lastSignature, 'PX', SIGNATURE_TTL_MS);
        written = lastSignature;
      }
    },
  };
}
