import { describe, expect, it } from 'vitest';
import { MAX_WANTED, Rereads } from '../worker/follow/rereads.js';

/** A re-read at a slot is owed until a scan that far is stored (worker/follow/rereads.ts). */
describe('owed re-reads', () => {
  const setUp = (scans: Map<string, number | undefined | null>) => {
    const queued: Array<[string, number | undefined]> = [];
    const rereads = new Rereads({
      queue: (parent, slot) => queued.push([parent, slot]),
      scanSlotOf: async (parent) => (scans.has(parent) ? scans.get(parent) : undefined),
    });
    return { rereads, queued };
  };

  it('queues again until the stored scan reaches the slot, then settles', async () => {
    const scans = new Map<string, number | undefined | null>([['p', 90]]);
    const { rereads, queued } = setUp(scans);
    rereads.want('p', 100);
    expect(queued).toEqual([['p', 100]]);
    await rereads.check(); // the scan that joined read at 90: too early
    expect(queued).toEqual([
      ['p', 100],
      ['p', 100],
    ]);
    scans.set('p', 100);
    await rereads.check();
    expect(rereads.size).toBe(0);
    expect(queued).toHaveLength(2);
  });

  it('keeps the highest slot owed, forgets a parent whose entry is gone, and remembers no slotless re-read', async () => {
    const scans = new Map<string, number | undefined | null>([['gone', null]]);
    const { rereads, queued } = setUp(scans);
    rereads.want('p', 100);
    rereads.want('p', 80);
    rereads.want('gone', 5);
    rereads.want('q', undefined);
    await rereads.check();
    expect(queued.slice(4)).toEqual([['p', 100]]);
    expect(rereads.size).toBe(1);
  });

  it('stays within its bound', () => {
    const { rereads } = setUp(new Map());
    for (let i = 0; i <= MAX_WANTED; i++) rereads.want(`p${i}`, i);
    expect(rereads.size).toBe(MAX_WANTED);
  });
});
