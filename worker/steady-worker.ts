import { Worker, type Job } from 'bullmq';

/** The first wait after a failed fetch, in milliseconds; it doubles with each failure in a row. */
const FETCH_BACKOFF_MIN_MS = 100;
/** The longest wait between failed fetches, in milliseconds. */
const FETCH_BACKOFF_MAX_MS = 5_000;

/**
 * A BullMQ `Worker` whose failed fetch of the next job waits before it fails again, from
 * {@link FETCH_BACKOFF_MIN_MS} doubling to {@link FETCH_BACKOFF_MAX_MS}; a success resets it and
 * closing ends it. Without it a refused command makes BullMQ's fetch loop spin without yielding
 * (docs/design.md, "Shutdown, liveness and readiness").
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
