import { Redis, type RedisOptions } from 'ioredis';

/**
 * What a connection is for. Each role gets its own connection (DESIGN.md, BullMQ's advice):
 * - `command`: cache reads and writes on request paths; fails fast while Redis is down
 *   (`enableOfflineQueue: false`, one retry per command) so a request gets an answer, not a hang.
 * - `queue`: BullMQ's producer; BullMQ requires `maxRetriesPerRequest: null`; fails fast as well.
 * - `worker`: BullMQ's blocking worker connection; waits out Redis restarts.
 * - `subscriber`: pub/sub for refresh events; re-subscribes after a reconnect by itself.
 */
export type RedisRole = 'command' | 'queue' | 'worker' | 'subscriber';

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  command: { maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 2_000 },
  queue: { maxRetriesPerRequest: null, enableOfflineQueue: false },
  worker: { maxRetriesPerRequest: null },
  subscriber: { maxRetriesPerRequest: null },
};

/**
 * Opens a connection for one role. ioredis reconnects by itself with this back-off (milliseconds,
 * capped at 2 s) for as long as the process lives.
 *
 * @param url `redis://` or `rediss://` URL (`REDIS_URL`).
 * @param name shows in `CLIENT LIST`, to tell the gateway's connections apart.
 */
export function createRedis(url: string, role: RedisRole, name: string): Redis {
  return new Redis(url, {
    ...ROLE_OPTIONS[role],
    connectionName: `sns-gateway:${name}:${role}`,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2_000),
  });
}

/** Resolves once the connection is ready; rejects after `timeoutMs`. */
export async function waitReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

/** Closes a connection politely, or drops it when Redis does not answer. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  try {
    await Promise.race([redis.quit(), new Promise((_, reject) => setTimeout(reject, 1_000))]);
  } catch {
    redis.disconnect();
  }
}
