import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { once } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from './config.js';

/** A connection to a single Redis or to a Redis Cluster; both speak the commands the gateway uses. */
export type RedisClient = Redis | Cluster;

/**
 * What a connection is for. Each role gets its own connection (docs/design.md, "Shape"; BullMQ's
 * advice):
 * - `command`: cache reads and writes on request paths; fails fast while Redis is down
 *   (`enableOfflineQueue: false`, one retry per command) so a request gets an answer, not a hang.
 * - `queue`: BullMQ's producer; BullMQ requires `maxRetriesPerRequest: null`; fails fast as well,
 *   and a command in flight when Redis stalls or dies is bounded by `commandTimeout` (else ioredis
 *   holds it until Redis is back, and the request waiting on it hangs as long).
 * - `worker`: BullMQ's blocking worker connection; waits out Redis restarts.
 * - `subscriber`: pub/sub for refresh events; re-subscribes after a reconnect by itself.
 */
export type RedisRole = 'command' | 'queue' | 'worker' | 'subscriber';

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  command: { maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 2_000 },
  queue: { maxRetriesPerRequest: null, enableOfflineQueue: false, commandTimeout: 2_000 },
  worker: { maxRetriesPerRequest: null },
  subscriber: { maxRetriesPerRequest: null },
};

/**
 * What the Redis user may run beyond the commands the gateway needs (src/core/redis-permissions.ts).
 * `info: false` (refused, or not known) makes BullMQ skip its `INFO` version check, which would
 * otherwise fail every command of that queue or worker (docs/design.md, "Shutdown, liveness and
 * readiness").
 */
export type RedisAccess = { info: boolean };

/** Every command allowed: what tests and tools get unless they say otherwise. */
export const FULL_REDIS_ACCESS: RedisAccess = Object.freeze({ info: true });

/** Reconnect back-off in milliseconds, capped at 2 s, for as long as the process lives. */
const backoff = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2_000);

/**
 * Opens a connection for one role: to `REDIS_URL`, or, when `REDIS_CLUSTER_NODES` is set, to that
 * cluster through its seeds (credentials and TLS of `REDIS_URL` apply to every node). ioredis
 * reconnects by itself.
 *
 * @param name shows in `CLIENT LIST`, to tell the gateway's connections apart.
 * @param access what the user may run besides the needed commands (the start-up check's finding).
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

/**
 * The database a connection works in: the one `REDIS_URL` names (0 on a Redis Cluster). What names
 * the database explicitly (lease scripts, the events' channel) takes it from here.
 */
export function databaseOf(redis: RedisClient): number {
  return redis instanceof Cluster ? 0 : (redis.options.db ?? 0);
}

/**
 * Resolves once the connection is ready (ioredis's `ready`). Connection errors on the way do not
 * end the wait: ioredis reconnects by itself, and a Redis starting next to the gateway (compose)
 * refuses the first attempts.
 *
 * @param signal ends the wait (`AbortSignal.timeout(ms)` for a bound).
 * @throws the signal's reason (a `TimeoutError` for `AbortSignal.timeout`) when it aborts first.
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

/** Closes a connection politely, or drops it when Redis does not answer. */
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

/** How often, at most, a Redis fault that goes on is logged again. */
export const REDIS_ERROR_REMINDER_MS = 30_000;

/**
 * Logs the 'error' events of Redis connections and of what runs on them (BullMQ `Worker` and
 * `Queue`), rate-limited: ioredis emits one per connection and per reconnect attempt (several a
 * second while Redis is down), and the first one is the only line worth reading.
 */
export type RedisErrorLog = {
  /** Reports a connection's 'error' events; its 'ready' after a fault logs the recovery. */
  watch(connection: RedisClient, source: string): void;
  /** Reports one error from `source` (`refresh worker`, `refresh queue`, ...). */
  report(err: Error, source: string): void;
};

/**
 * One {@link RedisErrorLog} for the whole process, so a lost Redis is one line, not one per
 * connection: the first error of a fault is a warning (message only: a socket error's stack says
 * nothing), later ones are counted and logged every `reminderMs` at most. A fault ends when a
 * watched connection is ready again (logged) or after `reminderMs` without errors.
 *
 * @param now clock in milliseconds (tests pass their own).
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
  /** Redis answered (a refusal is an answer). */
  reachable: boolean;
  /** Redis accepted a write; false when it refuses them too (`OOM` at `maxmemory`, a replica). */
  writable: boolean;
};

/**
 * One small write (`SET key 1 PX 10000`, the key expires by itself) telling whether Redis answers
 * and whether it accepts writes: a reply error (`OOM command not allowed when used memory >
 * 'maxmemory'`, `READONLY`) means it answers but refuses; any other failure (closed connection,
 * command time-out) that it does not answer. Never throws.
 */
export async function probeRedis(redis: RedisClient, key: string): Promise<RedisProbe> {
  if (redis.status !== 'ready') return { reachable: false, writable: false };
  try {
    return { reachable: true, writable: (await redis.set(key, '1', 'PX', 10_000)) === 'OK' };
  } catch (err) {
    return { reachable: err instanceof Error && err.name === 'ReplyError', writable: false };
  }
}
