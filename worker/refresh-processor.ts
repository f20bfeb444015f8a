import { UnrecoverableError, type Job } from 'bullmq';
import type { RedisClient } from '../src/redis.js';
import type { Logger } from 'pino';
import type { SubdomainCache } from '../src/cache/subdomain-cache.js';
import type { Metrics } from '../src/metrics/metrics.js';
import { publishRefreshEvent } from '../src/queue/refresh-events.js';
import type { RefreshJobData } from '../src/queue/refresh-queue.js';
import { RpcCallError, type RpcClient } from '../src/rpc/client.js';
import { endpointId, type RpcEndpoint } from '../src/rpc/endpoint.js';
import { discoverSubdomains } from '../src/sns/subdomain-discovery.js';

export type RefreshProcessorDeps = {
  rpc: RpcClient;
  cache: SubdomainCache;
  /** Command connection used to publish refresh events. */
  publisher: RedisClient;
  prefix: string;
  metrics: Metrics;
  logger: Logger;
  /** `RPC_URL`, or undefined when unset. */
  defaultRpcUrl: string | undefined;
};

export type RefreshResult = { labels: number; accounts: number; slot: number | undefined };

/**
 * The refresh job: run discovery against the job's endpoint, write the cache entry, then tell
 * waiting API requests. On failure it tells them too (so a cold request gets its 502 once the RPC
 * client's retries are spent) and rethrows, so BullMQ's attempts and back-off fill the cache later.
 * A failed refresh never touches the entry already cached (stale-if-error).
 */
export function createRefreshProcessor(deps: RefreshProcessorDeps) {
  const defaultEndpoint: RpcEndpoint | undefined = deps.defaultRpcUrl
    ? { kind: 'default', url: deps.defaultRpcUrl, id: endpointId(deps.defaultRpcUrl) }
    : undefined;

  return async (
    job: Job<RefreshJobData>,
    _token?: string,
    signal?: AbortSignal,
  ): Promise<RefreshResult> => {
    const { cacheKey, parent } = job.data;
    const stopTimer = deps.metrics.refreshDuration.startTimer();
    try {
      const endpoint: RpcEndpoint | undefined =
        job.data.endpoint.kind === 'override'
          ? { kind: 'override', url: job.data.endpoint.url, id: endpointId(job.data.endpoint.url) }
          : defaultEndpoint;
      if (!endpoint) throw new UnrecoverableError('RPC_URL is not configured on the worker');
      const found = await discoverSubdomains(deps.rpc, endpoint, parent, signal);
      await deps.cache.put(cacheKey, {
        labels: found.labels,
        fetchedAt: Date.now(),
        slot: found.slot,
      });
      await publishRefreshEvent(deps.publisher, deps.prefix, { key: cacheKey, ok: true });
      return { labels: found.labels.length, accounts: found.accounts, slot: found.slot };
    } catch (err) {
      const reason = err instanceof RpcCallError ? 'rpc' : 'internal';
      deps.logger.warn(
        { err, jobId: job.id, attempt: job.attemptsMade + 1, reason },
        'refresh failed',
      );
      await publishRefreshEvent(deps.publisher, deps.prefix, {
        key: cacheKey,
        ok: false,
        reason,
      }).catch(() => undefined);
      throw err;
    } finally {
      stopTimer();
    }
  };
}
