import type { FollowRpc } from './rpc.js';
import type { Clock } from './types.js';

/** How often the probe asks for the name program's newest transaction (1 credit each). */
export const PROBE_EVERY_MS = 30_000;
/** How long the stream has to report the transaction the probe found. */
export const PROBE_GRACE_MS = 10_000;

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
 */
export class SilenceProbe {
  private cancel: (() => void) | undefined;
  private stopped = true;

  constructor(private readonly deps: SilenceDeps) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.cancel?.();
    this.cancel = undefined;
  }

  /** One probe: resolves with the newest signature, the verdict comes after the grace. */
  async probe(): Promise<string | undefined> {
    const [newest] = await this.deps.rpc.signatures({ limit: 1 }).catch(() => []);
    if (!newest || this.deps.seen(newest.signature)) return newest?.signature;
    this.deps.clock.after(PROBE_GRACE_MS, () => {
      if (!this.stopped && !this.deps.seen(newest.signature)) this.deps.silent(newest.signature);
    });
    return newest.signature;
  }

  private schedule(): void {
    this.cancel = this.deps.clock.after(PROBE_EVERY_MS, () => {
      if (this.stopped) return;
      void this.probe().finally(() => {
        if (!this.stopped) this.schedule();
      });
    });
  }
}
