import { describe, expect, it } from 'vitest';
import { runsOfOneRevision, type RunsRead } from '../src/core/cache/runs-of-one-revision.js';

type Head = { rev: number };
type Run = { head: Head; items: string[] | null; total?: number };

/**
 * An entry of `n` items read through the helper, with what it was asked: each run's start, each
 * try's begin, the fallback. The head is a fresh object per run (as a parsed reply's is), so a
 * read holds together only by comparing revisions. `afterRun` may change the entry between runs.
 */
const entryOf = (
  n: number,
  opts: {
    size?: number;
    /** Whether each run tells the entry's count of items (`total`). */
    total?: boolean;
    afterRun?: (start: number, entry: { rev: number; items: string[] | null }) => void;
    fallback?: () => Promise<string[] | null>;
  } = {},
) => {
  const entry = { rev: 1, items: Array.from({ length: n }, (_, i) => `m${i}`) as string[] | null };
  const asked = { starts: [] as number[], begun: [] as number[], fallbacks: 0 };
  const size = opts.size ?? 4;
  const read: RunsRead<Head, Run, string[]> = {
    size,
    run: async (start, count) => {
      asked.starts.push(start);
      const run = {
        head: { rev: entry.rev },
        items: entry.items && entry.items.slice(start, start + count),
        ...(opts.total && entry.items && { total: entry.items.length }),
      };
      opts.afterRun?.(start, entry);
      return run;
    },
    sameHead: (a, b) => a.rev === b.rev,
    begin: (head) => {
      asked.begun.push(head.rev);
      const taken: string[] = [];
      return {
        take: (run) => {
          if (!run.items) return null;
          taken.push(...run.items.map((item) => `${item}@${run.head.rev}`));
          return run.items.length;
        },
        done: () => taken,
      };
    },
    fallback: async () => {
      asked.fallbacks++;
      return (await opts.fallback?.()) ?? null;
    },
  };
  return { entry, asked, read };
};

describe('runsOfOneRevision', () => {
  it('reads runs of its size from index 0 until one holds fewer, as one try', async () => {
    const { asked, read } = entryOf(10);
    expect(await runsOfOneRevision(read)).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}@1`));
    expect(asked).toEqual({ starts: [0, 4, 8], begun: [1], fallbacks: 0 });
    // A whole number of runs ends on an empty one; an empty entry is one round trip.
    const exact = entryOf(8);
    expect(await runsOfOneRevision(exact.read)).toHaveLength(8);
    expect(exact.asked.starts).toEqual([0, 4, 8]);
    const empty = entryOf(0);
    expect(await runsOfOneRevision(empty.read)).toEqual([]);
    expect(empty.asked.starts).toEqual([0]);
  });

  it('stops at the run that reaches the total its runs tell, with no run past the end', async () => {
    for (const [n, starts] of [
      [8, [0, 4]],
      [10, [0, 4, 8]],
      [4, [0]],
      [0, [0]],
    ] as const) {
      const told = entryOf(n, { total: true });
      expect(await runsOfOneRevision(told.read)).toEqual(
        Array.from({ length: n }, (_, i) => `m${i}@1`),
      );
      expect(told.asked.starts).toEqual(starts);
    }
  });

  it('begins again from index 0 with a fresh taker when the head moved between runs', async () => {
    const { asked, read } = entryOf(10, {
      afterRun: (start, entry) => {
        if (start === 4 && entry.rev === 1) entry.rev = 2;
      },
    });
    // The second run was read before the change, the third after: the try stops at the third.
    expect(await runsOfOneRevision(read)).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}@2`));
    expect(asked).toEqual({ starts: [0, 4, 8, 0, 4, 8], begun: [1, 2], fallbacks: 0 });
  });

  it('comes to its fallback after three tries that each saw the head move, at most once', async () => {
    const moving = { afterRun: (_: number, entry: { rev: number }) => void entry.rev++ };
    const given = entryOf(10, moving);
    expect(await runsOfOneRevision(given.read)).toBeNull();
    expect(given.asked).toEqual({ starts: [0, 4, 0, 4, 0, 4], begun: [1, 3, 5], fallbacks: 1 });
    // What the fallback reads (one step, say) is the answer.
    const whole = entryOf(10, { ...moving, fallback: async () => ['whole'] });
    expect(await runsOfOneRevision(whole.read)).toEqual(['whole']);
    expect(whole.asked.fallbacks).toBe(1);
    // Two moves leave the third try to finish: no fallback.
    const twice = entryOf(10, {
      afterRun: (start, entry) => {
        if (start === 0 && entry.rev < 3) entry.rev++;
      },
    });
    expect(await runsOfOneRevision(twice.read)).toHaveLength(10);
    expect(twice.asked).toEqual({ starts: [0, 4, 0, 4, 0, 4, 8], begun: [1, 2, 3], fallbacks: 0 });
  });

  it('ends with null, neither trying again nor falling back, where a run, begin or take says so', async () => {
    const absent = entryOf(10);
    absent.read = {
      ...absent.read,
      run: async (start) => {
        absent.asked.starts.push(start);
        return null;
      },
    };
    expect(await runsOfOneRevision(absent.read)).toBeNull();
    expect(absent.asked).toEqual({ starts: [0], begun: [], fallbacks: 0 });

    const unreadableHead = entryOf(10);
    unreadableHead.read = { ...unreadableHead.read, begin: () => null };
    expect(await runsOfOneRevision(unreadableHead.read)).toBeNull();
    expect(unreadableHead.asked).toEqual({ starts: [0], begun: [], fallbacks: 0 });

    // A member unreadable from the second run on: the read stops there.
    const unreadable = entryOf(10, {
      afterRun: (start, entry) => {
        if (start === 0) entry.items = null;
      },
    });
    expect(await runsOfOneRevision(unreadable.read)).toBeNull();
    expect(unreadable.asked).toEqual({ starts: [0, 4], begun: [1], fallbacks: 0 });
  });

  it("propagates a run's error as it is, reading nothing after it", async () => {
    const failing = entryOf(10);
    const error = new Error('connection lost');
    const run = failing.read.run;
    failing.read = {
      ...failing.read,
      run: async (start, count) => {
        if (start === 4) {
          failing.asked.starts.push(start);
          throw error;
        }
        return run(start, count);
      },
    };
    await expect(runsOfOneRevision(failing.read)).rejects.toBe(error);
    expect(failing.asked).toEqual({ starts: [0, 4], begun: [1], fallbacks: 0 });
    // The fallback's error too.
    const lost = entryOf(10, {
      afterRun: (_, entry) => void entry.rev++,
      fallback: () => Promise.reject(error),
    });
    await expect(runsOfOneRevision(lost.read)).rejects.toBe(error);
  });
});
