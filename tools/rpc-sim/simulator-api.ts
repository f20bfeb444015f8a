/** What a caller gives the RPC simulator and gets back: its options and its running handle. */
import type { SimChain } from './chain.js';
import type { Fault } from './faults.js';
import type { WsCallRecord, WsStats } from './pubsub.js';
import type { SubscriptionKind } from './subscriptions.js';

/** 10 MiB; larger bodies get 413. */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

/** One JSON-RPC call the simulator received. */
export interface RpcCallRecord {
  /** '' when the body or element had none. */
  method: string;
  params: unknown;
  /**
   * UTF-8 bytes of this call's own answer (a batch element's object within the array); 0 for
   * notifications and unanswered calls, the fault body for `http` and `garbage`. Recorded when the
   * answer is written (so after a `delay`).
   */
  responseBytes: number;
  fault?: Fault['kind'];
}

/** Options of `startRpcSimulator`. */
export interface RpcSimulatorOptions {
  /** Default a new empty chain. */
  chain?: SimChain;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (ephemeral, see `url`). */
  port?: number;
  /** Default 0 (ephemeral); real nodes (and the CLI) use the HTTP port + 1, as web3.js derives. */
  wsPort?: number;
  /** Ms HTTP reads lag behind the chain (the websocket sees writes at once); see `setHttpLagMs`. */
  httpLagMs?: number;
  /**
   * Ms a transaction stays unknown to `getTransaction`/`getSignaturesForAddress` (at least the
   * HTTP lag): a logs notification arriving before the node asked has the transaction.
   */
  txLagMs?: number;
  /** Unrelated name-program writes per second (default 0); see `startBackgroundWrites`. */
  backgroundWritesPerSecond?: number;
  /** Default `DEFAULT_MAX_BODY_BYTES`. */
  maxBodyBytes?: number;
  /**
   * Read methods answered -32601 "Method not found", as a provider without them answers (most
   * have no `getProgramAccountsV2`); see `setRefusedMethods`. Default none.
   */
  refusedMethods?: readonly string[];
  /** Called with each call record as it is added. */
  onCall?: (call: RpcCallRecord) => void;
}

/** A running simulator. */
export interface RpcSimulator {
  /** E.g. `http://127.0.0.1:54321`; any path is accepted. */
  readonly url: string;
  readonly chain: SimChain;
  /** One row per JSON-RPC call (batch elements each), oldest first. */
  readonly calls: RpcCallRecord[];
  /** Recorded calls, of `method` if given. */
  callCount(method?: string): number;
  /** Empties `calls` in place. */
  resetCalls(): void;
  /**
   * Replaces the faults; per HTTP request the first match applies and its `times` drops.
   * @throws TypeError on an invalid fault.
   */
  setFaults(faults: Fault[]): void;
  /** Stops listening and destroys every socket (hanging, keep-alive, websockets). Idempotent. */
  close(): Promise<void>;

  /** E.g. `ws://127.0.0.1:54322`; any path is accepted. */
  readonly wsUrl: string;
  /** One row per websocket JSON-RPC call, oldest first, with its subscription id or error code. */
  readonly wsCalls: WsCallRecord[];
  /** Websocket counters; `bytesSent` counts every text frame, for credit accounting. */
  wsStats(): WsStats;
  /** Destroys every websocket without a close frame (1006), as providers do; returns the count. */
  dropSockets(): number;
  /** false: refuse new upgrades with 503, like a provider without websockets (open ones stay). */
  setWebsocketAvailable(available: boolean): void;
  /**
   * Makes every open websocket half-open: it neither sends (pongs included) nor reads, so only a
   * client keep-alive notices. Returns the count.
   */
  freezeSockets(): number;
  /** Open subscription ids, of `kind` if given, oldest first. */
  wsSubscriptions(kind?: SubscriptionKind): number[];
  /**
   * Sends `text` as-is as one frame on subscription `id`'s websocket (forged slots and the like).
   * @returns false when no open, unfrozen websocket holds that id.
   */
  wsSendRaw(id: number, text: string): boolean;
  /**
   * Sends `frame(i)` for i < `count` on subscription `id`'s websocket as fast as it drains (at most
   * 4 MiB unsent); counted in `bytesSent` only. Returns frames sent and ms taken.
   */
  wsFlood(
    id: number,
    count: number,
    frame: (i: number) => string,
  ): Promise<{ sent: number; ms: number }>;
  /**
   * Sets the HTTP lag; history is kept from now on, so a raised lag shows the chain as of the
   * change until it has passed. A `minContextSlot` above the lagging slot gets -32016.
   * @throws TypeError unless ms is a finite number >= 0.
   */
  setHttpLagMs(ms: number): void;
  /** Ms. */
  readonly httpLagMs: number;
  /**
   * Sets the transaction lag (see `RpcSimulatorOptions.txLagMs`).
   * @throws TypeError unless ms is a finite number >= 0.
   */
  setTransactionLagMs(ms: number): void;
  /** Ms. */
  readonly txLagMs: number;
  /**
   * Sets background writes per second (0 stops them).
   * @throws TypeError unless the rate is a finite number >= 0.
   */
  setBackgroundWrites(perSecond: number): void;
  /** Background writes so far. */
  readonly backgroundWrites: number;
  /** Replaces the refused methods (see `RpcSimulatorOptions.refusedMethods`); [] serves all. */
  setRefusedMethods(methods: readonly string[]): void;
  /** The methods answered -32601 now. */
  readonly refusedMethods: readonly string[];
  /**
   * A stingy or hostile provider: `getSignaturesForAddress` answers at most `cap` rows whatever
   * valid `limit` asked (Infinity: as asked). A client that takes a short page for the end of the
   * list loses the rest. The limit is checked before the cap: a bad one is still -32602.
   * @throws TypeError unless cap is a positive integer or Infinity.
   */
  setSignaturesPageCap(cap: number): void;
}
