/**
 * The shapes of the simulator's accounts and of a view of the chain: what readers (the methods,
 * the websocket, the registry's seeding) see, and what listeners of writes get and how they are
 * called.
 */
import type { PublicKey } from '@solana/web3.js';
import type { SimTransaction } from './transactions.js';

/** What `setAccount` takes. */
export interface SimAccountInput {
  data: Uint8Array;
  /** Default `NAME_PROGRAM_ID`. */
  owner?: PublicKey;
  /** Default rent-exempt. */
  lamports?: number;
}

/** A copy of a stored account. */
export interface SimAccount {
  pubkey: PublicKey;
  /** A copy: change the chain with `setAccount`. */
  data: Buffer;
  owner: PublicKey;
  lamports: number;
}

/** How the chain keeps an account (the server reads it without copying); read-only. */
export interface StoredAccount {
  readonly key: string;
  readonly pubkey: PublicKey;
  readonly data: Buffer;
  readonly ownerKey: string;
  readonly owner: PublicKey;
  readonly lamports: number;
  /** The slot of the write that stored this version (`getProgramAccountsV2`'s `changedSinceSlot`). */
  readonly slot: number;
  /** Lazy `data.toString('base64')`. */
  base64?: string;
}

/** A memcmp filter's bytes and offset, as `ChainView.candidates` takes them. */
export interface MemcmpHint {
  readonly offset: number;
  readonly bytes: Buffer;
}

/** A slot and the accounts as of it: the chain now, or `SimChain.asOf` a while ago. */
export interface ChainView {
  readonly slot: number;
  /** The stored account at a base58 address, uncopied. */
  lookup(key: string): StoredAccount | undefined;
  /** Stored accounts owned by a base58 program key, uncopied. */
  ownedBy(programKey: string): Iterable<StoredAccount>;
  /**
   * Stored accounts owned by `programKey` that may pass every memcmp of `hints`: a superset of
   * those that do (the caller still filters), found through the chain's indexes of bytes 0..32
   * and 64..96 (a name account's parent and class) rather than by a scan, when a hint fits one.
   * Uncopied; in `ownedBy`'s order.
   */
  candidates(programKey: string, hints: readonly MemcmpHint[]): Iterable<StoredAccount>;
}

/** One account write, as `onWrite` listeners get it. */
export interface AccountWrite {
  readonly key: string;
  readonly pubkey: PublicKey;
  /** Undefined when deleted. */
  readonly account: StoredAccount | undefined;
  /** Undefined when created. */
  readonly previous: StoredAccount | undefined;
  /** The transaction's slot, or a slot of its own outside any. */
  readonly slot: number;
  /** Undefined outside a transaction. */
  readonly signature: string | undefined;
}

/** Called synchronously after each write; must not throw. */
export type WriteListener = (write: AccountWrite) => void;

/** Called once a transaction's writes are visible; must not throw. */
export type TransactionListener = (tx: SimTransaction) => void;

/**
 * Calls each listener with `value`, in order; a throwing listener stops nothing, its error
 * rethrown from a microtask (an uncaught exception, as from an event emitter's listener).
 */
export function callEach<T>(listeners: Iterable<(value: T) => void>, value: T): void {
  for (const listener of listeners) {
    try {
      listener(value);
    } catch (err) {
      queueMicrotask(() => {
        throw err;
      });
    }
  }
}
