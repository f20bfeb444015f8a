/**
 * The gateway's API or worker as a benchmark child (the role is its argument), with nothing else
 * loaded: bench/child.ts in those roles also loads the SDK, the simulator and the bench's own
 * libraries, and runs under `tsx`, all of which count in its RSS. Compiled with the build
 * (`npm run bench:build` writes dist/bench/gateway-child.js), it is what `BENCH_CODE=dist` runs
 * (bench/lib.ts `Child.start`), so a figure of the compiled build is the gateway's own. It answers
 * the IPC commands of bench/child.ts that a gateway's measures use: `stats`, `resetLoop`, `stop`.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { startApi } from '../src/api/runtime.js';
import { loadConfig } from '../src/core/config.js';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { startWorker } from '../worker/runtime.js';

const loop = monitorEventLoopDelay({ resolution: 5 });
loop.enable();

/** Answers the bench's requests by id, then says it is ready with `ready`. */
function serve(ready: { port?: number }, close: () => Promise<void>): void {
  process.on('message', (msg: { id: number; cmd: string }) => {
    const answer = async (): Promise<unknown> => {
      switch (msg.cmd) {
        case 'stats': {
          const cpu = process.cpuUsage();
          return {
            rss: process.memoryUsage().rss,
            cpuUs: cpu.user + cpu.system,
            loopMaxMs: loop.max / 1e6,
            loopP99Ms: loop.percentile(99) / 1e6,
          };
        }
        case 'resetLoop':
          loop.reset();
          return null;
        case 'stop':
          await close();
          setImmediate(() => process.exit(0));
          return null;
        default:
          throw new Error(`unknown command ${msg.cmd}`);
      }
    };
    answer().then(
      (result) => process.send?.({ id: msg.id, result }),
      (err: unknown) => process.send?.({ id: msg.id, error: String(err) }),
    );
  });
  process.send?.({ ready });
}

const role = process.argv[2];
const config = loadConfig(process.env);
const logger = createLogger(config.LOG_LEVEL);
const metrics = createMetrics(new Registry());
if (role === 'api') {
  const api = await startApi(config, metrics, logger);
  const address = api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('not listening on TCP');
  serve({ port: address.port }, () => api.close());
} else if (role === 'worker') {
  const worker = await startWorker(config, metrics, logger, { serveMetrics: true });
  serve({ port: worker.metricsPort }, () => worker.close());
} else {
  throw new Error(`gateway-child: no role ${String(role)} (api or worker)`);
}
