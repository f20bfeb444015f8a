import { Worker, type Job } from 'bullmq';

/** The first wait after a failed fetch, in milliseconds; it doubles with each failure in a row. */
export const FETCH_BACKOFF_MIN_MS = 100;
/** The longest wait between failed fetches, in milliseconds. */
export const FETCH_BACKOFF_MAX_MS = 5_000;

/**
 * A BullMQ `Worker` whose fetch of the next job waits before it fails again. BullMQ's fetch loop
 * retries a failed fetch at once when the error is not a lost connection (a refusal: `NOPERM`,
 * `OOM`, a script error), and when the connection's set-up has failed (its `INFO` refused) every
 * fetch fails without any I/O: the loop then never yields to the event loop, and the process
 * spins at full CPU, deaf to requests, timers and signals. Here each failure in a row waits
 * twice as long as the one before, from {@link FETCH_BACKOFF_MIN_MS} to
 * {@link FETCH_BACKOFF_MAX_MS}, then fails as before (the 'error' event, the loop goes on); a
 * fetch that succeeds resets the wait, and closing the worker ends it at once.
 */
export class SteadyWorker<DataType, ResultType> extends Worker<DataType, ResultType> {
  /** Fetches failed in a row (set lazily: the base constructor may start the loop). */
  private fetchFailures?: number;
  private closingSignal?: AbortController;

  /** True while the last fetch of a job failed (none has succeeded since): the worker takes none. */
  get fetchFailing(): boolean {
    return (this.fetchFailures ?? 0) > 0;
  }

  protected override async moveToActive(
    token: string,
    name?: string,
  ): Promise<Job<DataType, ResultType>> {
    try {
      const job = await super.moveToActive(token, name);
      this.fetchFailures = 0;
      return job;
    } catch (err) {
      const failures = (this.fetchFailures ?? 0) + 1;
      this.fetchFailures = failures;
      await this.waitOrClose(
        Math.min(FETCH_BACKOFF_MIN_MS * 2 ** (failures - 1), FETCH_BACKOFF_MAX_MS),
      );
      throw err;
    }
  }

  /** Waits `ms` milliseconds, or until the worker starts closing. */
  private waitOrClose(ms: number): Promise<void> {
    if (!this.closingSignal) {
      const controller = new AbortController();
      this.closingSignal = controller;
      this.once('closing', () => controller.abort());
    }
    const signal = this.closingSignal.signal;
    if (signal.aborted || this.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done);
    });
  }
}
