import { Registry } from 'prom-client';
import { startWorker, type WorkerRuntime } from './worker/runtime.js';
import { ConfigError, loadConfig } from './src/core/config.js';
import { createLogger } from './src/core/logger.js';
import { createMetrics } from './src/core/metrics.js';
import { createRedisErrorLog } from './src/core/redis.js';
import { checkRedisAtStart } from './src/core/redis-permissions.js';
import { REDIS_START_WAIT_MS, startApi, type ApiRuntime } from './src/api/runtime.js';
import { checkNameTables, NameTablesError } from './src/api/sns/name-tables.js';
import { installShutdown } from './src/core/runtime/shutdown.js';

/**
 * The entry file: parse the configuration, connect, listen, and shut down gracefully. `ROLE`
 * picks the API, the worker, or both in one process (`all`, what `npm start` runs). It sits at
 * the root, above src/api/ and worker/, because it wires both: neither imports the other,
 * and both build on src/core/ (docs/design.md, "Shape").
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
    // Before waiting on Redis: a Node that would derive other keys is refused at once (startApi
    // checks again, for free).
    if (config.ROLE !== 'worker') checkNameTables();
  } catch (err) {
    if (err instanceof ConfigError || err instanceof NameTablesError) {
      process.stderr.write(`sns-gateway: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.LOG_LEVEL);
  const metrics = createMetrics(new Registry());
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
  // Before connecting anything: start-up can wait on Redis, and a signal then must end it cleanly.
  // API first (stop taking requests), then the worker (finish active jobs).
  const shutdown = installShutdown(logger, config.SHUTDOWN_TIMEOUT_MS);
  // One rate-limited log of Redis errors for every connection of the process.
  const redisErrors = createRedisErrorLog(logger);
  // The Redis user's permissions, before anything uses them: a missing command is an error naming
  // it, here, not a queue failing later (docs/operations.md, "Redis permissions"). Its wait for Redis counts
  // toward the API's.
  const checkStarted = Date.now();
  const redisAccess = await checkRedisAtStart(config, logger, redisErrors, REDIS_START_WAIT_MS);
  const redisStartWaitMs = Math.max(0, REDIS_START_WAIT_MS - (Date.now() - checkStarted));
  if (!config.RPC_URL) {
    // Configuration, not a fault: said once here, and each such request is logged at debug only.
    logger.warn(
      'RPC_URL is not set: /subdomains answers 500 to requests without ?rpc=. To try the gateway ' +
        'without a Solana RPC provider, run `npm run rpc:sim` and set RPC_URL=http://127.0.0.1:8899',
    );
  }

  let api: ApiRuntime | undefined;
  let worker: WorkerRuntime | undefined;
  if (config.ROLE !== 'worker') {
    api = await startApi(config, metrics, logger, {
      redisErrors,
      redisAccess,
      redisStartWaitMs,
      // With ROLE=all the worker's port serves the one registry.
      serveMetrics: config.ROLE === 'api',
    });
    shutdown.add({ name: 'api', close: () => api!.close() });
  }
  if (config.ROLE !== 'api') {
    worker = await startWorker(config, metrics, logger, {
      serveMetrics: true,
      redisErrors,
      redisAccess,
    });
    shutdown.add({ name: 'worker', close: () => worker!.close() });
  }
  logger.info(
    {
      role: config.ROLE,
      port: api ? config.PORT : undefined,
      apiMetricsPort: api?.metricsPort,
      workerMetricsPort: worker?.metricsPort,
      rpc: config.RPC_URL ? 'configured' : 'unset',
    },
    'sns-gateway started',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(
    `sns-gateway: failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
