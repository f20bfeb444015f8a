/**
 * The transactions the chain keeps, as a node without long-term storage keeps them (the newest
 * `maxTransactions`), by signature and newest first, with the fee payers' balances their
 * pre/post balances are drawn from.
 */
import type { PublicKey } from '@solana/web3.js';
import { SYSVAR_RENT_PUBKEY } from '@solana/web3.js';
import { base58Decode } from './base58.js';
import type { StoredAccount, TransactionListener } from './chain-view.js';
import { COMPACT_AFTER } from './chain-history.js';
import { callEach } from './chain-view.js';
import {
  LAMPORTS_PER_SIGNATURE,
  PROGRAM_LAMPORTS,
  RecordedTransaction,
  errorOf,
  keyId,
  signerCount,
  walkInstructions,
} from './transactions.js';
import type { SimInstruction, SimTransaction } from './transactions.js';

/** Transactions kept unless `SimChainOptions.maxTransactions` says otherwise. */
export const DEFAULT_MAX_TRANSACTIONS = 20_000;
/** Fee payers remembered; oldest forgotten past this. */
const MAX_WALLETS = 10_000;
/** 10 SOL. */
const DEFAULT_WALLET_LAMPORTS = 10_000_000_000;

/** The running transaction and each written account's prior version. */
export interface OpenTransaction {
  readonly signature: Buffer;
  /** Base58 of `signature`, once a listener needed it. */
  signature58?: string;
  /** Chain clock (ms) when it began. */
  readonly time: number;
  readonly previous: Map<string, StoredAccount | undefined>;
}

/** Kept transactions, their listeners, and the balances of fee payers the chain does not store. */
export class TransactionLog {
  readonly #listeners = new Set<TransactionListener>();
  #txs: RecordedTransaction[] = [];
  #head = 0;
  /** Kept transactions by latin1 signature bytes. */
  readonly #bySignature = new Map<string, RecordedTransaction>();
  #count = 0;
  readonly #max: number;
  /** Balances of fee payers not stored, by `keyId`. */
  readonly #wallets = new Map<string, number>();

  /** @param max transactions kept (a positive integer, checked by the chain). */
  constructor(max: number) {
    this.#max = max;
  }

  /**
   * Records `open`, run at `slot` and paid by `feePayer`, with balances read from `lookup` (the
   * chain after its writes); keeps it and notifies `onTransaction`. A listener's error is
   * rethrown from a microtask.
   */
  record(
    lookup: (key: string) => StoredAccount | undefined,
    feePayer: PublicKey,
    instructions: SimInstruction[],
    open: OpenTransaction,
    slot: number,
  ): RecordedTransaction {
    const written = new Map<string, [number, number]>();
    let storedGain = 0;
    for (const [key, previous] of open.previous) {
      const pre = previous?.lamports ?? 0;
      const post = lookup(key)?.lamports ?? 0;
      written.set(key, [pre, post]);
      storedGain += post - pre;
    }
    // The payer paid fee and rent, and got deletes' refunds.
    const payerId = keyId(feePayer);
    let payer: [number, number] | undefined;
    if (!lookup(feePayer.toBase58())) {
      const fee = LAMPORTS_PER_SIGNATURE * signerCount(feePayer, instructions);
      const pre = this.#wallets.get(payerId) ?? DEFAULT_WALLET_LAMPORTS;
      const post = Math.max(0, pre - fee - storedGain);
      payer = [pre, post];
      // Topped up so balances stay plausible however long a run.
      this.#wallets.set(
        payerId,
        post < DEFAULT_WALLET_LAMPORTS / 100 ? DEFAULT_WALLET_LAMPORTS : post,
      );
      // Background transfers make new owners all the time: keep the newest.
      if (this.#wallets.size > MAX_WALLETS) {
        const oldest = this.#wallets.keys().next().value;
        if (oldest !== undefined) this.#wallets.delete(oldest);
      }
    }
    const programs = new Set<string>();
    const tx = new RecordedTransaction({
      signature: open.signature,
      slot,
      blockTime: Math.floor(Date.now() / 1000),
      time: open.time,
      index: this.#count++,
      feePayer,
      instructions,
      err: errorOf(instructions),
      written,
      payer,
      balanceOf: (key) => {
        if (programs.size === 0) {
          programs.add(SYSVAR_RENT_PUBKEY.toBase58());
          walkInstructions(instructions, (ix) => programs.add(ix.programId.toBase58()));
        }
        if (programs.has(key)) return PROGRAM_LAMPORTS;
        const stored = lookup(key);
        if (stored) return stored.lamports;
        const bytes = base58Decode(key);
        return (bytes && this.#wallets.get(bytes.toString('latin1'))) ?? DEFAULT_WALLET_LAMPORTS;
      },
    });
    this.#txs.push(tx);
    this.#bySignature.set(open.signature.toString('latin1'), tx);
    while (this.#txs.length - this.#head > this.#max) {
      const old = this.#txs[this.#head++];
      if (old) this.#bySignature.delete(old.record.signature.toString('latin1'));
    }
    if (this.#head > COMPACT_AFTER && this.#head * 2 > this.#txs.length) {
      this.#txs = this.#txs.slice(this.#head);
      this.#head = 0;
    }
    callEach(this.#listeners, tx);
    return tx;
  }

  /** See `SimChain.onTransaction`. */
  onTransaction(listener: TransactionListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** The kept transaction with this base58 signature, if any. */
  get(signature: string): SimTransaction | undefined {
    const bytes = base58Decode(signature);
    return bytes && this.#bySignature.get(bytes.toString('latin1'));
  }

  get last(): SimTransaction | undefined {
    return this.#txs[this.#txs.length - 1];
  }

  /** Transactions recorded, kept or not. */
  get count(): number {
    return this.#count;
  }

  *newestFirst(): IterableIterator<SimTransaction> {
    for (let i = this.#txs.length - 1; i >= this.#head; i--) {
      const tx = this.#txs[i];
      if (tx) yield tx;
    }
  }
}
