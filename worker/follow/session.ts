import type { LogsNote } from './notifications.js';
import { logsWrite } from './transaction.js';

/**
 * What the follower knows of one socket, from its open to its close (or to being found silent):
 * built anew on each open, so nothing of a lost socket is carried to the next one, and dropped
 * whole when the socket is. A heal vouches for the stream only if the session it began on is
 * still the current one (docs/design.md, "Heals and sockets").
 */
export class SocketSession {
  /** Whether the gap before this socket is healed (the stream is complete since the epoch). */
  healed = false;
  /** When every subscription of the mode was confirmed on this socket (Unix ms). */
  subscribedAt: number | undefined;
  /** The newest trusted slot this socket has shown: the gap's end, for the heal's reads. */
  streamSlot: number | undefined;
  /** Newest slot of an account notification on this socket (-1: none yet). */
  private accountSlot = -1;
  /**
   * The oldest write the logs stream reported whose account notification has not come: a
   * provider that dropped the whole-program subscription (or never delivers it) while the logs
   * flow would otherwise be vouched for, additions and transfers missed.
   */
  private expected: { slot: number; since: number } | undefined;

  /** A slot the socket showed, believed by the slot clock. */
  sawSlot(slot: number): void {
    this.streamSlot = Math.max(this.streamSlot ?? slot, slot);
  }

  /** An account notification at `slot` came. */
  accountHeard(slot: number): void {
    this.accountSlot = Math.max(this.accountSlot, slot);
    if (this.expected && slot >= this.expected.slot) this.expected = undefined;
  }

  /**
   * A logs notification of the whole-program stream at `now`: a successful write of the name
   * program itself must bring an account notification at its slot or later.
   */
  expectAccounts(note: LogsNote, now: number): void {
    if (this.expected || note.failed) return;
    // Its account notification may have come first (the same slot).
    if (note.slot <= this.accountSlot || !logsWrite(note.logs)) return;
    this.expected = { slot: note.slot, since: now };
  }

  /** The slot of a write whose account notification is `graceMs` late at `now`, if any. */
  overdue(now: number, graceMs: number): number | undefined {
    const expected = this.expected;
    return expected && now - expected.since >= graceMs ? expected.slot : undefined;
  }
}
