import closeWithGrace from 'close-with-grace';
import { pino, type Logger } from 'pino';

/** One thing to close on shutdown (`api`, `worker`), in the order they were added. */
export type ShutdownStep = { name: string; close: () => Promise<void> };

export type Shutdown = {
  /** Adds a step; steps close in the order added (the API first: stop taking requests). */
  add(step: ShutdownStep): void;
};

/**
 * Runs every step in order, each even when one before it failed, threw or ran past `stepMs`, and
 * logs each failure. A step past its bound is left running, unawaited: the close goes on.
 *
 * @param stepMs the bound of one step, in milliseconds (none if absent).
 * @returns true when every step succeeded in time.
 */
export async function closeSteps(
  steps: readonly ShutdownStep[],
  logger: Logger,
  stepMs?: number,
): Promise<boolean> {
  let ok = true;
  for (const step of steps) {
    let timer: NodeJS.Timeout | undefined;
    try {
      const closing = (async () => step.close())();
      await (stepMs === undefined
        ? closing
        : Promise.race([
            closing,
            new Promise<never>((_, reject) => {
              timer = setTimeout(
                () => reject(new Error(`did not close within ${stepMs} ms`)),
                stepMs,
              ).unref();
            }),
          ]));
    } catch (err) {
      ok = false;
      logger.error({ err, step: step.name }, 'shutdown step failed');
    } finally {
      clearTimeout(timer);
    }
  }
  return ok;
}

/**
 * Ends the process now: SIGKILL on itself, the one exit nothing in the process can hold up
 * (`process.exit()` waits for worker threads, and one inside a long `JSON.parse` does not stop).
 * The line is written synchronously by a logger of its own, so the kill cannot lose it.
 */
function exitNow(logger: Logger, fields: Record<string, unknown>, msg: string): never {
  pino({ level: logger.level }, pino.destination({ dest: 1, sync: true })).fatal(fields, msg);
  process.kill(process.pid, 'SIGKILL');
  // Not reached (SIGKILL cannot be caught); satisfies `never` should the kill be refused.
  process.exit(1);
}

/**
 * A repeat of the first signal within this many milliseconds is the same request, not a second
 * one: Ctrl-C on `npm start` reaches the gateway twice (from the terminal to the whole process
 * group, and forwarded by npm a few milliseconds later), as a process manager that signals a
 * whole group does.
 */
export const SAME_SIGNAL_MS = 500;

/**
 * Installs the shutdown handlers (close-with-grace; docs/design.md, "Shutdown, liveness and
 * readiness"): call it before connecting anything. SIGTERM, SIGINT and an uncaught exception run
 * every step in order ({@link closeSteps}); exit 0 when all closed, 1 otherwise. SIGHUP is logged
 * and ignored ({@link ignoreHangup}). A
 * second signal (not the first repeated within {@link SAME_SIGNAL_MS}), or `timeoutMs` without the
 * steps done, ends it at once ({@link exitNow}). Unhandled rejections are left to the caller.
 */
export function installShutdown(logger: Logger, timeoutMs: number): Shutdown {
  const steps: ShutdownStep[] = [];
  let first: { signal: string | undefined; at: number } | undefined;
  const grace = closeWithGrace(
    {
      delay: timeoutMs,
      // Failures are logged here, with pino; the library would write to the console.
      logger: false,
      // SIGINT and SIGTERM are handled below, to tell a repeated signal from a second one; SIGHUP
      // does not stop the gateway at all.
      skip: ['unhandledRejection', 'SIGINT', 'SIGTERM', 'SIGHUP'],
      onSecondSignal: (signal) => exitNow(logger, { signal }, 'second signal: exiting now'),
      onTimeout: (delay) => exitNow(logger, { timeoutMs: delay }, 'shutdown timed out: exiting'),
    },
    async ({ signal, err }) => {
      first ??= { signal, at: Date.now() };
      if (err) logger.fatal({ err }, 'uncaught exception: shutting down');
      else logger.info({ signal: first.signal }, 'shutting down');
      if (!(await closeSteps(steps, logger))) throw new Error('shutdown failed');
      if (!err) logger.info('shut down cleanly');
    },
  );
  const onSignal = (signal: NodeJS.Signals) => {
    if (!first) {
      first = { signal, at: Date.now() };
      grace.close();
    } else if (signal !== first.signal || Date.now() - first.at >= SAME_SIGNAL_MS) {
      exitNow(logger, { signal }, 'second signal: exiting now');
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  ignoreHangup(logger);
  return { add: (step) => steps.push(step) };
}

/**
 * SIGHUP is logged and otherwise ignored. It is what logrotate's `kill -HUP` and a closed terminal
 * send; the gateway writes its log to stdout (the supervisor owns the file, so there is nothing to
 * reopen), and stopping on it, even cleanly, would take the gateway down where a supervisor
 * restarts only failures (`Restart=on-failure`).
 */
function ignoreHangup(logger: Logger): void {
  process.on('SIGHUP', () =>
    logger.info(
      { signal: 'SIGHUP' },
      'SIGHUP ignored: the log goes to stdout, nothing to reopen; SIGTERM stops the gateway',
    ),
  );
}
