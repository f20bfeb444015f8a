/**
 * Reads a run at a time begun before a read in runs gives way to its fallback: an entry that
 * changes between runs this often is changing faster than it can be read so (docs/design.md,
 * "The subdomain cache" and "`/details` views").
 */
const TRIES = 3;

/** A read of one try that saw the entry's head move between two of its runs. */
const MOVED = Symbol('moved');

/** What one try of a read in runs does with its runs: begun anew for each try. */
export type RunTaker<R, T> = {
  /**
   * Takes a run read at the revision of the try's first (the first run included).
   * @returns how many items the run held (fewer than a run's size: it was the entry's last), or
   *   null to end the whole read with null (a member it cannot read, say).
   */
  take(run: R): number | null;
  /** What the try made of its runs, once the last is taken. */
  done(): T;
};

/**
 * A run as {@link runsOfOneRevision} reads it: the entry's head as it was when the run was read,
 * and, when the run's read can tell, how many items the entry held then.
 */
export type Run<H> = {
  readonly head: H;
  /**
   * The entry's items at the run's revision: a run reaching that many is known to be the last, so
   * an entry of a whole number of runs is read without a run past its end.
   */
  readonly total?: number;
};

/** How {@link runsOfOneRevision} reads an entry: what a run is, and what is made of the runs. */
export type RunsRead<H, R extends Run<H>, T> = {
  /** Items a run asks for (at least 1): a run that holds fewer is the entry's last. */
  readonly size: number;
  /**
   * One round trip: `size` items of the entry from index `start`, with the entry's head as it was
   * when they were read (one atomic step: one revision), and the entry's `total` if it knows. Its errors end the read (they propagate).
   * @returns null without an entry: the read ends with null.
   */
  readonly run: (start: number, size: number) => Promise<R | null>;
  /** Whether two heads are of one revision of the entry. */
  readonly sameHead: (a: H, b: H) => boolean;
  /**
   * A try's taker, from the head of its first run.
   * @returns null to end the read with null (an unreadable head, say).
   */
  readonly begin: (head: H) => RunTaker<R, T> | null;
  /**
   * What a read comes to when the head moved in each of its tries: the entry read in one step, or
   * null to give it up. Called at most once, after the last try.
   */
  readonly fallback: () => Promise<T | null>;
};

/**
 * Reads a large entry a run at a time, every run of one revision, so that no step holds the event
 * loop (or Redis) for long while the result is still of one revision, as a read in one step
 * would be. Each run carries the entry's head; a head that moved since the try's first run begins
 * the read again from index 0 with a fresh taker, and after {@link TRIES} tries that each saw it
 * move the read comes to `read.fallback()`. Runs are read one after another from index 0, `size`
 * apart, until one holds fewer than `size` items or reaches the entry's `total`: a try of n items
 * costs ⌊n / size⌋ + 1 round trips (⌈n / size⌉, at least 1, when runs tell the total), one that
 * saw the head move stops at the run that showed it.
 *
 * @returns what the last try's taker made (`done`), null when a run found no entry or `begin` or
 *   `take` ended the read, or what the fallback came to.
 * @throws whatever `read.run`, the taker or the fallback throws, as it is.
 */
export async function runsOfOneRevision<H, R extends Run<H>, T>(
  read: RunsRead<H, R, T>,
): Promise<T | null> {
  for (let tried = 0; tried < TRIES; tried++) {
    const got = await oneTry(read);
    if (got !== MOVED) return got;
  }
  return read.fallback();
}

/** One try of {@link runsOfOneRevision}: what it made, null, or {@link MOVED}. */
async function oneTry<H, R extends Run<H>, T>(
  read: RunsRead<H, R, T>,
): Promise<T | null | typeof MOVED> {
  let first: { head: H; taker: RunTaker<R, T> } | undefined;
  for (let start = 0; ; start += read.size) {
    const run = await read.run(start, read.size);
    if (run === null) return null;
    if (!first) {
      const taker = read.begin(run.head);
      if (!taker) return null;
      first = { head: run.head, taker };
    } else if (!read.sameHead(first.head, run.head)) {
      return MOVED;
    }
    const taken = first.taker.take(run);
    if (taken === null) return null;
    if (taken < read.size || (run.total !== undefined && start + taken >= run.total)) {
      return first.taker.done();
    }
  }
}
