import type { LookupFunction } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { SubdomainCache } from '../src/cache/subdomain-cache.js';
import type { Config } from '../src/config.js';
import type { Metrics } from '../src/metrics/metrics.js';
import { createRefreshQueue } from '../src/queue/refresh-queue.js';
import { closeRedis, createRedis } from '../src/redis.js';
import { RpcClient } from '../src/rpc/client.js';
import { endpointId, EndpointSelector } from '../src/rpc/endpoint.js';
import { Agents } from '../src/rpc/transport.js';
import { closeDiscovery } from '../src/sns/subdomain-discovery.js';
import { runHotScan, scheduleHotScans } from './hot-refresh.js';
import { startMetricsServer } from './metrics-server.js';
import { createRefreshWorker } from './refresh-worker.js';

export type WorkerRuntime = {
  metricsPort: number | undefined;
  /** Stops taking jobs, waits for the active ones (BullMQ `worker.close()`), closes Redis. */
  close(): Promise<void>;
};

/**
 * Connects the worker's dependencies (a blocking connection for BullMQ, a command connection for
 * the cache and refresh events, a queue connection for the `sns_queue_jobs` gauge) and starts it.
 *
 * @param opts.serveMetrics serve `/metrics` on `WORKER_METRICS_PORT` (true for the worker roles).
 * @param opts.lookup DNS resolution for RPC connections (tests stage DNS rebinding with it).
 */
export async function startWorker(
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: { serveMetrics: boolean; lookup?: LookupFunction },
): Promise<WorkerRuntime> {
  const workerConnection = createRedis(config, 'worker', 'worker');
  const command = createRedis(config, 'command', 'worker');
  const queueConnection = createRedis(config, 'queue', 'worker');
  for (const conn of [workerConnection, command, queueConnection]) {
    conn.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  }
  const endpoints = new EndpointSelector(config);
  const agents = new Agents({ lookup: opts.lookup });
  const rpc = new RpcClient({
    metrics,
    agents,
    timeoutMs: config.RPC_TIMEOUT_MS,
    retries: config.RPC_RETRIES,
    maxResponseBytes: config.RPC_MAX_RESPONSE_BYTES,
    costs: config.RPC_CREDITS,
    isTrusted: (endpoint) =>
      endpoint.kind === 'default' || endpoints.isAllowlisted(new URL(endpoint.url)),
  });
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_SECONDS * 1000,
    config.CACHE_STALE_SECONDS * 1000,
  );
  const queue = createRefreshQueue(queueConnection, config);
  queue.on('error', (err) => logger.warn({ err: err.message }, 'refresh queue error'));
  const freshMs = config.CACHE_FRESH_SECONDS * 1000;
  const hotScan =
    config.HOT_KEYS_TOP_N > 0 && config.RPC_URL
      ? () =>
          runHotScan({
            redis: command,
            cache,
            queue,
            prefix: config.QUEUE_PREFIX,
            freshMs,
            topN: config.HOT_KEYS_TOP_N,
            defaultEndpointId: endpointId(config.RPC_URL as string),
          })
      : undefined;
  const worker = createRefreshWorker(workerConnection, config, {
    rpc,
    cache,
    publisher: command,
    prefix: config.QUEUE_PREFIX,
    metrics,
    logger,
    defaultRpcUrl: config.RPC_URL,
    hotScan,
  });
  if (hotScan) {
    await scheduleHotScans(queue, freshMs).catch((err: unknown) =>
      logger.warn({ err }, 'could not schedule hot-parent scans (retried at next start)'),
    );
  }
  metrics.setQueueCountsSource(() => queue.getJobCounts('waiting', 'active', 'delayed', 'failed'));
  const server = opts.serveMetrics
    ? await startMetricsServer(metrics.registry, config.WORKER_METRICS_PORT, config.HOST)
    : undefined;
  if (!config.RPC_URL)
    logger.warn('RPC_URL is not set: refreshes of the default endpoint will fail');

  let closed: Promise<void> | undefined;
  return {
    metricsPort: server?.port,
    close() {
      closed ??= (async () => {
        // Graceful: wait for the active jobs, but not past the shutdown bound (BullMQ's close can
        // also hang right after a Redis restart, taskforcesh/bullmq#4656). A job cut short is
        // stalled, and another worker takes it over once its lock expires: nothing is lost.
        const graceful = await Promise.race([
          worker.close().then(() => true),
          sleep(config.SHUTDOWN_TIMEOUT_MS * 0.8, false, { ref: false }),
        ]);
        if (!graceful) {
          logger.warn('active jobs did not finish in time: closing the worker without them');
          await Promise.race([worker.close(true), sleep(1_000, undefined, { ref: false })]);
        }
        await server?.close();
        await queue.close().catch(() => undefined);
        await Promise.all([workerConnection, command, queueConnection].map(closeRedis));
        agents.destroy();
        await closeDiscovery();
      })();
      return closed;
    },
  };
}
