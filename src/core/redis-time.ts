import type { RedisClient } from './redis.js';

/** How long a process's start waits for its first measure of Redis's clock. */
export const CLOCK_START_WAIT_MS = 1_000;
/** `TIME` round trips per measure; the shortest one is kept. */
const SAMPLES = 3;
/** How soon a first measure that failed is tried again. */
const FIRST_RETRY_MS = 1_000;
/** How often the offset to Redis's clock is measured again. */
const REDIS_TIME_EVERY_MS = 60_000;

/**
 * One clock for every process of a deployment: Redis's (`TIME`), read through this process's own.
 * Freshness compares times written by one process with times read by another (a scan's
 * `fetchedAt` with the stream owner's `epoch`, the owner's `healthyUntil` with an API process's
 * now; docs/design.md, "Freshness"); on two machines' clocks a skew of 30 s would keep a dead
 * stream trusted 30 s longer. Each process measures the offset of Redis's clock to its own
 * (`TIME`, corrected by half the round trip) and adds it, so all of them read Redis's clock
 * within their round trip to it.
 *
 * Until a first measure succeeds the offset is 0 (the process's clock); a failed measure keeps the
 * last offset.
 */
export class RedisTime {
  private offset = 0;
  private measured = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly local: () => number;

  /**
   * @param redis a command connection.
   * @param local this process's clock, Unix ms (tests skew it).
   */
  constructor(
    private readonly redis: Pick<RedisClient, 'time'>,
    local: () => number = Date.now,
  ) {
    this.local = local;
  }

  /** Redis's clock now, Unix ms, as this process reads it. Synchronous. */
  readonly now = (): number => Math.round(this.local() + this.offset);

  /** Redis's clock minus this process's, in ms, as last measured. */
  get offsetMs(): number {
    return this.offset;
  }

  /**
   * Measures the offset once.
   * @throws what the `TIME` call throws.
   */
  async sync(): Promise<void> {
    // The sample of the shortest round trip wins: a reply read late (a busy event loop, a slow
    // network) would put the clock off by half the delay.
    let best: { rtt: number; offset: number } | undefined;
    for (let i = 0; i < SAMPLES; i++) {
      const before = this.local();
      const [seconds, micros] = await this.redis.time();
      const after = this.local();
      const redisMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      if (!Number.isFinite(redisMs)) continue;
      const rtt = after - before;
      if (!best || rtt < best.rtt) best = { rtt, offset: redisMs - (before + after) / 2 };
    }
    if (!best) return;
    this.offset = best.offset;
    this.measured = true;
  }

  /**
   * Measures now and every `everyMs` ({@link REDIS_TIME_EVERY_MS}) in the background, every
   * second until a first measure succeeds (a connection not ready yet refuses it); failed measures
   * go to `onError`. Never holds the process open.
   */
  start(everyMs = REDIS_TIME_EVERY_MS, onError: (err: unknown) => void = () => undefined): void {
    if (this.timer) return;
    const measure = () => {
      this.sync().then(
        () => {
          this.measured = true;
          schedule(everyMs);
        },
        (err: unknown) => {
          if (this.measured) onError(err);
          schedule(this.measured ? everyMs : FIRST_RETRY_MS);
        },
      );
    };
    const schedule = (ms: number) => {
      if (!this.timer) return;
      this.timer = setTimeout(measure, ms);
      this.timer.unref();
    };
    this.timer = setTimeout(measure, 0);
    this.timer.unref();
  }

  /**
   * Measures once, waiting at most `ms`: a process starting while Redis is away goes on with the
   * last offset (0 at first), and the background measures correct it.
   */
  async syncWithin(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      const done = await Promise.race([
        this.sync().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), left);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
      if (done) return;
      // A connection not ready yet refuses at once: ask again shortly.
      await new Promise((resolve) => setTimeout(resolve, 50).unref());
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
