import type { Readiness, ReadinessParts } from '../http/ops-routes.js';
import { probeRedis, type RedisClient, type RedisProbe } from '../redis.js';

/** How long one readiness probe of Redis answers /readyz, in milliseconds. */
const READINESS_PROBE_MS = 1_000;

/**
 * What `/readyz` reports, for the API and the worker alike (docs/design.md, "Shutdown, liveness and
 * readiness"): ready while Redis answers and no shutdown has begun; refused writes show in `parts`
 * only. Redis is probed with one small write a second at most, however many requests arrive.
 *
 * @param deps.key the probe's key (`redisKeys(prefix).readinessProbe`).
 * @param deps.parts the parts besides Redis's, asked at each probe.
 * @param deps.closing true once the process's shutdown has begun.
 */
export function redisReadiness(deps: {
  redis: RedisClient;
  key: string;
  parts: () => Pick<ReadinessParts, 'rpc' | 'websocket' | 'index'>;
  closing: () => boolean;
}): () => Promise<Readiness> {
  let probing: Promise<RedisProbe> | undefined;
  let probedAt = 0;
  const probe = () => {
    if (!probing || Date.now() - probedAt >= READINESS_PROBE_MS) {
      probedAt = Date.now();
      probing = probeRedis(deps.redis, deps.key);
    }
    return probing;
  };
  return async () => {
    const redis = await probe();
    return {
      ready: !deps.closing() && redis.reachable,
      parts: { redis: redis.reachable, redisWrites: redis.writable, ...deps.parts() },
    };
  };
}
