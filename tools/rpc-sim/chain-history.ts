/**
 * The chain's recent past: a log of slot moves and of written accounts' prior versions, kept for
 * a retention, from which `SimChain.asOf(age)` rebuilds the chain as it was (a lagging node).
 */
import type { ChainView, MemcmpHint, StoredAccount } from './chain-view.js';

/** Dropped head entries before a log is compacted. */
export const COMPACT_AFTER = 1024;

interface SlotEntry {
  readonly time: number;
  readonly slotBefore: number;
}

interface WriteEntry {
  readonly time: number;
  readonly key: string;
  readonly previous: StoredAccount | undefined;
}

/** The logs `asOf` reads; with a retention of 0 (the default) nothing is logged. */
export class ChainHistory {
  #retentionMs = 0;
  #slotLog: SlotEntry[] = [];
  #slotHead = 0;
  #writeLog: WriteEntry[] = [];
  #writeHead = 0;

  /** ms of history kept; 0: none. */
  get retentionMs(): number {
    return this.#retentionMs;
  }

  /**
   * Keeps what `asOf(age)` needs for `age <= ms` from now on; 0 stops and drops the logs.
   * @throws TypeError unless ms is a finite number >= 0.
   */
  retain(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`history retention must be a finite number >= 0, got ${ms}`);
    }
    this.#retentionMs = ms;
    if (ms === 0) {
      this.#slotLog = [];
      this.#slotHead = 0;
      this.#writeLog = [];
      this.#writeHead = 0;
    }
  }

  /** Logs that the slot moved on from `slotBefore` at `time` (ms); nothing when none is kept. */
  slotMoved(time: number, slotBefore: number): void {
    if (this.#retentionMs === 0) return;
    this.#slotLog.push({ time, slotBefore });
    this.#prune(time);
  }

  /** Logs a write of `key` at `time` (ms), `previous` its version before. */
  wrote(time: number, key: string, previous: StoredAccount | undefined): void {
    if (this.#retentionMs > 0) this.#writeLog.push({ time, key, previous });
  }

  /**
   * `now` as it was `ageMs` before `nowMs` (later writes undone); the oldest known state for ages
   * past the retention. O(recent writes) to build.
   */
  asOf(now: ChainView, nowMs: number, ageMs: number): ChainView {
    this.#prune(nowMs);
    const time = nowMs - ageMs;
    const slotAt = firstAfter(this.#slotLog, this.#slotHead, time);
    const slot = this.#slotLog[slotAt]?.slotBefore ?? now.slot;
    const writeAt = firstAfter(this.#writeLog, this.#writeHead, time);
    const undone = new Map<string, StoredAccount | undefined>();
    // Oldest first: the version before the earliest later write is the one of `time`.
    for (let i = writeAt; i < this.#writeLog.length; i++) {
      const entry = this.#writeLog[i];
      if (entry && !undone.has(entry.key)) undone.set(entry.key, entry.previous);
    }
    return undone.size === 0 ? new PastView(now, slot, undefined) : new PastView(now, slot, undone);
  }

  /** Drops log entries older than now - retention. */
  #prune(now: number): void {
    const cutoff = now - this.#retentionMs;
    while ((this.#slotLog[this.#slotHead]?.time ?? Infinity) <= cutoff) this.#slotHead++;
    while ((this.#writeLog[this.#writeHead]?.time ?? Infinity) <= cutoff) this.#writeHead++;
    if (this.#slotHead > COMPACT_AFTER && this.#slotHead * 2 > this.#slotLog.length) {
      this.#slotLog = this.#slotLog.slice(this.#slotHead);
      this.#slotHead = 0;
    }
    if (this.#writeHead > COMPACT_AFTER && this.#writeHead * 2 > this.#writeLog.length) {
      this.#writeLog = this.#writeLog.slice(this.#writeHead);
      this.#writeHead = 0;
    }
  }
}

/** The chain as it was: `undone` holds earlier versions (undefined: absent then). */
class PastView implements ChainView {
  constructor(
    readonly chain: ChainView,
    readonly slot: number,
    readonly undone: ReadonlyMap<string, StoredAccount | undefined> | undefined,
  ) {}

  lookup(key: string): StoredAccount | undefined {
    if (this.undone?.has(key)) return this.undone.get(key);
    return this.chain.lookup(key);
  }

  ownedBy(programKey: string): Iterable<StoredAccount> {
    return this.#past(programKey, this.chain.ownedBy(programKey));
  }

  candidates(programKey: string, hints: readonly MemcmpHint[]): Iterable<StoredAccount> {
    return this.#past(programKey, this.chain.candidates(programKey, hints));
  }

  /** `now` less what was written since, plus the earlier versions of those (owned by the program). */
  *#past(programKey: string, now: Iterable<StoredAccount>): Iterable<StoredAccount> {
    const { undone } = this;
    for (const account of now) {
      if (!undone?.has(account.key)) yield account;
    }
    if (!undone) return;
    for (const account of undone.values()) {
      if (account?.ownerKey === programKey) yield account;
    }
  }
}

/** First index at or after `from` with a later `time` (log sorted by time). */
function firstAfter(log: ReadonlyArray<{ time: number }>, from: number, time: number): number {
  let lo = from;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid]?.time ?? Infinity) > time) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
