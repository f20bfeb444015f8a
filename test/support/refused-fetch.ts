/**
 * A refresh worker whose every fetch fails, for test/redis-permissions.test.ts: its connection is
 * a Redis user without `INFO`, and BullMQ is not told to skip its version check, so the set-up of
 * the worker's connection fails and every fetch with it, without any I/O. Runs for `RUN_MS`,
 * counting the worker's 'error' events and the ticks of a 100 ms timer, then prints
 * `{"errors":N,"ticks":N}` and exits. A fetch loop that spins starves the timers: nothing is
 * printed, and the test that waits for it fails.
 *
 *   REDIS_URL=redis://user:pw@127.0.0.1:6379 QUEUE_PREFIX=p node --import tsx test/support/refused-fetch.ts
 */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig } from '../../src/core/config.js';
import { createMetrics } from '../../src/core/metrics.js';
import { Registry } from 'prom-client';
import { createRefreshWorker } from '../../worker/refresh-worker.js';
import type { RefreshProcessorDeps } from '../../worker/refresh-processor.js';

const config = loadConfig();
const runMs = Number(process.env.RUN_MS ?? 2_000);
const connection = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null });
let errors = 0;
const worker = createRefreshWorker(
  connection,
  config,
  { name: 'refused-fetch', concurrency: 1, maxPerSecond: 100 },
  {
    // Never called: no job is ever fetched.
    ...({} as RefreshProcessorDeps),
    metrics: createMetrics(new Registry()),
    logger: pino({ level: 'silent' }),
    onError: () => (errors += 1),
  },
);
let ticks = 0;
const timer = setInterval(() => (ticks += 1), 100);
setTimeout(() => {
  clearInterval(timer);
  process.stdout.write(`${JSON.stringify({ errors, ticks })}\n`);
  void worker
    .close(true)
    .catch(() => undefined)
    .finally(() => {
      connection.disconnect();
      process.exit(0);
    });
}, runMs);
