/**
 * The pubsub websocket's subscriptions by kind: accountSubscribe by the account's key,
 * programSubscribe by the program's, logsSubscribe in one set; ids from 0 across the server, as
 * agave's rpc_pubsub numbers them.
 */
import type { WebSocket } from 'ws';
import { readAccountSubscribe, readLogsSubscribe, readProgramSubscribe } from './params.js';
import type { LogsParams, SubscriptionParams } from './params.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';

/** One websocket and what it subscribed. */
export interface Client {
  readonly ws: WebSocket;
  /** Half-open: nothing sent (pongs included), nothing read. */
  frozen: boolean;
  readonly subs: Map<number, Subscription>;
}

/** One subscription of a client, with its parsed params. */
export type Subscription =
  | {
      readonly id: number;
      readonly kind: 'account' | 'program';
      readonly params: SubscriptionParams;
      readonly client: Client;
    }
  | {
      readonly id: number;
      readonly kind: 'logs';
      readonly params: LogsParams;
      readonly client: Client;
    };

/** An account or program subscription: data notifications. */
export type DataSubscription = Exclude<Subscription, { kind: 'logs' }>;

/** A logs subscription. */
export type LogsSubscription = Extract<Subscription, { kind: 'logs' }>;

/** Kinds of subscription served. */
export type SubscriptionKind = Subscription['kind'];

/** The subscribe methods served. */
export type SubscribeMethod = 'accountSubscribe' | 'programSubscribe' | 'logsSubscribe';

const SUBSCRIBE_METHODS: ReadonlySet<string> = new Set<SubscribeMethod>([
  'accountSubscribe',
  'programSubscribe',
  'logsSubscribe',
]);

const UNSUBSCRIBE_METHODS: ReadonlySet<string> = new Set([
  'accountUnsubscribe',
  'programUnsubscribe',
  'logsUnsubscribe',
]);

/** Whether `method` is a subscribe method served. */
export function isSubscribe(method: string): method is SubscribeMethod {
  return SUBSCRIBE_METHODS.has(method);
}

/** Whether `method` is an unsubscribe method served (any of them ends any kind, as agave). */
export function isUnsubscribe(method: string): boolean {
  return UNSUBSCRIBE_METHODS.has(method);
}

/** Every open subscription, indexed by what a write or a transaction is matched on. */
export class SubscriptionIndex {
  readonly #accountSubs = new Map<string, Set<DataSubscription>>();
  readonly #programSubs = new Map<string, Set<DataSubscription>>();
  readonly #logsSubs = new Set<LogsSubscription>();
  #nextId = 0;

  /**
   * Adds a subscription of `client` by `method`.
   * @throws RpcError -32602 on bad params.
   */
  subscribe(client: Client, method: SubscribeMethod, params: unknown): Subscription {
    if (method === 'logsSubscribe') {
      const sub = {
        id: this.#nextId++,
        kind: 'logs' as const,
        params: readLogsSubscribe(params),
        client,
      };
      client.subs.set(sub.id, sub);
      this.#logsSubs.add(sub);
      return sub;
    }
    const kind = method === 'accountSubscribe' ? 'account' : 'program';
    const parsed = kind === 'account' ? readAccountSubscribe(params) : readProgramSubscribe(params);
    const sub: DataSubscription = { id: this.#nextId++, kind, params: parsed, client };
    client.subs.set(sub.id, sub);
    const index = kind === 'account' ? this.#accountSubs : this.#programSubs;
    let set = index.get(parsed.key);
    if (!set) {
      set = new Set();
      index.set(parsed.key, set);
    }
    set.add(sub);
    return sub;
  }

  /** @throws RpcError -32602 "Invalid subscription id." (agave) for ids not of this client. */
  unsubscribe(client: Client, id: number): void {
    const sub = client.subs.get(id);
    if (!sub) throw new RpcError(RpcErrorCode.invalidParams, 'Invalid subscription id.');
    client.subs.delete(id);
    this.#unindex(sub);
  }

  /** Forgets every subscription of a closed client. */
  closed(client: Client): void {
    for (const sub of client.subs.values()) this.#unindex(sub);
    client.subs.clear();
  }

  /** accountSubscribe subscriptions of the base58 `key`. */
  ofAccount(key: string): ReadonlySet<DataSubscription> | undefined {
    return this.#accountSubs.get(key);
  }

  /** programSubscribe subscriptions of the base58 program `key`. */
  ofProgram(key: string): ReadonlySet<DataSubscription> | undefined {
    return this.#programSubs.get(key);
  }

  /** Every logsSubscribe subscription. */
  get logs(): ReadonlySet<LogsSubscription> {
    return this.#logsSubs;
  }

  #unindex(sub: Subscription): void {
    if (sub.kind === 'logs') {
      this.#logsSubs.delete(sub);
      return;
    }
    const index = sub.kind === 'account' ? this.#accountSubs : this.#programSubs;
    const set = index.get(sub.params.key);
    set?.delete(sub);
    if (set?.size === 0) index.delete(sub.params.key);
  }
}
