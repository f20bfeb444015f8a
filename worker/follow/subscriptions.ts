/** A subscribe request awaiting its answer, and when it was sent (Unix ms). */
export type Pending =
  | { kind: 'program'; at: number }
  | { kind: 'logs'; at: number }
  | { kind: 'parent'; parent: string; at: number };

/** Writes one text frame on the socket. */
export type Send = (text: string) => void;

/**
 * The subscriptions of one socket in one mode (./stream.ts): the subscribe requests awaiting their
 * answer, the subscriptions confirmed, and whether all the mode asked for are. Built anew when a
 * socket opens and when the mode falls on the same socket, and dropped with the socket, so nothing
 * of one socket or mode is reset by hand for the next. Unsubscribe requests are sent and not
 * awaited: their answers change nothing.
 */
export class SocketSubscriptions {
  /** Subscribe requests by id, until answered or taken for refused. */
  readonly pending = new Map<number, Pending>();
  /** Subscription id -> the parent's key for `parents` mode, '' for the whole program. */
  readonly accounts = new Map<number, string>();
  /** `parents` mode: parent -> the id of its subscribe request, and its subscription once confirmed. */
  readonly parents = new Map<string, { requested: number; sub?: number }>();
  /** The `logsSubscribe` subscription, once confirmed. */
  logs: number | undefined;
  /** Whether every subscription the mode asked for is confirmed (the follower is told once). */
  confirmed = false;

  /** `nextId` numbers requests across sockets and modes: a late answer never meets a newer request. */
  constructor(
    private readonly send: Send,
    private readonly nextId: () => number,
  ) {}

  /** The subscriptions of the next mode on the same socket. */
  renewed(): SocketSubscriptions {
    return new SocketSubscriptions(this.send, this.nextId);
  }

  /** Sends a request; a subscribe one (`pending` given) is awaited. Returns its id. */
  request(method: string, params: unknown[], pending?: Pending): number {
    const id = this.nextId();
    if (pending) this.pending.set(id, pending);
    this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return id;
  }

  /** Lets go of a confirmed account subscription. */
  unsubscribeAccount(sub: number): void {
    this.accounts.delete(sub);
    this.request('programUnsubscribe', [sub]);
  }

  /** Lets go of every subscription confirmed on this socket (the mode falls, the socket stays). */
  unsubscribeAll(): void {
    for (const sub of this.accounts.keys()) this.request('programUnsubscribe', [sub]);
    if (this.logs !== undefined) this.request('logsUnsubscribe', [this.logs]);
  }

  /** How many subscriptions are confirmed (`sns_ws_subscriptions`). */
  get count(): number {
    return this.accounts.size + (this.logs === undefined ? 0 : 1);
  }
}
