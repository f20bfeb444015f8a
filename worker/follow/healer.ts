import type { Logger } from 'pino';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import type { Deletions } from './deletions.js';
import { healGap } from './gaps.js';
import type { RecentSignatures } from './recent.js';
import type { FollowRpc } from './rpc.js';
import type { SocketSession } from './session.js';
import type { StatusReport } from './status-report.js';
import type { AccountNote, Clock } from './types.js';

export type GapHealerDeps = {
  rpc: FollowRpc;
  slots: Pick<SlotClock, 'ceiling'>;
  clock: Clock;
  logger: Logger;
  deletions: Pick<Deletions, 'removeDeleted'>;
  /** Routes an account read in the gap as if notified. */
  feed: (note: AccountNote, parentKey: string) => void;
  /** The epoch and last signature the heal moves. */
  report: Pick<StatusReport, 'epoch' | 'lastSignature'>;
  /** Signatures the silence probe must not take for missed (./silence.ts). */
  seen: Pick<RecentSignatures, 'add'>;
  /** The open socket's session now (./socket.ts). */
  session: () => SocketSession | undefined;
  /** Whether the follower is closed (no heal is repeated then). */
  closed: () => boolean;
  /**
   * A heal begun on `session` is over, its gap read: the follower vouches for the stream if that
   * session is still the open socket's, and writes the status.
   */
  healed: (session: SocketSession | undefined) => Promise<void>;
};

/**
 * Heals the gap before each socket's subscriptions (docs/design.md, "Gaps"): one heal at a time,
 * another after it when a socket opened meanwhile. Reads what happened since the last
 * transaction reported before the gap (./gaps.ts), and moves the epoch when that cannot be known.
 */
export class GapHealer {
  private healing: Promise<void> | undefined;
  /** Another socket was subscribed while a heal ran: its own gap is healed after. */
  private again = false;
  /** The last signature reported before the gap the next heal reads (undefined: none pending). */
  private gapFrom: string | undefined;

  constructor(private readonly deps: GapHealerDeps) {}

  /** Taking the stream over: the gap begins where the last owner stopped. */
  resumeFrom(signature: string | undefined): void {
    this.gapFrom = signature;
  }

  /**
   * The logs stream reported `signature`: the anchor the next heal reads back to (a takeover's
   * too), but only on a socket whose gap is healed, which only a heal of the whole-program stream
   * does (a fall to `parents` unheals it). In `parents` mode the logs come without most parents'
   * accounts, and before a heal they are newer than what is known: a heal from either would pass
   * over changes no entry and no index has (docs/design.md, "Gaps").
   */
  reported(signature: string): void {
    if (this.deps.session()?.healed === true) this.deps.report.lastSignature = signature;
  }

  /** A socket closed: the gap starts here (the next stream reports newer ones before it is healed). */
  gapOpened(): void {
    this.gapFrom ??= this.deps.report.lastSignature;
  }

  /** Heals the gap now, or after the heal under way. */
  start(): void {
    if (this.healing) {
      this.again = true;
      return;
    }
    this.healing = (async () => {
      do {
        this.again = false;
        await this.heal();
      } while (this.again && !this.deps.closed());
    })()
      .catch((err: unknown) => this.deps.logger.warn({ err: String(err) }, 'follow: heal'))
      .finally(() => (this.healing = undefined));
  }

  private async heal(): Promise<void> {
    const { deps } = this;
    const { report } = deps;
    // A heal vouches for the stream only if its socket is still the one open when it ends: a
    // socket lost meanwhile left a gap of its own, not the one this read.
    const session = deps.session();
    // Entries fetched since the stream was confirmed miss nothing, whatever happened before.
    const subscribedAt = session?.subscribedAt ?? deps.clock.now();
    // The last transaction the stream reported before the gap, not since: the new stream may
    // have reported newer ones by now, and reading from those would pass over the gap.
    const until = this.gapFrom ?? report.lastSignature;
    this.gapFrom = undefined;
    // No notification's slot is believed before the clock has an anchor: a new process asks for
    // the slot until it has one (two replies that agree), rather than re-read every change.
    for (let i = 0; i < 4 && deps.slots.ceiling() === undefined; i++) {
      await deps.rpc.slot().catch(() => undefined);
    }

    const outcome = await healGap(
      {
        rpc: deps.rpc,
        deletions: deps.deletions,
        feed: deps.feed,
        logger: deps.logger,
        ...(session?.streamSlot === undefined ? {} : { minContextSlot: session.streamSlot }),
        wait: (ms) => new Promise<void>((resolve) => deps.clock.after(ms, resolve)),
      },
      until,
    );
    if (outcome.healed && report.epoch !== undefined) {
      // Unless the stream reported a newer one meanwhile, the gap's newest is the last seen.
      if (outcome.newest !== undefined && report.lastSignature === until) {
        report.lastSignature = outcome.newest;
      }
    } else {
      if (!outcome.healed && report.epoch !== undefined) {
        deps.logger.warn({ why: outcome.why }, 'follow: gap not healed: a new epoch');
      }
      report.epoch = subscribedAt;
      if (report.lastSignature === undefined || report.lastSignature === until) {
        // An anchor the gap could not be read back to would fail the next heal too. The newest
        // transaction is one if this socket, subscribed since the new epoch, is still open once
        // it is read: it streamed everything since.
        const [newest] = await deps.rpc.signatures({ limit: 1 }).catch(() => []);
        if (newest && session && deps.session() === session) {
          report.lastSignature = newest.signature;
        }
      }
    }
    // The newest transaction known now: the silence probe must not take it for one the stream
    // missed (on a quiet chain it may be hours old).
    if (outcome.healed && outcome.newest) deps.seen.add(outcome.newest);
    if (report.lastSignature !== undefined) deps.seen.add(report.lastSignature);
    await deps.healed(session);
  }
}
