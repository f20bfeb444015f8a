/**
 * A process whose shutdown cannot finish, for test/shutdown.test.ts: the shutdown handlers of the
 * entry file (`installShutdown`), one close step that never ends, and a worker thread stuck in a
 * synchronous call that V8's termination request does not interrupt (a child `sleep`, standing
 * for a long `JSON.parse` of a large reply, which holds `process.exit()` the same way). Logs
 * `stuck` once the thread is in that call.
 *
 *   SHUTDOWN_TIMEOUT_MS=1000 STUCK_SECONDS=20 node --import tsx test/support/stuck-shutdown.ts
 */
import { Worker } from 'node:worker_threads';
import { createLogger } from '../../src/core/logger.js';
import { installShutdown } from '../../src/core/runtime/shutdown.js';

const logger = createLogger('info');
const shutdown = installShutdown(logger, Number(process.env.SHUTDOWN_TIMEOUT_MS ?? 1000));
shutdown.add({ name: 'never ends', close: () => new Promise<void>(() => undefined) });
const seconds = Number(process.env.STUCK_SECONDS ?? 20);
const thread = new Worker(
  `require('node:worker_threads').parentPort.postMessage('in');
   require('node:child_process').execFileSync('sleep', ['${seconds}']);`,
  { eval: true },
);
thread.once('message', () => setTimeout(() => logger.info('stuck'), 100));
