/**
 * Which work handed to a unit is settled, so that a heal vouches for the stream only once what it
 * handed over is (docs/design.md, "Gaps"). Each piece handed in takes an origin, in increasing
 * order; whatever carries it holds it (a count). A holder that passes a piece on holds it in the
 * next before releasing it, so an origin is never held again once released, and the first origin
 * held is the oldest not settled. A holder carrying several pieces may hold only the oldest
 * origin: no caller of {@link settled} waiting for a newer one resolves before it, and memory
 * stays flat however many it carries.
 */
export class Settling {
  /** The origin of the last piece taken in. */
  private taken = 0;
  /** Origins held, in the order first held (increasing): how many holders carry each. */
  private readonly held = new Map<number, number>();
  /** Callers of {@link settled}: resolved once no origin up to theirs is held. */
  private waiters: Array<{ upTo: number; resolve: () => void }> = [];

  /** A new piece of work: its origin, newer than every other (not held yet). */
  take(): number {
    return ++this.taken;
  }

  /** One more holder carries `origin` (held now, or just taken). */
  hold(origin: number): void {
    this.held.set(origin, (this.held.get(origin) ?? 0) + 1);
  }

  /** One holder of each of `origins` no longer carries it. */
  release(origins: Iterable<number>): void {
    for (const origin of origins) {
      const count = this.held.get(origin) ?? 0;
      if (count > 1) this.held.set(origin, count - 1);
      else this.held.delete(origin);
    }
    const oldest = this.oldest();
    if ((this.waiters[0]?.upTo ?? Infinity) >= oldest) return;
    const still = [];
    for (const waiter of this.waiters) {
      if (waiter.upTo < oldest) waiter.resolve();
      else still.push(waiter);
    }
    this.waiters = still;
  }

  /**
   * Resolves once every piece taken in before the call is settled (no holder carries it). Pieces
   * taken in later are not waited for. Never rejects.
   */
  settled(): Promise<void> {
    const upTo = this.taken;
    if (this.oldest() > upTo) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ upTo, resolve }));
  }

  /** The oldest origin held (Infinity: none). */
  private oldest(): number {
    for (const origin of this.held.keys()) return origin;
    return Infinity;
  }
}
