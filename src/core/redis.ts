import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { once } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from './config.js';

/** A single Redis or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * What a connection is for; one connection each (docs/design.md, "Shape"). `command` and `queue`
 * fail fast while Redis is down (a request gets an answer, not a hang); `worker` and `subscriber`
 * wait out restarts.
 */
export type RedisRole = 'command' | 'queue' | 'worker' | 'subscriber';

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  command: { maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 2_000 },
  queue: { maxRetriesPerRequest: null, enableOfflineQueue: false, commandTimeout: 2_000 },
  worker: { maxRetriesPerRequest: null },
  subscriber: { maxRetriesPerRequest: null },
};

/**
 * What the Redis user may run beyond the needed commands. `info: false` makes BullMQ skip its
 * `INFO` version check, which would otherwise fail every command of that queue or worker.
 */
export type RedisAccess = { info: boolean };

/** Every command allowed (tests and tools). */
const FULL_REDIS_ACCESS: RedisAccess = Object.freeze({ info: true });

/** Reconnect back-off, ms, capped at 2 s, forever. */
const backoff = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2_000);

/**
 * Opens a connection for one role, to `REDIS_URL` or through `REDIS_CLUSTER_NODES` (the URL's
 * credentials and TLS apply to every node).
 *
 * @param name shows in `CLIENT LIST`.
 */
export function createRedis(
  config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>,
  role: RedisRole,
  name: string,
  access: RedisAccess = FULL_REDIS_ACCESS,
): RedisClient {
  // BullMQ reads `skipVersionCheck` from the client's options, duplicates included.
  const options: RedisOptions & { skipVersionCheck?: boolean } = {
    ...ROLE_OPTIONS[role],
    connectionName: `sns-gateway:${name}:${role}`,
    retryStrategy: backoff,
    ...(access.info ? {} : { skipVersionCheck: true }),
  };
  if (!config.REDIS_CLUSTER_NODES) return new Redis(config.REDIS_URL, options);
  const url = new URL(config.REDIS_URL);
  return new Cluster([...config.REDIS_CLUSTER_NODES], {
    redisOptions: {
      ...options,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    },
    enableOfflineQueue: options.enableOfflineQueue ?? true,
    maxRedirections: 16,
    clusterRetryStrategy: backoff,
  });
}

/** The database `REDIS_URL` names (0 on a Cluster), for scripts and channels that name it. */
export function databaseOf(redis: RedisClient): number {
  return redis instanceof Cluster ? 0 : (redis.options.db ?? 0);
}

/**
 * Resolves once the connection is `ready`; connection errors do not end the wait (a Redis starting
 * beside the gateway refuses the first attempts).
 *
 * @throws the signal's reason when it aborts first.
 */
export async function waitReady(redis: RedisClient, signal: AbortSignal): Promise<void> {
  while (redis.status !== 'ready') {
    try {
      await once(redis, 'ready', { signal });
    } catch (err) {
      // `once` also rejects on an 'error' event: a failed attempt, not the end of the wait.
      if (signal.aborted) throw signal.reason ?? err;
    }
  }
}

/** QUIT, or drop the connection when Redis does not answer within 1 s. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  if (redis.status === 'end') return;
  // QUIT would wait in the offline queue for a Redis that is not there.
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await Promise.race([redis.quit(), new Promise((_, reject) => setTimeout(reject, 1_000))]);
  } catch {
    redis.disconnect();
  }
}

/** Least interval between logs of an ongoing Redis fault. */
export const REDIS_ERROR_REMINDER_MS = 30_000;

/**
 * Rate-limited log of Redis 'error' events: ioredis emits one per connection per reconnect
 * attempt, and only the first says anything.
 */
export type RedisErrorLog = {
  /** Logs a connection's errors, and its 'ready' after a fault. */
  watch(connection: RedisClient, source: string): void;
  /** Logs one error from `source`. */
  report(err: Error, source: string): void;
};

/**
 * One {@link RedisErrorLog} per process, so a lost Redis is one warning (message only: a socket
 * stack says nothing), then a reminder every `reminderMs`. A fault ends on 'ready' or after
 * `reminderMs` without errors.
 */
export function createRedisErrorLog(
  logger: Logger,
  reminderMs = REDIS_ERROR_REMINDER_MS,
  now: () => number = Date.now,
): RedisErrorLog {
  let fault: { since: number; lastError: number; lastLog: number; unlogged: number } | undefined;
  const report = (err: Error, source: string) => {
    const t = now();
    const code = (err as { code?: unknown }).code;
    const fields = { source, err: err.message, ...(typeof code === 'string' ? { code } : {}) };
    if (!fault || t - fault.lastError > reminderMs) {
      fault = { since: t, lastError: t, lastLog: t, unlogged: 0 };
      logger.warn(
        fields,
        `Redis error: retrying in the background (repeats are logged every ${reminderMs / 1000} s at most)`,
      );
      return;
    }
    fault.lastError = t;
    if (t - fault.lastLog < reminderMs) {
      fault.unlogged += 1;
      return;
    }
    logger.warn(
      { ...fields, forSeconds: Math.round((t - fault.since) / 1000), errors: fault.unlogged + 1 },
      'Redis error goes on: still retrying',
    );
    fault.lastLog = t;
    fault.unlogged = 0;
  };
  return {
    report,
    watch(connection, source) {
      connection.on('error', (err: Error) => report(err, source));
      connection.on('ready', () => {
        if (!fault) return;
        logger.info(
          { source, afterSeconds: Math.round((now() - fault.since) / 1000) },
          'Redis is back',
        );
        fault = undefined;
      });
    },
  };
}

/** What {@link probeRedis} found. */
export type RedisProbe = {
  /** A refusal is an answer. */
  reachable: boolean;
  /** False also under `OOM` at `maxmemory` or on a replica. */
  writable: boolean;
};

/**
 * One expiring `SET` telling whether Redis answers and accepts writes: a ReplyError (`OOM`,
 * `READONLY`) answers but refuses. Never throws.
 */
export async function probeRedis(redis: RedisClient, key: string): Promise<RedisProbe> {
  if (redis.status !== 'ready') return { reachable: false, writable: false };
  try {
    return { reachable: true, writable: (await redis.set(key, '1', 'PX', 10_000)) === 'OK' };
  } catch (err) {
    return { reachable: err instanceof Error && err.name === 'ReplyError', writable: false };
  }
}
