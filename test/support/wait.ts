/**
 * How the suites wait. Whatever happens asynchronously is waited for by its condition, bounded
 * ({@link waitFor}, {@link until}: vitest's `vi.waitFor`), never by a fixed sleep: a fixed sleep is
 * too short on a loaded machine and too long on an idle one. {@link elapse} is for the one other
 * case, where the passing of wall-clock time is itself what is tested (an expiry, a rate window,
 * a bound that must not be crossed early).
 */
import { setTimeout as timer } from 'node:timers/promises';
import { vi } from 'vitest';

/**
 * Polls `check` (every `intervalMs`) until it returns true.
 *
 * @throws after `timeoutMs`, naming `what`, with the last error `check` threw if any.
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
  intervalMs = 25,
): Promise<void> {
  await until(async () => ((await check()) ? true : undefined), what, timeoutMs, intervalMs);
}

/**
 * Polls `check` (every `intervalMs`) until it returns a value other than undefined.
 *
 * @returns that value.
 * @throws after `ms`, naming `what`.
 */
export async function until<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 3000,
  intervalMs = 5,
): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await check();
      if (value === undefined) throw new Error(`${what} not met within ${ms} ms`);
      return value;
    },
    { timeout: ms, interval: intervalMs },
  );
}

/**
 * Lets `ms` of wall-clock time pass, for a test whose subject is time itself: an entry that must
 * have expired, a window that must have rolled over, nothing that may happen before a bound.
 * Never a way to wait for something to happen: that is {@link waitFor}.
 */
export const elapse = (ms: number): Promise<void> => timer(ms);

/**
 * Waits, bounded, for `promise` to settle (a process to exit, a server to close): the one wait
 * on an event that is a promise already, so nothing is polled.
 *
 * @returns what `promise` resolves with.
 * @throws what it rejects with; or, when it is still pending after `ms`, an error naming `what`.
 */
export async function settled<T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let bound: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    bound = setTimeout(() => reject(new Error(`${what} not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(bound);
  }
}
