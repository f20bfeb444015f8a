/**
 * In-memory account store of the RPC simulator, laying accounts out as the SPL Name Service and
 * the SNS registrar do on mainnet: a 96-byte header `parent | owner | class` (`NameRegistryState`),
 * then data. Reverse records have the central state as class and owner and a borsh string as
 * data ("\0" + label under the parent for subdomains; the bare name, no parent, at top level).
 */
import { createHash } from 'node:crypto';
import {
  CENTRAL_STATE,
  NAME_PROGRAM_ID,
  REGISTER_PROGRAM_ID,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  getDomainKeySync,
  getReverseKeyFromDomainKey,
} from '@bonfida/spl-name-service';
import { PublicKey, SYSVAR_RENT_PUBKEY, SystemProgram } from '@solana/web3.js';
import { performance } from 'node:perf_hooks';
import {
  LAMPORTS_PER_SIGNATURE,
  PROGRAM_LAMPORTS,
  RecordedTransaction,
  errorOf,
  keyId,
  newSignature,
  signerCount,
  walkInstructions,
} from './transactions.js';
import {
  nameCreate,
  nameDelete,
  nameTransfer,
  nameUpdate,
  registrarCall,
  wrapperCall,
} from './instructions.js';
import type { SimInstruction, SimTransaction } from './transactions.js';
import { base58Decode, base58Encode } from './base58.js';

const NAME_PROGRAM_KEY = NAME_PROGRAM_ID.toBase58();

/** Name account header length. */
export const NAME_HEADER_LEN = 96;
/** `addDomain`'s default data bytes. */
export const DEFAULT_DOMAIN_SPACE = 1000;
/** Subdomain data bytes, as the SDK's `createSubdomain`. */
export const DEFAULT_SUBDOMAIN_SPACE = 2000;
/** The all-zero key: "no parent", "no class". */
export const ZERO_KEY = PublicKey.default;
/** Owner of names added without one (not a mainnet wallet). */
export const DEFAULT_SIM_OWNER = new PublicKey(
  createHash('sha256').update('sns-gateway rpc-sim default owner').digest(),
);

/** Rent-exempt lamports at mainnet's rates ((128 + len) B × 3480 lamports/B-year × 2 years). */
export function rentExemptLamports(dataLength: number): number {
  return (128 + dataLength) * 3480 * 2;
}

/** The three keys of a name account header. */
export interface NameHeader {
  parent: PublicKey;
  owner: PublicKey;
  nameClass: PublicKey;
}

/** Name account data: the header, then `body`. */
export function encodeNameAccount(header: NameHeader, body: Uint8Array): Buffer {
  return Buffer.concat([
    header.parent.toBuffer(),
    header.owner.toBuffer(),
    header.nameClass.toBuffer(),
    body,
  ]);
}

/** Reverse record data as the registrar writes it ("\0" + label for subdomains). */
export function encodeReverseData(name: string): Buffer {
  const text = Buffer.from(name, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(text.length, 0);
  return Buffer.concat([len, text]);
}

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

/** Options of `addDomain`. */
export interface AddDomainOptions {
  space?: number;
  /** Also write the reverse record (default true). */
  reverse?: boolean;
}

/** Options of `addSubdomain`. */
export interface AddSubdomainOptions {
  /** Also write the reverse record (default true). */
  reverse?: boolean;
  space?: number;
  /** Default the parent's owner. */
  owner?: PublicKey;
}

/** Keys written by `addSubdomain`. */
export interface SubdomainKeys {
  /** The writing transaction's signature, if any. */
  signature?: string;
  subKey: PublicKey;
  /** Written unless `reverse` was false. */
  reverseKey: PublicKey;
  parentKey: PublicKey;
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

/** Options of `deleteSubdomain` and `deleteName`. */
export interface DeleteOptions {
  /**
   * Delete as inner instructions (stack height 2) of one call of this program, as a program closing
   * names for users does; default top-level Deletes.
   */
  via?: PublicKey;
}
/** Options of `new SimChain()`. */
export interface SimChainOptions {
  /** Default 1. */
  slot?: number;
  /** Monotonic ms clock (default `performance.now`); tests pass a fake one. */
  now?: () => number;
  /** Transactions kept, as a node without long-term storage forgets older ones. */
  maxTransactions?: number;
}

export const DEFAULT_MAX_TRANSACTIONS = 20_000;
/** Fee payers remembered; oldest forgotten past this. */
const MAX_WALLETS = 10_000;
/** 10 SOL. */
const DEFAULT_WALLET_LAMPORTS = 10_000_000_000;

/** The running transaction and each written account's prior version. */
interface OpenTransaction {
  readonly signature: Buffer;
  /** Base58 of `signature`, once a listener needed it. */
  signature58?: string;
  readonly time: number;
  readonly previous: Map<string, StoredAccount | undefined>;
}

interface SlotEntry {
  readonly time: number;
  readonly slotBefore: number;
}

interface WriteEntry {
  readonly time: number;
  readonly key: string;
  readonly previous: StoredAccount | undefined;
}

/** Dropped head entries before the log is compacted. */
const COMPACT_AFTER = 1024;

/**
 * Accounts by address and owning program; every mutation (and every HTTP request the server
 * answers) advances the slot. With `retainHistory(ms)` the chain logs prior versions of written
 * accounts, so `asOf(age)` can undo recent writes; with 0 (default) nothing is logged.
 */
export class SimChain implements ChainView {
  #slot: number;
  readonly #byKey = new Map<string, StoredAccount>();
  readonly #byOwner = new Map<string, Map<string, StoredAccount>>();
  readonly #fields = new FieldIndex();
  readonly #listeners = new Set<WriteListener>();
  readonly #now: () => number;
  #retentionMs = 0;
  #slotLog: SlotEntry[] = [];
  #slotHead = 0;
  #writeLog: WriteEntry[] = [];
  #writeHead = 0;
  readonly #txListeners = new Set<TransactionListener>();
  #txs: RecordedTransaction[] = [];
  #txHead = 0;
  /** Kept transactions by latin1 signature bytes. */
  readonly #bySignature = new Map<string, RecordedTransaction>();
  #txCount = 0;
  readonly #maxTransactions: number;
  #open: OpenTransaction | undefined;
  /** Balances of fee payers not stored, by `keyId`. */
  readonly #wallets = new Map<string, number>();
  #recording = true;

  /** @throws TypeError unless maxTransactions is a positive integer. */
  constructor(opts: SimChainOptions = {}) {
    this.#slot = opts.slot ?? 1;
    this.#now = opts.now ?? (() => performance.now());
    this.#maxTransactions = opts.maxTransactions ?? DEFAULT_MAX_TRANSACTIONS;
    if (!Number.isSafeInteger(this.#maxTransactions) || this.#maxTransactions < 1) {
      throw new TypeError(
        `maxTransactions must be a positive integer, got ${opts.maxTransactions}`,
      );
    }
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
    this.#bumpSlot(this.#retentionMs > 0 ? this.#now() : 0);
    return this.#slot;
  }

  get size(): number {
    return this.#byKey.size;
  }

  /**
   * Stores (a copy of) an account and notifies `onWrite`. A bare write of a name account becomes
   * the name program's transaction: Create, Transfer (only owner bytes changed), else Update.
   * @throws TypeError if lamports is not a non-negative safe integer.
   */
  setAccount(pubkey: PublicKey, account: SimAccountInput): void {
    const owner = account.owner ?? NAME_PROGRAM_ID;
    // Genesis writes are no transaction: no instruction to build (a registry seeds 100,000s).
    if (!this.#open && this.#recording && owner.equals(NAME_PROGRAM_ID)) {
      const previous = this.#byKey.get(pubkey.toBase58());
      const data = Buffer.from(account.data);
      const header = headerOf(data);
      this.#transact(header.owner, () => {
        this.#store(pubkey, account);
        return [this.#implicitWrite(pubkey, previous, data, header)];
      });
      return;
    }
    this.#store(pubkey, account);
  }

  #store(pubkey: PublicKey, account: SimAccountInput): void {
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

  /** Removes an account (notifying `onWrite`); returns whether it existed. */
  deleteAccount(pubkey: PublicKey): boolean {
    const key = pubkey.toBase58();
    const previous = this.#byKey.get(key);
    if (!previous) return false;
    if (!this.#open && previous.ownerKey === NAME_PROGRAM_ID.toBase58()) {
      // The name program's Delete, signed by the owner.
      const owner = headerOf(previous.data).owner;
      this.#transact(owner, () => {
        this.#drop(pubkey, key, previous);
        return [nameDelete(pubkey, owner, owner)];
      });
      return true;
    }
    this.#drop(pubkey, key, previous);
    return true;
  }

  #drop(pubkey: PublicKey, key: string, previous: StoredAccount): void {
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
    if (!Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`history retention must be a finite number >= 0, got ${ms}`);
    }
    this.#retentionMs = ms;
    if (ms === 0) {
      this.#slotLog = [];
      this.#slotHead = 0;
      this.#writeLog = [];
      this.#writeHead = 0;
    }
  }

  /** See `retainHistory`. */
  get historyRetentionMs(): number {
    return this.#retentionMs;
  }

  /**
   * The chain `ageMs` ago (later writes undone), or itself when no history is kept; ages past the
   * retention see the oldest known state. O(recent writes) to build.
   */
  asOf(ageMs: number): ChainView {
    if (ageMs <= 0 || this.#retentionMs === 0) return this;
    const now = this.#now();
    this.#prune(now);
    const time = now - ageMs;
    const slotAt = firstAfter(this.#slotLog, this.#slotHead, time);
    const slot = this.#slotLog[slotAt]?.slotBefore ?? this.#slot;
    const writeAt = firstAfter(this.#writeLog, this.#writeHead, time);
    const undone = new Map<string, StoredAccount | undefined>();
    // Oldest first: the version before the earliest later write is the one of `time`.
    for (let i = writeAt; i < this.#writeLog.length; i++) {
      const entry = this.#writeLog[i];
      if (entry && !undone.has(entry.key)) undone.set(entry.key, entry.previous);
    }
    return undone.size === 0
      ? new PastView(this, slot, undefined)
      : new PastView(this, slot, undone);
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

  /**
   * Adds a top-level `.sol` name (suffix ignored) under `ROOT_DOMAIN_ACCOUNT` and, unless
   * `reverse: false`, its reverse record, replacing what is there, in one transaction (Create,
   * then the registrar's createReverse).
   * @returns the domain key.
   * @throws Error if the name is empty or has a dot.
   */
  addDomain(
    name: string,
    owner: PublicKey = DEFAULT_SIM_OWNER,
    opts: AddDomainOptions = {},
  ): PublicKey {
    const domain = topLevelName(name);
    const domainKey = getDomainKeySync(domain).pubkey;
    const space = checkSpace(opts.space ?? DEFAULT_DOMAIN_SPACE);
    this.#transact(owner, () => {
      const existed = this.#byKey.has(domainKey.toBase58());
      this.#store(domainKey, {
        data: encodeNameAccount(
          { parent: ROOT_DOMAIN_ACCOUNT, owner, nameClass: ZERO_KEY },
          Buffer.alloc(space),
        ),
      });
      const instructions = [
        nameCreate({
          payer: owner,
          nameKey: domainKey,
          owner,
          nameClass: ZERO_KEY,
          parent: ROOT_DOMAIN_ACCOUNT,
          parentOwner: CENTRAL_STATE,
          name: domain,
          lamports: rentExemptLamports(96 + space),
          space,
          existed,
        }),
      ];
      if (opts.reverse !== false) {
        const reverseKey = getReverseKeyFromDomainKey(domainKey);
        instructions.push(this.#writeReverse(owner, domainKey, reverseKey, undefined, domain));
      }
      return instructions;
    });
    return domainKey;
  }

  /**
   * Adds `label.parent` as `createSubdomain` would (creating the parent first if absent), with its
   * reverse record unless `reverse: false`, in one transaction paid by the parent's owner.
   * @throws Error if parent or label is empty or has a dot.
   */
  addSubdomain(parent: string, label: string, opts: AddSubdomainOptions = {}): SubdomainKeys {
    const { parentKey, parentOwner } = this.#ensureParent(parent);
    const keys = subdomainKeys(parentKey, topLevelName(parent), checkLabel(label));
    const space = checkSpace(opts.space ?? DEFAULT_SUBDOMAIN_SPACE);
    const owner = opts.owner ?? parentOwner;
    const tx = this.#transact(parentOwner, () => {
      const existed = this.#byKey.has(keys.subKey.toBase58());
      this.#store(keys.subKey, {
        data: encodeNameAccount(
          { parent: parentKey, owner, nameClass: ZERO_KEY },
          Buffer.alloc(space),
        ),
      });
      const instructions = [
        nameCreate({
          payer: parentOwner,
          nameKey: keys.subKey,
          owner,
          nameClass: ZERO_KEY,
          parent: parentKey,
          parentOwner,
          name: `\0${label}`,
          lamports: rentExemptLamports(96 + space),
          space,
          existed,
        }),
      ];
      if (opts.reverse !== false) {
        instructions.push(
          this.#writeReverse(
            parentOwner,
            keys.subKey,
            keys.reverseKey,
            keys.parentKey,
            `\0${label}`,
          ),
        );
      }
      return instructions;
    });
    return withSignature(keys, tx);
  }

  /**
   * Adds `label.parent`'s reverse record without its name account (deleted if present), like a
   * subdomain deleted while its reverse record stayed. `subKey` holds no account.
   */
  addOrphanReverse(parent: string, label: string): SubdomainKeys {
    const { parentKey, parentOwner } = this.#ensureParent(parent);
    const keys = subdomainKeys(parentKey, topLevelName(parent), checkLabel(label));
    this.deleteAccount(keys.subKey);
    const tx = this.#transact(parentOwner, () => [
      this.#writeReverse(parentOwner, keys.subKey, keys.reverseKey, keys.parentKey, `\0${label}`),
    ]);
    return withSignature(keys, tx);
  }

  /**
   * Deletes `label.parent`'s name account and reverse record in one transaction (name-program
   * Delete, tag 3, refunds to the owner; inner with `opts.via`). Parent untouched.
   * @returns whether either existed (false: no transaction).
   * @throws Error if parent or label is empty or has a dot.
   */
  deleteSubdomain(parent: string, label: string, opts: DeleteOptions = {}): boolean {
    const domain = topLevelName(parent);
    const keys = subdomainKeys(getDomainKeySync(domain).pubkey, domain, checkLabel(label));
    const targets = [keys.subKey, keys.reverseKey].filter((key) => this.#byKey.has(key.toBase58()));
    return this.#deleteNames(targets, opts) !== undefined;
  }

  /** Deletes a name account (Delete, tag 3, by its owner); undefined signature if none. */
  deleteName(key: PublicKey, opts: DeleteOptions = {}): string | undefined {
    return this.#deleteNames(this.#byKey.has(key.toBase58()) ? [key] : [], opts);
  }

  /**
   * Transfers a name account (Transfer, tag 2): only bytes 32..64 change.
   * @throws Error when there is no name-program account at `key`.
   */
  transferName(key: PublicKey, newOwner: PublicKey): string {
    const stored = this.#nameAccount(key);
    const owner = headerOf(stored.data).owner;
    return this.#transact(owner, () => {
      const data = Buffer.from(stored.data);
      newOwner.toBuffer().copy(data, 32);
      this.#store(key, { data, lamports: stored.lamports });
      return [nameTransfer(key, owner, newOwner)];
    }).signature;
  }

  /**
   * `transferName` of `label.parent`'s account; the reverse record stays, as on mainnet.
   * @throws Error if the names are bad or the subdomain has no name account.
   */
  transferSubdomain(parent: string, label: string, newOwner: PublicKey): SubdomainKeys {
    const domain = topLevelName(parent);
    const keys = subdomainKeys(getDomainKeySync(domain).pubkey, domain, checkLabel(label));
    keys.signature = this.transferName(keys.subKey, newOwner);
    return keys;
  }

  /**
   * Writes `bytes` at `offset` after the header (Update, tag 1, by class or owner).
   * @throws Error when there is no name-program account at `key` or the bytes do not fit.
   */
  updateNameData(key: PublicKey, offset: number, bytes: Uint8Array): string {
    const stored = this.#nameAccount(key);
    const start = NAME_HEADER_LEN + checkSpace(offset);
    if (start + bytes.length > stored.data.length) {
      throw new Error(
        `update of ${bytes.length} bytes at ${offset} does not fit ${key.toBase58()}`,
      );
    }
    const header = headerOf(stored.data);
    const signer = header.nameClass.equals(ZERO_KEY) ? header.owner : header.nameClass;
    return this.#transact(signer, () => {
      const data = Buffer.from(stored.data);
      Buffer.from(bytes).copy(data, start);
      this.#store(key, { data, lamports: stored.lamports });
      return [nameUpdate(key, signer, offset, bytes)];
    }).signature;
  }

  /**
   * A Delete by a non-owner, failing as the name program fails it (`InvalidArgument`): the fee is
   * paid and the logs say "Delete Name", which a follower must not take for a deletion.
   * @throws Error when there is no name-program account at `key`.
   */
  failedDelete(key: PublicKey, signer: PublicKey): string {
    this.#nameAccount(key);
    return this.#transact(signer, () => [
      {
        ...nameDelete(key, signer, signer),
        fails: {
          message: 'The given name owner is incorrect or not a signer.',
          error: 'InvalidArgument',
          text: 'invalid program argument',
        },
      },
    ]).signature;
  }

  /** Like `onWrite`, per transaction, after its writes' `onWrite` calls. */
  onTransaction(listener: TransactionListener): () => void {
    this.#txListeners.add(listener);
    return () => {
      this.#txListeners.delete(listener);
    };
  }

  /** The transaction with this base58 signature, if kept. */
  getTransaction(signature: string): SimTransaction | undefined {
    const bytes = base58Decode(signature);
    return bytes && this.#bySignature.get(bytes.toString('latin1'));
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
    return this.#txs[this.#txs.length - 1];
  }

  /** Transactions since creation, kept or not. */
  get transactionCount(): number {
    return this.#txCount;
  }

  *transactionsNewestFirst(): IterableIterator<SimTransaction> {
    for (let i = this.#txs.length - 1; i >= this.#txHead; i--) {
      const tx = this.#txs[i];
      if (tx) yield tx;
    }
  }

  #nameAccount(key: PublicKey): StoredAccount {
    const stored = this.#byKey.get(key.toBase58());
    if (!stored || stored.ownerKey !== NAME_PROGRAM_ID.toBase58()) {
      throw new Error(`no name account at ${key.toBase58()}`);
    }
    return stored;
  }

  #deleteNames(keys: PublicKey[], opts: DeleteOptions): string | undefined {
    const first = keys[0] && this.#byKey.get(keys[0].toBase58());
    if (!first) return undefined;
    const payer = headerOf(first.data).owner;
    return this.#transact(payer, () => {
      const deletes: SimInstruction[] = [];
      for (const key of keys) {
        const stored = this.#byKey.get(key.toBase58());
        if (!stored) continue;
        deletes.push(nameDelete(key, headerOf(stored.data).owner, payer));
        this.#drop(key, stored.key, stored);
      }
      return opts.via ? [wrapperCall(opts.via, deletes)] : deletes;
    }).signature;
  }

  /** Writes a reverse record; returns the registrar's createReverse (inner Create, Update). */
  #writeReverse(
    payer: PublicKey,
    nameKey: PublicKey,
    reverseKey: PublicKey,
    parentKey: PublicKey | undefined,
    name: string,
  ): SimInstruction {
    const body = encodeReverseData(name);
    const existed = this.#byKey.has(reverseKey.toBase58());
    this.#store(reverseKey, {
      data: encodeNameAccount(
        { parent: parentKey ?? ZERO_KEY, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
        body,
      ),
    });
    const parentOwner = parentKey && this.#ownerOf(parentKey);
    const accounts = [
      { pubkey: NAME_PROGRAM_ID, isSigner: false, isWritable: false },
      { pubkey: ROOT_DOMAIN_ACCOUNT, isSigner: false, isWritable: false },
      { pubkey: reverseKey, isSigner: false, isWritable: true },
      { pubkey: SystemProgram.programId, isSigner: false, isWritable: false },
      { pubkey: CENTRAL_STATE, isSigner: false, isWritable: false },
      { pubkey: payer, isSigner: true, isWritable: true },
      { pubkey: SYSVAR_RENT_PUBKEY, isSigner: false, isWritable: false },
    ];
    if (parentKey && parentOwner) {
      accounts.push({ pubkey: parentKey, isSigner: false, isWritable: true });
      accounts.push({ pubkey: parentOwner, isSigner: true, isWritable: true });
    }
    return registrarCall(REGISTER_PROGRAM_ID, accounts, name, [
      nameCreate({
        payer,
        nameKey: reverseKey,
        owner: CENTRAL_STATE,
        nameClass: REVERSE_LOOKUP_CLASS,
        parent: parentKey ?? ZERO_KEY,
        parentOwner,
        name: nameKey.toBase58(),
        lamports: rentExemptLamports(NAME_HEADER_LEN + body.length),
        space: body.length,
        existed,
      }),
      nameUpdate(reverseKey, REVERSE_LOOKUP_CLASS, 0, body),
    ]);
  }

  #ownerOf(key: PublicKey): PublicKey | undefined {
    const stored = this.#byKey.get(key.toBase58());
    return stored && stored.data.length >= NAME_HEADER_LEN
      ? new PublicKey(stored.data.subarray(32, 64))
      : undefined;
  }

  #ensureParent(parent: string): { parentKey: PublicKey; parentOwner: PublicKey } {
    const parentKey = getDomainKeySync(topLevelName(parent)).pubkey;
    const existing = this.#byKey.get(parentKey.toBase58());
    if (existing && existing.data.length >= NAME_HEADER_LEN) {
      return { parentKey, parentOwner: new PublicKey(existing.data.subarray(32, 64)) };
    }
    return { parentKey: this.addDomain(parent), parentOwner: DEFAULT_SIM_OWNER };
  }

  /** The name-program instruction a bare `setAccount` amounts to. */
  #implicitWrite(
    pubkey: PublicKey,
    previous: StoredAccount | undefined,
    data: Buffer,
    header: NameHeader,
  ): SimInstruction {
    if (!previous || previous.ownerKey !== NAME_PROGRAM_ID.toBase58()) {
      const space = Math.max(0, data.length - NAME_HEADER_LEN);
      return nameCreate({
        payer: header.owner,
        nameKey: pubkey,
        owner: header.owner,
        nameClass: header.nameClass,
        parent: header.parent,
        parentOwner: header.parent.equals(ZERO_KEY) ? undefined : this.#ownerOf(header.parent),
        name: pubkey.toBase58(),
        lamports: rentExemptLamports(data.length),
        space,
        existed: previous !== undefined,
      });
    }
    const before = previous.data;
    const onlyOwner =
      before.length === data.length &&
      before.length >= NAME_HEADER_LEN &&
      before.compare(data, 0, 32, 0, 32) === 0 &&
      before.compare(data, 64, data.length, 64, before.length) === 0;
    const old = headerOf(before);
    if (onlyOwner) return nameTransfer(pubkey, old.owner, header.owner);
    let from = 0;
    while (from < data.length && data[from] === before[from]) from++;
    const offset = Math.max(0, from - NAME_HEADER_LEN);
    const signer = old.nameClass.equals(ZERO_KEY) ? old.owner : old.nameClass;
    return nameUpdate(pubkey, signer, offset, data.subarray(NAME_HEADER_LEN + offset));
  }

  /**
   * Runs `run` as one transaction paid by `feePayer`: one slot for all its writes; then keeps it
   * and notifies `onTransaction`. Returns its signature.
   */
  #transact(feePayer: PublicKey, run: () => SimInstruction[]): { signature: string } {
    const time = this.#now();
    const open: OpenTransaction = { signature: newSignature(), time, previous: new Map() };
    if (!this.#recording) {
      // Genesis: plain writes, a slot each.
      run();
      return { signature: base58Encode(open.signature) };
    }
    this.#bumpSlot(this.#retentionMs > 0 ? time : 0);
    this.#open = open;
    let instructions: SimInstruction[];
    try {
      instructions = run();
    } finally {
      this.#open = undefined;
    }
    return this.#record(feePayer, instructions, open);
  }

  #record(
    feePayer: PublicKey,
    instructions: SimInstruction[],
    open: OpenTransaction,
  ): RecordedTransaction {
    const written = new Map<string, [number, number]>();
    let storedGain = 0;
    for (const [key, previous] of open.previous) {
      const pre = previous?.lamports ?? 0;
      const post = this.#byKey.get(key)?.lamports ?? 0;
      written.set(key, [pre, post]);
      storedGain += post - pre;
    }
    // The payer paid fee and rent, and got deletes' refunds.
    const payerId = keyId(feePayer);
    let payer: [number, number] | undefined;
    if (!this.#byKey.has(feePayer.toBase58())) {
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
      slot: this.#slot,
      blockTime: Math.floor(Date.now() / 1000),
      time: open.time,
      index: this.#txCount++,
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
        const stored = this.#byKey.get(key);
        if (stored) return stored.lamports;
        const bytes = base58Decode(key);
        return (bytes && this.#wallets.get(bytes.toString('latin1'))) ?? DEFAULT_WALLET_LAMPORTS;
      },
    });
    this.#txs.push(tx);
    this.#bySignature.set(open.signature.toString('latin1'), tx);
    while (this.#txs.length - this.#txHead > this.#maxTransactions) {
      const old = this.#txs[this.#txHead++];
      if (old) this.#bySignature.delete(old.record.signature.toString('latin1'));
    }
    if (this.#txHead > COMPACT_AFTER && this.#txHead * 2 > this.#txs.length) {
      this.#txs = this.#txs.slice(this.#txHead);
      this.#txHead = 0;
    }
    for (const listener of this.#txListeners) {
      try {
        listener(tx);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
    return tx;
  }

  #bumpSlot(time: number): void {
    if (this.#retentionMs > 0) {
      this.#slotLog.push({ time, slotBefore: this.#slot });
      this.#prune(time);
    }
    this.#slot++;
  }

  #written(
    pubkey: PublicKey,
    key: string,
    account: StoredAccount | undefined,
    previous: StoredAccount | undefined,
  ): void {
    const open = this.#open;
    const time = this.#retentionMs > 0 ? (open?.time ?? this.#now()) : 0;
    if (this.#retentionMs > 0) this.#writeLog.push({ time, key, previous });
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
    for (const listener of this.#listeners) {
      try {
        listener(write);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** Drops log entries older than now - retention. */
  #prune(now: number): void {
    const cutoff = now - this.#retentionMs;
    while ((this.#slotLog[this.#slotHead]?.time ?? Infinity) <= cutoff) this.#slotHead++;
    while ((this.#writeLog[this.#writeHead]?.time ?? Infinity) <= cutoff) this.#writeHead++;
    if (this.#slotHead > COMPACT_AFTER && this.#slotHead * 2 > this.#slotLog.length) {
      this.#slotLog = this.#slotLog.slice(this.#slotHead);
      this.#slotHead = 0;
    }
    if (this.#writeHead > COMPACT_AFTER && this.#writeHead * 2 > this.#writeLog.length) {
      this.#writeLog = this.#writeLog.slice(this.#writeHead);
      this.#writeHead = 0;
    }
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

/** The chain as it was: `undone` holds earlier versions (undefined: absent then). */
class PastView implements ChainView {
  constructor(
    readonly chain: SimChain,
    readonly slot: number,
    readonly undone: ReadonlyMap<string, StoredAccount | undefined> | undefined,
  ) {}

  lookup(key: string): StoredAccount | undefined {
    if (this.undone?.has(key)) return this.undone.get(key);
    return this.chain.lookup(key);
  }

  ownedBy(programKey: string): Iterable<StoredAccount> {
    return this.#past(programKey, this.chain.ownedBy(programKey));
  }

  candidates(programKey: string, hints: readonly MemcmpHint[]): Iterable<StoredAccount> {
    return this.#past(programKey, this.chain.candidates(programKey, hints));
  }

  /** `now` less what was written since, plus the earlier versions of those (owned by the program). */
  *#past(programKey: string, now: Iterable<StoredAccount>): Iterable<StoredAccount> {
    const { undone } = this;
    for (const account of now) {
      if (!undone?.has(account.key)) yield account;
    }
    if (!undone) return;
    for (const account of undone.values()) {
      if (account?.ownerKey === programKey) yield account;
    }
  }
}

/**
 * Stored accounts by the bytes a name account's filters compare: its first one and two bytes
 * (the shards of a registry's bootstrap), bytes 0..32 (the parent) and bytes 64..96 (the class),
 * each a map from those bytes (latin1) to the accounts holding them, in the order they were
 * stored. A filtered read then walks one bucket instead of the whole program.
 */
class FieldIndex {
  readonly #first1 = new Map<string, Set<StoredAccount>>();
  readonly #first2 = new Map<string, Set<StoredAccount>>();
  readonly #parent = new Map<string, Set<StoredAccount>>();
  readonly #nameClass = new Map<string, Set<StoredAccount>>();

  add(account: StoredAccount): void {
    for (const [map, field] of this.#fieldsOf(account.data)) {
      let bucket = map.get(field);
      if (!bucket) {
        bucket = new Set();
        map.set(field, bucket);
      }
      bucket.add(account);
    }
  }

  delete(account: StoredAccount): void {
    for (const [map, field] of this.#fieldsOf(account.data)) {
      const bucket = map.get(field);
      bucket?.delete(account);
      if (bucket?.size === 0) map.delete(field);
    }
  }

  /**
   * The smallest bucket that holds every account passing one of `hints`, or undefined when no
   * hint fits an index (a memcmp elsewhere, or shorter than a byte).
   */
  narrowest(hints: readonly MemcmpHint[]): ReadonlySet<StoredAccount> | undefined {
    let best: ReadonlySet<StoredAccount> | undefined;
    for (const { offset, bytes } of hints) {
      let bucket: ReadonlySet<StoredAccount> | undefined;
      if (offset === 0 && bytes.length >= 32) bucket = this.#lookup(this.#parent, bytes, 0, 32);
      else if (offset === 0 && bytes.length >= 2) bucket = this.#lookup(this.#first2, bytes, 0, 2);
      else if (offset === 0 && bytes.length === 1) bucket = this.#lookup(this.#first1, bytes, 0, 1);
      else if (offset <= 64 && offset + bytes.length >= 96) {
        bucket = this.#lookup(this.#nameClass, bytes, 64 - offset, 96 - offset);
      } else continue;
      if (!best || bucket.size < best.size) best = bucket;
    }
    return best;
  }

  #lookup(
    map: Map<string, Set<StoredAccount>>,
    bytes: Buffer,
    from: number,
    to: number,
  ): ReadonlySet<StoredAccount> {
    return map.get(bytes.toString('latin1', from, to)) ?? EMPTY_SET;
  }

  *#fieldsOf(data: Buffer): Iterable<[Map<string, Set<StoredAccount>>, string]> {
    if (data.length >= 1) yield [this.#first1, data.toString('latin1', 0, 1)];
    if (data.length >= 2) yield [this.#first2, data.toString('latin1', 0, 2)];
    if (data.length >= 32) yield [this.#parent, data.toString('latin1', 0, 32)];
    if (data.length >= 96) yield [this.#nameClass, data.toString('latin1', 64, 96)];
  }
}

const EMPTY_SET: ReadonlySet<StoredAccount> = new Set();

/** First index at or after `from` with a later `time` (log sorted by time). */
function firstAfter(log: ReadonlyArray<{ time: number }>, from: number, time: number): number {
  let lo = from;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid]?.time ?? Infinity) > time) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function subdomainKeys(parentKey: PublicKey, parent: string, label: string): SubdomainKeys {
  const subKey = getDomainKeySync(`${label}.${parent}`).pubkey;
  return { subKey, reverseKey: getReverseKeyFromDomainKey(subKey, parentKey), parentKey };
}

/** `keys` with a lazy `signature` (base58 costs microseconds). */
function withSignature(keys: SubdomainKeys, tx: { readonly signature: string }): SubdomainKeys {
  return Object.defineProperty(keys, 'signature', { get: () => tx.signature, enumerable: true });
}

/** Zero keys where the data is too short. */
function headerOf(data: Buffer): NameHeader {
  const key = (at: number): PublicKey =>
    data.length >= at + 32 ? new PublicKey(data.subarray(at, at + 32)) : ZERO_KEY;
  return { parent: key(0), owner: key(32), nameClass: key(64) };
}

function copyOf(stored: StoredAccount): SimAccount {
  return {
    pubkey: stored.pubkey,
    data: Buffer.from(stored.data),
    owner: stored.owner,
    lamports: stored.lamports,
  };
}

function topLevelName(name: string): string {
  const bare = name.endsWith('.sol') ? name.slice(0, -4) : name;
  if (bare === '' || bare.includes('.')) {
    throw new Error(`expected a top-level .sol name, got ${JSON.stringify(name)}`);
  }
  return bare;
}

function checkLabel(label: string): string {
  if (label === '' || label.includes('.')) {
    throw new Error(`expected a subdomain label without dots, got ${JSON.stringify(label)}`);
  }
  return label;
}

function checkSpace(space: number): number {
  if (!Number.isSafeInteger(space) || space < 0) {
    throw new TypeError(`space must be a non-negative integer, got ${space}`);
  }
  return space;
}
