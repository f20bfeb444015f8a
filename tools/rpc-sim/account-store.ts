/**
 * The chain under `SimChain`: accounts by address and owning program, the slot, the listeners of
 * writes, and the transactions writes are grouped in. It knows nothing of names; `SimChain`
 * (chain.ts) builds the name program's writes on it.
 */
import { NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import type { PublicKey } from '@solana/web3.js';
import { performance } from 'node:perf_hooks';
import { base58Encode } from './base58.js';
import { ChainHistory } from './chain-history.js';
import type {
  AccountWrite,
  ChainView,
  MemcmpHint,
  SimAccount,
  SimAccountInput,
  StoredAccount,
  TransactionListener,
  WriteListener,
} from './chain-view.js';
import { callEach } from './chain-view.js';
import { FieldIndex } from './field-index.js';
import { rentExemptLamports } from './name-layout.js';
import { DEFAULT_MAX_TRANSACTIONS, TransactionLog } from './transaction-log.js';
import type { OpenTransaction } from './transaction-log.js';
import { newSignature } from './transactions.js';
import type { SimInstruction, SimTransaction } from './transactions.js';

const NAME_PROGRAM_KEY = NAME_PROGRAM_ID.toBase58();

/** Options of `new SimChain()`. */
export interface SimChainOptions {
  /** Default 1. */
  slot?: number;
  /** Monotonic ms clock (default `performance.now`); tests pass a fake one. */
  now?: () => number;
  /** Transactions kept, as a node without long-term storage forgets older ones. */
  maxTransactions?: number;
}

/**
 * Accounts by address and owning program; every mutation (and every HTTP request the server
 * answers) advances the slot. With `retainHistory(ms)` the chain logs prior versions of written
 * accounts, so `asOf(age)` can undo recent writes; with 0 (default) nothing is logged.
 */
export class AccountStore implements ChainView {
  #slot: number;
  readonly #byKey = new Map<string, StoredAccount>();
  readonly #byOwner = new Map<string, Map<string, StoredAccount>>();
  readonly #fields = new FieldIndex();
  readonly #listeners = new Set<WriteListener>();
  readonly #now: () => number;
  readonly #history = new ChainHistory();
  readonly #txs: TransactionLog;
  #open: OpenTransaction | undefined;
  #recording = true;

  /** @throws TypeError unless maxTransactions is a positive integer. */
  constructor(opts: SimChainOptions = {}) {
    this.#slot = opts.slot ?? 1;
    this.#now = opts.now ?? (() => performance.now());
    const maxTransactions = opts.maxTransactions ?? DEFAULT_MAX_TRANSACTIONS;
    if (!Number.isSafeInteger(maxTransactions) || maxTransactions < 1) {
      throw new TypeError(
        `maxTransactions must be a positive integer, got ${opts.maxTransactions}`,
      );
    }
    this.#txs = new TransactionLog(maxTransactions);
  }

  /** The clock (ms) transactions and history are stamped with. */
  nowMs(): number {
    return this.#now();
  }

  get slot(): number {
    return this.#slot;
  }

  /** Advances the slot by one; returns it. */
  advanceSlot(): number {
    this.#bumpSlot(this.#history.retentionMs > 0 ? this.#now() : 0);
    return this.#slot;
  }

  get size(): number {
    return this.#byKey.size;
  }

  /** Whether a transaction is running: its writes share its slot. */
  protected get inTransaction(): boolean {
    return this.#open !== undefined;
  }

  /** False inside `genesis`: writes are no transaction. */
  protected get recording(): boolean {
    return this.#recording;
  }

  /**
   * Stores (a copy of) an account and notifies `onWrite`, with no instruction of its own.
   * @throws TypeError if lamports is not a non-negative safe integer.
   */
  protected store(pubkey: PublicKey, account: SimAccountInput): void {
    // An ArrayBuffer of its own: a slice of Node's shared pool would keep the whole 8 KiB pool
    // alive for as long as the account lives.
    const data = Buffer.allocUnsafeSlow(account.data.length);
    data.set(account.data);
    const lamports = account.lamports ?? rentExemptLamports(data.length);
    if (!Number.isSafeInteger(lamports) || lamports < 0) {
      throw new TypeError(`lamports must be a non-negative safe integer, got ${lamports}`);
    }
    const owner = account.owner ?? NAME_PROGRAM_ID;
    const stored: StoredAccount = {
      // Flat: base58 builds its text a character at a time, a rope of 44 pieces (1.4 KB) kept
      // for as long as the account.
      key: Buffer.from(pubkey.toBase58(), 'latin1').toString('latin1'),
      pubkey,
      data,
      ownerKey: owner === NAME_PROGRAM_ID ? NAME_PROGRAM_KEY : owner.toBase58(),
      owner,
      lamports,
      // In a transaction the slot moved when it began; outside one, `#written` moves it by one.
      slot: this.#open ? this.#slot : this.#slot + 1,
    };
    const previous = this.#byKey.get(stored.key);
    this.#remove(stored.key);
    this.#byKey.set(stored.key, stored);
    let owned = this.#byOwner.get(stored.ownerKey);
    if (!owned) {
      owned = new Map();
      this.#byOwner.set(stored.ownerKey, owned);
    }
    owned.set(stored.key, stored);
    this.#fields.add(stored);
    this.#written(pubkey, stored.key, stored, previous);
  }

  /** Removes the account `previous` at `key` and notifies `onWrite`. */
  protected drop(pubkey: PublicKey, key: string, previous: StoredAccount): void {
    this.#remove(key);
    this.#written(pubkey, key, undefined, previous);
  }

  /**
   * Calls `listener` synchronously after every visible write, in order; a throwing listener stops
   * nothing, its error rethrown from a microtask. Returns the remover.
   */
  onWrite(listener: WriteListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Logs what `asOf(age)` needs for `age <= ms` from now on; 0 stops and drops the log.
   * @throws TypeError unless ms is a finite number >= 0.
   */
  retainHistory(ms: number): void {
    this.#history.retain(ms);
  }

  /** See `retainHistory`. */
  get historyRetentionMs(): number {
    return this.#history.retentionMs;
  }

  /**
   * The chain `ageMs` ago (later writes undone), or itself when no history is kept; ages past the
   * retention see the oldest known state. O(recent writes) to build.
   */
  asOf(ageMs: number): ChainView {
    if (ageMs <= 0 || this.#history.retentionMs === 0) return this;
    return this.#history.asOf(this, this.#now(), ageMs);
  }

  /** A copy of the account, if any. */
  getAccount(pubkey: PublicKey): SimAccount | undefined {
    const stored = this.#byKey.get(pubkey.toBase58());
    return stored && copyOf(stored);
  }

  /** Copies of all accounts, in insertion order. */
  *accounts(): IterableIterator<SimAccount> {
    for (const stored of this.#byKey.values()) yield copyOf(stored);
  }

  /** Internal, uncopied. */
  lookup(key: string): StoredAccount | undefined {
    return this.#byKey.get(key);
  }

  /** Internal, uncopied. */
  ownedBy(programKey: string): Iterable<StoredAccount> {
    return this.#byOwner.get(programKey)?.values() ?? [];
  }

  /** Internal, uncopied; see `ChainView.candidates`. */
  *candidates(programKey: string, hints: readonly MemcmpHint[]): Iterable<StoredAccount> {
    const narrowest = this.#fields.narrowest(hints);
    if (!narrowest) {
      yield* this.ownedBy(programKey);
      return;
    }
    for (const account of narrowest) if (account.ownerKey === programKey) yield account;
  }

  /** Like `onWrite`, per transaction, after its writes' `onWrite` calls. */
  onTransaction(listener: TransactionListener): () => void {
    return this.#txs.onTransaction(listener);
  }

  /** The transaction with this base58 signature, if kept. */
  getTransaction(signature: string): SimTransaction | undefined {
    return this.#txs.get(signature);
  }

  /** Runs `fn` with writes that are no transaction, as genesis accounts: for fast seeding. */
  genesis<T>(fn: () => T): T {
    const was = this.#recording;
    this.#recording = false;
    try {
      return fn();
    } finally {
      this.#recording = was;
    }
  }

  get lastTransaction(): SimTransaction | undefined {
    return this.#txs.last;
  }

  /** Transactions since creation, kept or not. */
  get transactionCount(): number {
    return this.#txs.count;
  }

  *transactionsNewestFirst(): IterableIterator<SimTransaction> {
    yield* this.#txs.newestFirst();
  }

  /**
   * Runs `run` as one transaction paid by `feePayer`: one slot for all its writes; then keeps it
   * and notifies `onTransaction`. Returns its signature.
   */
  protected transact(feePayer: PublicKey, run: () => SimInstruction[]): { signature: string } {
    const time = this.#now();
    const open: OpenTransaction = { signature: newSignature(), time, previous: new Map() };
    if (!this.#recording) {
      // Genesis: plain writes, a slot each.
      run();
      return { signature: base58Encode(open.signature) };
    }
    this.#bumpSlot(this.#history.retentionMs > 0 ? time : 0);
    this.#open = open;
    let instructions: SimInstruction[];
    try {
      instructions = run();
    } finally {
      this.#open = undefined;
    }
    return this.#txs.record(
      (key) => this.#byKey.get(key),
      feePayer,
      instructions,
      open,
      this.#slot,
    );
  }

  #bumpSlot(time: number): void {
    this.#history.slotMoved(time, this.#slot);
    this.#slot++;
  }

  #written(
    pubkey: PublicKey,
    key: string,
    account: StoredAccount | undefined,
    previous: StoredAccount | undefined,
  ): void {
    const open = this.#open;
    const time = this.#history.retentionMs > 0 ? (open?.time ?? this.#now()) : 0;
    this.#history.wrote(time, key, previous);
    if (open) {
      // In a transaction the slot moved once, when it began.
      if (!open.previous.has(key)) open.previous.set(key, previous);
    } else {
      this.#bumpSlot(time);
    }
    if (this.#listeners.size === 0) return;
    const write: AccountWrite = {
      key,
      pubkey,
      account,
      previous,
      slot: this.#slot,
      signature: open && (open.signature58 ??= base58Encode(open.signature)),
    };
    callEach(this.#listeners, write);
  }

  #remove(key: string): boolean {
    const stored = this.#byKey.get(key);
    if (!stored) return false;
    this.#byKey.delete(key);
    this.#fields.delete(stored);
    const owned = this.#byOwner.get(stored.ownerKey);
    owned?.delete(key);
    if (owned?.size === 0) this.#byOwner.delete(stored.ownerKey);
    return true;
  }
}

function copyOf(stored: StoredAccount): SimAccount {
  return {
    pubkey: stored.pubkey,
    data: Buffer.from(stored.data),
    owner: stored.owner,
    lamports: stored.lamports,
  };
}
