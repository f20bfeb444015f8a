/**
 * Name-program writes under parents nobody asked about, as mainnet sees all day: a follower of
 * the whole program is notified of each and should spend nothing on them.
 */
import { randomBytes } from 'node:crypto';
import { PublicKey } from '@solana/web3.js';
import type { SimChain } from './chain.js';

/** Options of `startBackgroundWrites`. */
export interface BackgroundWriteOptions {
  /** > 0; one transaction each. */
  perSecond: number;
  /** Made at start (default 32), `bg-<hex>`. */
  parents?: number;
  /** Subdomains created at most (default 2000); then transfers and updates only. */
  maxNames?: number;
  /** In [0, 1), default `Math.random`; tests pass a seeded one. */
  random?: () => number;
}

/** A running background writer. */
export interface BackgroundWriter {
  /** Parent creations not counted. */
  readonly count: number;
  /** Without ".sol". */
  readonly parents: readonly string[];
  /** Makes the writes due by now, then stops; idempotent; returns `count`. */
  stop(): number;
}

const TICK_MS = 20;
/** Cap per wake-up, so a stalled event loop does not become a burst. */
const MAX_PER_TICK = 500;

/**
 * Writes at `perSecond`, evenly: creations, transfers or updates of its own subdomains under its
 * own parents, each notified (no deletes: those notify nothing). The timer is unref'd.
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
  const catchUp = () => {
    const due = Math.floor(((performance.now() - started) * perSecond) / 1000) - count - skipped;
    for (let i = 0; i < Math.min(due, MAX_PER_TICK); i++) writeOne();
    // Far behind: drop the backlog rather than burst.
    if (due > MAX_PER_TICK) skipped += due - MAX_PER_TICK;
  };
  const timer = setInterval(catchUp, TICK_MS);
  timer.unref();
  let stopped = false;
  return {
    get count() {
      return count;
    },
    parents,
    stop() {
      // The writes due by now first: a stalled event loop may have run no tick for a while, and
      // the count is then the rate times the time it ran.
      if (!stopped) {
        catchUp();
        clearInterval(timer);
      }
      stopped = true;
      return count;
    },
  };
}
