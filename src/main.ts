import { Registry } from 'prom-client';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { createMetrics } from './metrics/metrics.js';
import { startApi, type ApiRuntime } from './runtime/api.js';

/**
 * The entry file: parse the configuration, connect, listen, and shut down gracefully. `ROLE`
 * picks the API, the worker, or both in one process (`all`, what `npm start` runs).
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sns-gateway: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.LOG_LEVEL);
  const metrics = createMetrics(new Registry());
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));

  const closers: Array<() => Promise<void>> = [];
  let api: ApiRuntime | undefined;
  let worker: WorkerRuntime | undefined;
  if (config.ROLE !== 'worker') {
    api = await startApi(config, metrics, logger);
    closers.push(() => api!.close());
  }
  if (config.ROLE !== 'api') {
    worker = await startWorker(config, metrics, logger, { serveMetrics: true });
    closers.push(() => worker!.close());
  }
  logger.info(
    {
      role: config.ROLE,
      port: api ? config.PORT : undefined,
      workerMetricsPort: worker?.metricsPort,
      rpc: config.RPC_URL ? 'configured' : 'unset',
    },
    'sns-gateway started',
  );

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error({ timeoutMs: config.SHUTDOWN_TIMEOUT_MS }, 'shutdown timed out: exiting');
      process.exit(1);
    }, config.SHUTDOWN_TIMEOUT_MS);
    force.unref();
    // API first (stop taking requests), then the worker (finish active jobs).
    closers
      .reduce((done, close) => done.then(close), Promise.resolve())
      .then(() => {
        logger.info('shut down cleanly');
        process.exit(0);
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(
    `sns-gateway: failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
