/**
 * The gateway's API or worker as a benchmark child (the role is its argument), with nothing else
 * loaded: bench/child.ts in those roles also loads the SDK, the simulator and the bench's own
 * libraries, and runs under `tsx`, all of which count in its RSS. Compiled with the build
 * (`npm run bench:build` writes dist/bench/gateway-child.js), it is what `BENCH_CODE=dist` runs
 * (bench/lib.ts `Child.start`), so a figure of the compiled build is the gateway's own;
 * bench/child.ts loads it for those roles under `tsx`. It answers the IPC commands every child
 * does (bench/gateway-ipc.ts), and no others.
 */
import { Registry } from 'prom-client';
import { startApi } from '../src/api/runtime.js';
import { loadConfig } from '../src/core/config.js';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { startWorker } from '../worker/runtime.js';
import { noCommands, portOf, serve } from './gateway-ipc.js';

const role = process.argv[2];
const config = loadConfig(process.env);
const logger = createLogger(config.LOG_LEVEL);
const metrics = createMetrics(new Registry());
if (role === 'api') {
  const api = await startApi(config, metrics, logger);
  serve({ port: portOf(api.app.server) }, noCommands, () => api.close());
} else if (role === 'worker') {
  // Its /metrics on WORKER_METRICS_PORT (0 in gatewayEnv: an ephemeral port), as in production:
  // bench/freshness.ts reads the RPC credits the worker counted there.
  const worker = await startWorker(config, metrics, logger, { serveMetrics: true });
  serve({ port: worker.metricsPort }, noCommands, () => worker.close());
} else {
  throw new Error(`gateway-child: no role ${String(role)} (api or worker)`);
}
