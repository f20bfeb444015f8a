/**
 * Background traffic for the simulator: name-program writes under parents nobody asked about, as
 * mainnet's name program sees all day. A follower of the whole program gets a programNotification
 * and a logsNotification for each and should spend nothing on them.
 */
import { randomBytes } from 'node:crypto';
import { PublicKey } from '@solana/web3.js';
import type { SimChain } from './chain.js';

/** Options of `startBackgroundWrites`. */
export interface BackgroundWriteOptions {
  /** Writes per second (> 0). Each is one transaction. */
  perSecond: number;
  /** Parents the writes go under, made at start (default 32), named `bg-<random hex>`. */
  parents?: number;
  /** Most subdomains created; past it writes are transfers and updates only (default 2000). */
  maxNames?: number;
  /** Random numbers in [0, 1) (default `Math.random`); tests can pass a seeded one. */
  random?: () => number;
}

/** A running background writer. */
export interface BackgroundWriter {
  /** Writes made so far (parent creations not counted). */
  readonly count: number;
  /** Parent domains the writes go under (without ".sol"). */
  readonly parents: readonly string[];
  /** Stops writing. Idempotent. @returns `count`. */
  stop(): number;
}

/** How often the writer wakes up to catch up with its rate. */
const TICK_MS = 20;
/** Most writes made in one wake-up, so a stalled event loop does not turn into a burst. */
const MAX_PER_TICK = 500;

/**
 * Writes to `chain` at `perSecond` writes per second, spread evenly: each write is one
 * transaction, a subdomain creation (name account + reverse record), an owner transfer or a data
 * update of a subdomain it created, under one of its own random parents. Every write gives a
 * programNotification (no deletes: those notify nothing) and a logsNotification. The parents
 * are created at once (one transaction each). The timer does not keep the process alive.
 * @throws TypeError unless perSecond is a finite number > 0.
 */
export function startBackgroundWrites(
  chain: SimChain,
  opts: BackgroundWriteOptions,
): BackgroundWriter {
  const { perSecond } = opts;
  if (!Number.isFinite(perSecond) || perSecond <= 0) {
    throw new TypeError(`background writes per second must be > 0, got ${perSecond}`);
  }
  const random = opts.random ?? Math.random;
  const maxNames = opts.maxNames ?? 2000;
  const parents = Array.from({ length: opts.parents ?? 32 }, () => {
    const name = `bg-${randomBytes(6).toString('hex')}`;
    chain.addDomain(name);
    return name;
  });
  const names: PublicKey[] = [];
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  let count = 0;
  const writeOne = (): void => {
    if (names.length === 0 || (names.length < maxNames && random() < 0.5)) {
      const keys = chain.addSubdomain(pick(parents), `w${count}`);
      names.push(keys.subKey);
    } else if (random() < 0.5) {
      chain.transferName(pick(names), new PublicKey(randomBytes(32)));
    } else {
      chain.updateNameData(pick(names), 0, randomBytes(8));
    }
    count++;
  };
  const started = performance.now();
  let skipped = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) * perSecond) / 1000) - count - skipped;
    for (let i = 0; i < Math.min(due, MAX_PER_TICK); i++) writeOne();
    // Far behind (a stalled event loop): drop the backlog rather than burst.
    if (due > MAX_PER_TICK) skipped += due - MAX_PER_TICK;
  }, TICK_MS);
  timer.unref();
  let stopped = false;
  return {
    get count() {
      return count;
    },
    parents,
    stop() {
      if (!stopped) clearInterval(timer);
      stopped = true;
      return count;
    },
  };
}
