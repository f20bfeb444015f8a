import type { FollowRpc } from './rpc.js';
import type { Clock } from './types.js';

/** How often the probe asks for the name program's newest transaction (1 credit each). */
export const PROBE_EVERY_MS = 30_000;
/** How long the stream has to report the transaction the probe found. */
export const PROBE_GRACE_MS = 10_000;
/** After a refused probe, how soon the next one is tried (the stream is not vouched for meanwhile). */
export const PROBE_RETRY_MS = 5_000;

export type SilenceDeps = {
  rpc: Pick<FollowRpc, 'signatures'>;
  clock: Clock;
  /** Whether the logs stream reported `signature` (or a gap heal read it). */
  seen: (signature: string) => boolean;
  /** The stream is open but missed a transaction: reconnect and heal the gap. */
  silent: (signature: string) => void;
};

/**
 * Notices a stream that is open and answers pings but delivers nothing (a provider's node stuck,
 * a subscription dropped on its side): the name program's newest transaction, asked over HTTP
 * (`getSignaturesForAddress`, limit 1), must come on the logs stream within
 * {@link PROBE_GRACE_MS}. About 2,900 credits a day for the deployment, whatever the parents.
 *
 * A probe that could not be made (the call refused, failed or unaffordable) proves nothing: it is
 * not "nothing new". Until a probe succeeds again {@link verified} is false, and the follower does
 * not vouch for the stream (docs/design.md, "Silence").
 */
export class SilenceProbe {
  private cancel: (() => void) | undefined;
  private stopped = true;
  private failed = false;

  constructor(private readonly deps: SilenceDeps) {}

  /** False from a refused probe until the next one succeeds. */
  get verified(): boolean {
    return !this.failed;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(PROBE_EVERY_MS);
  }

  stop(): void {
    this.stopped = true;
    this.failed = false;
    this.cancel?.();
    this.cancel = undefined;
  }

  /**
   * One probe: resolves with the newest signature (undefined: the program has none, or the call
   * was refused), the verdict comes after the grace.
   */
  async probe(): Promise<string | undefined> {
    let newest: { signature: string } | undefined;
    try {
      [newest] = await this.deps.rpc.signatures({ limit: 1 });
    } catch {
      this.failed = true;
      return undefined;
    }
    this.failed = false;
    if (!newest || this.deps.seen(newest.signature)) return newest?.signature;
    const signature = newest.signature;
    this.deps.clock.after(PROBE_GRACE_MS, () => {
      if (!this.stopped && !this.deps.seen(signature)) this.deps.silent(signature);
    });
    return signature;
  }

  private schedule(ms: number): void {
    this.cancel = this.deps.clock.after(ms, () => {
      if (this.stopped) return;
      void this.probe().finally(() => {
        if (!this.stopped) this.schedule(this.failed ? PROBE_RETRY_MS : PROBE_EVERY_MS);
      });
    });
  }
}
