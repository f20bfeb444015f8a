import closeWithGrace from 'close-with-grace';
import type { Logger } from 'pino';

/** One thing to close on shutdown (`api`, `worker`), in the order they were added. */
export type ShutdownStep = { name: string; close: () => Promise<void> };

export type Shutdown = {
  /** Adds a step; steps close in the order added (the API first: stop taking requests). */
  add(step: ShutdownStep): void;
};

/**
 * Runs every step in order, each even when one before it failed or threw, and logs each failure.
 *
 * @returns true when every step succeeded.
 */
export async function closeSteps(steps: readonly ShutdownStep[], logger: Logger): Promise<boolean> {
  let ok = true;
  for (const step of steps) {
    try {
      await step.close();
    } catch (err) {
      ok = false;
      logger.error({ err, step: step.name }, 'shutdown step failed');
    }
  }
  return ok;
}

/**
 * Installs the shutdown handlers (close-with-grace): call it before connecting anything, so a
 * signal during start-up (Redis unreachable, the API still waiting for it) ends the process
 * cleanly too. On SIGTERM, SIGINT, SIGHUP (and an uncaught exception) the steps close in order,
 * every one of them (see {@link closeSteps}); the process exits 0 when all closed, 1 when one
 * failed or after an uncaught exception. A second signal, or `timeoutMs` milliseconds without the
 * steps done, ends it at once (exit 1). Unhandled rejections are left to the caller.
 */
export function installShutdown(logger: Logger, timeoutMs: number): Shutdown {
  const steps: ShutdownStep[] = [];
  closeWithGrace(
    {
      delay: timeoutMs,
      // Failures are logged here, with pino; the library would write to the console.
      logger: false,
      skip: ['unhandledRejection'],
      onSecondSignal: (signal) => logger.fatal({ signal }, 'second signal: exiting now'),
      onTimeout: (delay) => logger.fatal({ timeoutMs: delay }, 'shutdown timed out: exiting'),
    },
    async ({ signal, err }) => {
      if (err) logger.fatal({ err }, 'uncaught exception: shutting down');
      else logger.info({ signal }, 'shutting down');
      if (!(await closeSteps(steps, logger))) throw new Error('shutdown failed');
      if (!err) logger.info('shut down cleanly');
    },
  );
  return { add: (step) => steps.push(step) };
}
