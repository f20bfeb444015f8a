import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Readiness, ReadinessParts } from '../http/ops-routes.js';
import {
  closeRedis,
  createRedis,
  createRedisErrorLog,
  type RedisAccess,
  type RedisClient,
  type RedisErrorLog,
  type RedisRole,
} from '../redis.js';
import { redisKeys } from '../redis-keys.js';
import { redisReadiness } from './readiness.js';
import { closeSteps, type ShutdownStep } from './shutdown.js';

/** Anything that reports faults as 'error' events (a BullMQ queue or worker). */
type ErrorEmitter = { on(event: 'error', listener: (err: Error) => void): unknown };

/**
 * What a runtime (the API's, the worker's) opens its resources with. Each resource's close step is
 * declared where it is opened, so the close order is the reverse of the opening order: what was
 * opened last (the front door) closes first, the Redis connections last.
 */
export type RuntimeKit = {
  /**
   * Opens a Redis connection for `role`, its 'error' events logged as `source`. Every connection
   * closes in one last step, together (`closeRedis` bounds each).
   */
  redis(role: RedisRole, source: string): RedisClient;
  /** Logs `emitter`'s 'error' events as `source` (rate-limited with the connections'); returns it. */
  watchErrors<T extends ErrorEmitter>(emitter: T, source: string): T;
  /** Reports one Redis fault from `source`. */
  reportError(err: Error, source: string): void;
  /**
   * Declares the close step of `resource`, run before every step declared earlier; returns
   * `resource`.
   */
  closes<T>(name: string, resource: T, close: (resource: T) => unknown): T;
  /** `/readyz`'s answer: ready while `redis` answers and {@link close} has not begun. */
  readiness(
    redis: RedisClient,
    parts: () => Pick<ReadinessParts, 'rpc' | 'websocket' | 'index'>,
  ): () => Promise<Readiness>;
  /** True once {@link close} has begun. */
  readonly closing: boolean;
  /**
   * Runs every close step, newest first, each even when one before it failed and each bounded by
   * `SHUTDOWN_TIMEOUT_MS`; rejects once all have run if one failed (failures logged per step).
   * Called again, returns the same promise.
   */
  close(): Promise<void>;
};

/**
 * Makes the kit of one runtime.
 *
 * @param opts.name the runtime's name (`api`, `worker`): Redis connection names and the error.
 * @param opts.redisErrors the process's Redis error log (one per process); a new one if absent.
 * @param opts.redisAccess what the Redis user may run (`checkRedisAtStart`); all if absent.
 */
export function createRuntimeKit(opts: {
  name: string;
  config: Pick<
    Config,
    'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'QUEUE_PREFIX' | 'SHUTDOWN_TIMEOUT_MS'
  >;
  logger: Logger;
  redisErrors?: RedisErrorLog;
  redisAccess?: RedisAccess;
}): RuntimeKit {
  const { config, logger, name } = opts;
  const redisErrors = opts.redisErrors ?? createRedisErrorLog(logger);
  const steps: ShutdownStep[] = [];
  const connections: RedisClient[] = [];
  let closing = false;
  let closed: Promise<void> | undefined;
  const closes = <T>(step: string, resource: T, close: (resource: T) => unknown): T => {
    steps.push({ name: step, close: async () => void (await close(resource)) });
    return resource;
  };
  // First declared, so last run: every other step may still need Redis.
  closes(`${name} redis connections`, connections, async (all) => {
    await Promise.all(all.map(closeRedis));
  });
  return {
    redis(role, source) {
      const connection = createRedis(config, role, name, opts.redisAccess);
      redisErrors.watch(connection, source);
      connections.push(connection);
      return connection;
    },
    watchErrors(emitter, source) {
      emitter.on('error', (err) => redisErrors.report(err, source));
      return emitter;
    },
    reportError: (err, source) => redisErrors.report(err, source),
    closes,
    readiness: (redis, parts) =>
      redisReadiness({
        redis,
        key: redisKeys(config.QUEUE_PREFIX).readinessProbe,
        parts,
        closing: () => closing,
      }),
    get closing() {
      return closing;
    },
    close() {
      closed ??= (async () => {
        closing = true;
        const ok = await closeSteps([...steps].reverse(), logger, config.SHUTDOWN_TIMEOUT_MS);
        if (!ok) throw new Error(`the ${name} closed with failures (logged per step)`);
      })();
      return closed;
    },
  };
}

/**
 * Runs `open` on `kit` and returns what it opened; when `open` throws, closes the kit (every step
 * it had gathered, errors of the close swallowed) and rethrows, so a runtime that fails to start
 * leaves no connection behind. The one start-up pattern of both runtimes.
 *
 * @throws whatever `open` throws.
 */
export async function openOnKit<T>(
  kit: RuntimeKit,
  open: (kit: RuntimeKit) => Promise<T>,
): Promise<T> {
  try {
    return await open(kit);
  } catch (err) {
    await kit.close().catch(() => undefined);
    throw err;
  }
}
