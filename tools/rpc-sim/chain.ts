/**
 * In-memory account store for the RPC simulator, with helpers that lay accounts out the way
 * the SPL Name Service program and the SNS registrar store them on mainnet.
 *
 * Name account layout (what `NameRegistryState` in `@bonfida/spl-name-service` reads):
 *   bytes  0..32  parent name key (zero key when there is no parent)
 *   bytes 32..64  owner
 *   bytes 64..96  class (zero key when there is none)
 *   bytes 96..    the account's data (`space` bytes)
 *
 * Reverse records are name accounts whose class (and owner) is the registrar's central state
 * (`REVERSE_LOOKUP_CLASS` === `CENTRAL_STATE`) and whose data is a borsh string: u32
 * little-endian byte length, then UTF-8. Subdomain reverse records hold "\0" + label and have
 * the parent domain's key as header parent; top-level ones hold the bare name and no parent.
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
  nameCreate,
  nameDelete,
  nameTransfer,
  nameUpdate,
  newSignature,
  registrarCall,
  signerCount,
  walkInstructions,
  wrapperCall,
} from './transactions.js';
import type { SimInstruction, SimTransaction } from './transactions.js';
import { base58Decode, base58Encode } from './base58.js';

/** Length of the name account header (parent, owner, class: 32 bytes each). */
export const NAME_HEADER_LEN = 96;
/** Data bytes after the header given to top-level domains by `addDomain` by default. */
export const DEFAULT_DOMAIN_SPACE = 1000;
/** Data bytes after the header given to subdomains; what the SDK's `createSubdomain` uses. */
export const DEFAULT_SUBDOMAIN_SPACE = 2000;
/** The all-zero key (`11111111111111111111111111111111`), used for "no parent"/"no class". */
export const ZERO_KEY = PublicKey.default;
/** Wallet that owns names added without an explicit owner. A fixed key, not a mainnet wallet. */
export const DEFAULT_SIM_OWNER = new PublicKey(
  createHash('sha256').update('sns-gateway rpc-sim default owner').digest(),
);

/**
 * Rent-exempt balance in lamports for an account with `dataLength` bytes of data, using
 * mainnet's rent parameters ((128 + len) bytes * 3480 lamports/byte-year * 2 years).
 */
export function rentExemptLamports(dataLength: number): number {
  return (128 + dataLength) * 3480 * 2;
}

/** The three keys of a name account header. */
export interface NameHeader {
  parent: PublicKey;
  owner: PublicKey;
  nameClass: PublicKey;
}

/**
 * Builds name account data: the 96-byte header followed by `body`.
 * @returns a new Buffer of length 96 + body.length.
 */
export function encodeNameAccount(header: NameHeader, body: Uint8Array): Buffer {
  return Buffer.concat([
    header.parent.toBuffer(),
    header.owner.toBuffer(),
    header.nameClass.toBuffer(),
    body,
  ]);
}

/**
 * Encodes a reverse record body as the registrar writes it: u32 LE byte length + UTF-8 text.
 * Pass "\0" + label for subdomains, the bare name for top-level domains.
 */
export function encodeReverseData(name: string): Buffer {
  const text = Buffer.from(name, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(text.length, 0);
  return Buffer.concat([len, text]);
}

/** What `setAccount` takes. `owner` is the owning program (default `NAME_PROGRAM_ID`). */
export interface SimAccountInput {
  data: Uint8Array;
  /** Owning program; default `NAME_PROGRAM_ID`. */
  owner?: PublicKey;
  /** Balance in lamports; default `rentExemptLamports(data.length)`. */
  lamports?: number;
}

/** A copy of one stored account, as returned by `getAccount` and `accounts()`. */
export interface SimAccount {
  pubkey: PublicKey;
  /** A copy; changing it does not change the chain (use `setAccount`). */
  data: Buffer;
  /** Owning program. */
  owner: PublicKey;
  lamports: number;
}

/**
 * How the chain keeps an account. Internal to the simulator (the server reads it directly to
 * avoid copies); treat as read-only.
 */
export interface StoredAccount {
  readonly key: string;
  readonly pubkey: PublicKey;
  readonly data: Buffer;
  readonly ownerKey: string;
  readonly owner: PublicKey;
  readonly lamports: number;
  /** Lazily filled cache of `data.toString('base64')`. */
  base64?: string;
}

/** Options of `addDomain`. */
export interface AddDomainOptions {
  /** Data bytes after the header; default `DEFAULT_DOMAIN_SPACE` (1000). */
  space?: number;
  /** Also write the registrar's reverse record (default true). */
  reverse?: boolean;
}

/** Options of `addSubdomain`. */
export interface AddSubdomainOptions {
  /** Also write the reverse record (default true), as `createSubdomain` does. */
  reverse?: boolean;
  /** Data bytes after the header; default `DEFAULT_SUBDOMAIN_SPACE` (2000). */
  space?: number;
  /** Owner wallet of the subdomain; default the parent domain's owner. */
  owner?: PublicKey;
}

/** Keys written by `addSubdomain`. */
export interface SubdomainKeys {
  /** Base58 signature of the transaction that wrote them (absent when nothing was written). */
  signature?: string;
  /** The subdomain's name account, `getDomainKeySync(`${label}.${parent}`).pubkey`. */
  subKey: PublicKey;
  /** Where its reverse record lives (written only if `reverse` was not false). */
  reverseKey: PublicKey;
  /** The parent domain's name account. */
  parentKey: PublicKey;
}

/**
 * What RPC methods read: a slot and the accounts as of that slot. `SimChain` is one (the
 * chain now); `SimChain.asOf` gives one for the chain as it was a while ago.
 */
export interface ChainView {
  /** Slot of this state. */
  readonly slot: number;
  /** The stored account at a base58 address, without copying. */
  lookup(key: string): StoredAccount | undefined;
  /** Stored accounts owned by the program with this base58 key, without copying. */
  ownedBy(programKey: string): Iterable<StoredAccount>;
}

/** One account write, as `onWrite` listeners get it. */
export interface AccountWrite {
  /** Base58 address of the account. */
  readonly key: string;
  readonly pubkey: PublicKey;
  /** The account after the write; undefined when the write deleted it. */
  readonly account: StoredAccount | undefined;
  /** The account before the write; undefined when the write created it. */
  readonly previous: StoredAccount | undefined;
  /**
   * The chain's slot right after the write: the slot of its transaction (all writes of one
   * transaction share it), or, for a write outside any transaction, a slot of its own.
   */
  readonly slot: number;
  /** Base58 signature of the transaction making the write; undefined outside any. */
  readonly signature: string | undefined;
}

/** Called synchronously after each write; must not throw (see `onWrite`). */
export type WriteListener = (write: AccountWrite) => void;

/** Called synchronously once a transaction's writes are all visible; must not throw. */
export type TransactionListener = (tx: SimTransaction) => void;

/** Options of `deleteSubdomain` and `deleteName`. */
export interface DeleteOptions {
  /**
   * Delete through this program: one top-level instruction of `via` whose cross-program
   * invocations are the name-program Deletes (inner instructions at stack height 2), as a
   * program closing names for its users does. Default: the Deletes are top-level instructions.
   */
  via?: PublicKey;
}
/** Options of the `SimChain` constructor. */
export interface SimChainOptions {
  /** First slot number (default 1). */
  slot?: number;
  /**
   * Monotonic clock in milliseconds used to time-stamp history and transactions (default
   * `performance.now`); tests can pass a fake one to move time by hand.
   */
  now?: () => number;
  /**
   * Transactions kept for `getTransaction`/`getSignaturesForAddress` (default
   * `DEFAULT_MAX_TRANSACTIONS`); older ones are forgotten, as a node without long-term storage
   * forgets them.
   */
  maxTransactions?: number;
}

/** Default of `SimChainOptions.maxTransactions`. */
export const DEFAULT_MAX_TRANSACTIONS = 20_000;
/** Fee payers whose balance the chain remembers; the oldest is forgotten past this. */
const MAX_WALLETS = 10_000;
/** Starting balance of a wallet the simulator has not seen: 10 SOL. */
const DEFAULT_WALLET_LAMPORTS = 10_000_000_000;

/** The transaction being run: its signature and each written account's version before it. */
interface OpenTransaction {
  readonly signature: Buffer;
  /** Base58 of `signature`, once a write listener needed it. */
  signature58?: string;
  readonly time: number;
  readonly previous: Map<string, StoredAccount | undefined>;
}

/** A slot advance, kept while history is retained. */
interface SlotEntry {
  readonly time: number;
  readonly slotBefore: number;
}

/** An account write, kept while history is retained. */
interface WriteEntry {
  readonly time: number;
  readonly key: string;
  readonly previous: StoredAccount | undefined;
}

/** Log entries dropped from the head before the array is compacted. */
const COMPACT_AFTER = 1024;

/**
 * In-memory accounts, indexed by address and by owning program. Every mutation advances
 * `slot` by one; the server also advances it once per HTTP request it answers.
 *
 * History: with `retainHistory(ms)` > 0 the chain also logs, for `ms` milliseconds, every slot
 * advance and the previous version of every written account, so `asOf(age)` can rebuild the
 * state of `age` ms ago by undoing the writes made since. Only writes are logged (not the
 * whole state), so with retention 0 (the default) nothing is logged and reads cost as before.
 */
export class SimChain implements ChainView {
  #slot: number;
  readonly #byKey = new Map<string, StoredAccount>();
  readonly #byOwner = new Map<string, Map<string, StoredAccount>>();
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
  /** Kept transactions by `keyId`-style (latin1) signature bytes. */
  readonly #bySignature = new Map<string, RecordedTransaction>();
  #txCount = 0;
  readonly #maxTransactions: number;
  #open: OpenTransaction | undefined;
  /** Balances of fee payers the chain does not store, by `keyId`. */
  readonly #wallets = new Map<string, number>();
  #recording = true;

  /**
   * @param opts.slot first slot number (default 1); `opts.now`: the clock;
   *   `opts.maxTransactions`: transactions kept.
   * @throws TypeError unless maxTransactions is a positive integer.
   */
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

  /** The chain's clock (ms), the one transactions and history are stamped with. */
  nowMs(): number {
    return this.#now();
  }

  /** Current slot. */
  get slot(): number {
    return this.#slot;
  }

  /** Advances the slot by one and returns the new value. */
  advanceSlot(): number {
    this.#bumpSlot(this.#retentionMs > 0 ? this.#now() : 0);
    return this.#slot;
  }

  /** Number of stored accounts. */
  get size(): number {
    return this.#byKey.size;
  }

  /**
   * Stores (or replaces) an account. The data is copied. Notifies `onWrite` listeners.
   * A write of a name-program account outside the chain's own helpers is made a transaction of
   * its own, as the name program would make it: a Create for a new account, a Transfer when
   * only the owner field (bytes 32..64) changed, else an Update from the first changed byte.
   * @throws TypeError if lamports is not a non-negative safe integer.
   */
  setAccount(pubkey: PublicKey, account: SimAccountInput): void {
    const owner = account.owner ?? NAME_PROGRAM_ID;
    if (!this.#open && owner.equals(NAME_PROGRAM_ID)) {
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
    const data = Buffer.from(account.data);
    const lamports = account.lamports ?? rentExemptLamports(data.length);
    if (!Number.isSafeInteger(lamports) || lamports < 0) {
      throw new TypeError(`lamports must be a non-negative safe integer, got ${lamports}`);
    }
    const owner = account.owner ?? NAME_PROGRAM_ID;
    const stored: StoredAccount = {
      key: pubkey.toBase58(),
      pubkey,
      data,
      ownerKey: owner.toBase58(),
      owner,
      lamports,
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
    this.#written(pubkey, stored.key, stored, previous);
  }

  /**
   * Removes an account. Notifies `onWrite` listeners if it existed.
   * @returns whether it existed.
   */
  deleteAccount(pubkey: PublicKey): boolean {
    const key = pubkey.toBase58();
    const previous = this.#byKey.get(key);
    if (!previous) return false;
    if (!this.#open && previous.ownerKey === NAME_PROGRAM_ID.toBase58()) {
      // Deleting a name account is the name program's Delete, signed by its owner.
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
   * Registers a listener called synchronously after every write (`setAccount`,
   * `deleteAccount` and the helpers built on them), in write order, once the write is visible
   * and the slot advanced. A listener that throws does not stop the write or the other
   * listeners: its error is rethrown from a microtask (an uncaught exception).
   * @returns a function that removes the listener.
   */
  onWrite(listener: WriteListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Keeps the history needed by `asOf(age)` for every `age <= ms` from now on; 0 (the default)
   * stops logging and drops the log. History starts when this is called: a view older than
   * that shows the chain as it was at that moment, not before.
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

  /** Milliseconds of history kept (see `retainHistory`). */
  get historyRetentionMs(): number {
    return this.#retentionMs;
  }

  /**
   * The chain as it was `ageMs` milliseconds ago: the slot of then and the accounts of then
   * (writes made since are undone; accounts created since are absent). `asOf(0)`, or any age
   * while no history is retained, is the chain itself. Ages beyond the retention see the
   * oldest state still known. Cost: O(writes made in the last `ageMs`) to build, then lookups
   * as fast as the chain's own.
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

  /** @returns a copy of the account, or undefined if there is none. */
  getAccount(pubkey: PublicKey): SimAccount | undefined {
    const stored = this.#byKey.get(pubkey.toBase58());
    return stored && copyOf(stored);
  }

  /** Iterates over copies of all accounts, in insertion order. */
  *accounts(): IterableIterator<SimAccount> {
    for (const stored of this.#byKey.values()) yield copyOf(stored);
  }

  /** Internal: the stored account at a base58 address, without copying. */
  lookup(key: string): StoredAccount | undefined {
    return this.#byKey.get(key);
  }

  /** Internal: stored accounts owned by the program with this base58 key, without copying. */
  ownedBy(programKey: string): Iterable<StoredAccount> {
    return this.#byOwner.get(programKey)?.values() ?? [];
  }

  /**
   * Adds a top-level `.sol` name (a trailing ".sol" is ignored): header parent
   * `ROOT_DOMAIN_ACCOUNT`, the given owner, zero class, then `space` zero bytes. Unless
   * `reverse: false`, also the registrar's reverse record at `getReverseKeySync(name)`:
   * header parent zero, owner and class `REVERSE_LOOKUP_CLASS`, data = borsh string `name`.
   * Replaces existing accounts at those keys. One transaction: the name program's Create of
   * the domain, then the registrar's createReverse (a Create and an Update of the reverse record
   * as inner instructions).
   * @param owner wallet owning the name (default `DEFAULT_SIM_OWNER`).
   * @returns the domain's name account key.
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
   * Adds `label.parent` as `createSubdomain` would: the name account
   * `getDomainKeySync(`${label}.${parent}`).pubkey` (header parent = parent domain key, owner,
   * zero class, `space` zero bytes) and, unless `reverse: false`, its reverse record at
   * `getReverseKeyFromDomainKey(subKey, parentKey)` (header parent = parent domain key, owner
   * and class `REVERSE_LOOKUP_CLASS`, data = borsh string "\0" + label). Creates the parent
   * with `addDomain` if it does not exist (a transaction before). Replaces existing accounts at
   * those keys. One transaction, paid by the parent's owner: the name program's Create of the
   * subdomain (signed by the parent's owner), then the registrar's createReverse with the
   * reverse record's Create and Update as inner instructions; both writes share its slot.
   * @returns the keys and the transaction's signature.
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
   * Adds the reverse record of `label.parent` without its name account (deleting the name
   * account if there was one, a Delete transaction), like a subdomain that was deleted while its
   * reverse record stayed. Creates the parent with `addDomain` if it does not exist.
   * @returns the keys (signature: the reverse record's transaction); `subKey` holds no account.
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
   * Deletes `label.parent`'s name account and its reverse record (keys derived as in
   * `addSubdomain`) in one transaction: a name-program Delete (tag 3) of each that exists,
   * signed by its header owner, lamports refunded to the subdomain's owner (who pays); with
   * `opts.via`, both Deletes are inner instructions of one call of that program. Both share
   * the transaction's slot; each notifies `onWrite` listeners. Does not touch the parent.
   * @returns whether either account existed (false: no transaction).
   * @throws Error if parent or label is empty or has a dot.
   */
  deleteSubdomain(parent: string, label: string, opts: DeleteOptions = {}): boolean {
    const domain = topLevelName(parent);
    const keys = subdomainKeys(getDomainKeySync(domain).pubkey, domain, checkLabel(label));
    const targets = [keys.subKey, keys.reverseKey].filter((key) => this.#byKey.has(key.toBase58()));
    return this.#deleteNames(targets, opts) !== undefined;
  }

  /**
   * Deletes one name account with the name program's Delete (tag 3) signed by its header
   * owner, who gets the lamports; with `opts.via`, as an inner instruction of that program.
   * @returns the transaction's signature, or undefined when there is no such account.
   */
  deleteName(key: PublicKey, opts: DeleteOptions = {}): string | undefined {
    return this.#deleteNames(this.#byKey.has(key.toBase58()) ? [key] : [], opts);
  }

  /**
   * Gives the name account at `key` a new owner with the name program's Transfer (tag 2),
   * signed by its current owner: only bytes 32..64 change.
   * @returns the transaction's signature.
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
   * Transfers `label.parent` (its name account; keys as in `addSubdomain`) to `newOwner`; see
   * `transferName`. The reverse record does not change, as on mainnet.
   * @returns the keys and the transaction's signature.
   * @throws Error if the names are bad or the subdomain has no name account.
   */
  transferSubdomain(parent: string, label: string, newOwner: PublicKey): SubdomainKeys {
    const domain = topLevelName(parent);
    const keys = subdomainKeys(getDomainKeySync(domain).pubkey, domain, checkLabel(label));
    keys.signature = this.transferName(keys.subKey, newOwner);
    return keys;
  }

  /**
   * Writes `bytes` into the data of the name account at `key`, `offset` bytes after the
   * header, with the name program's Update (tag 1) signed by its class (when set) or owner.
   * @returns the transaction's signature.
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
   * A Delete of the name account at `key` signed by `signer`, who is not its owner: the
   * transaction fails as the name program makes it fail (it logs "The given name owner is
   * incorrect or not a signer." and the runtime "failed: invalid program argument"; err
   * `{"InstructionError":[0,"InvalidArgument"]}`). Nothing is written, but the fee is paid and
   * the logs mention the name program, with "Instruction: Delete Name" in them: what a follower
   * must not take for a deletion.
   * @returns the transaction's signature.
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

  /**
   * Registers a listener called synchronously after each transaction, once all its writes are
   * visible (after their `onWrite` calls). A listener that throws does not stop the others; its
   * error is rethrown from a microtask.
   * @returns a function that removes the listener.
   */
  onTransaction(listener: TransactionListener): () => void {
    this.#txListeners.add(listener);
    return () => {
      this.#txListeners.delete(listener);
    };
  }

  /** The transaction with this base58 signature, if still kept. */
  getTransaction(signature: string): SimTransaction | undefined {
    const bytes = base58Decode(signature);
    return bytes && this.#bySignature.get(bytes.toString('latin1'));
  }

  /**
   * Runs `fn` with transactions off: its writes are made as before (slots advance, `onWrite`
   * listeners hear them) but none is a transaction, as accounts a validator starts with
   * (genesis, a snapshot). For seeding big chains fast.
   * @returns what `fn` returns.
   */
  genesis<T>(fn: () => T): T {
    const was = this.#recording;
    this.#recording = false;
    try {
      return fn();
    } finally {
      this.#recording = was;
    }
  }

  /** The newest transaction, if any. */
  get lastTransaction(): SimTransaction | undefined {
    return this.#txs[this.#txs.length - 1];
  }

  /** Transactions run since the chain was made (kept or not). */
  get transactionCount(): number {
    return this.#txCount;
  }

  /** Kept transactions, newest first. */
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

  /**
   * Writes a reverse record (header parent = `parentKey` or zero, owner and class the central
   * state, data = borsh string `name`) and returns the registrar's createReverse instruction
   * that makes it, with the name program's Create and Update as its inner instructions.
   */
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

  /** The name-program instruction a bare `setAccount` of a name account amounts to. */
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
   * Runs `run` as one transaction paid by `feePayer`: the slot advances once, every write
   * `run` makes shares that slot, and `run` returns the instructions that made them. Then the
   * transaction is kept and `onTransaction` listeners hear of it.
   * @returns its signature.
   */
  #transact(feePayer: PublicKey, run: () => SimInstruction[]): { signature: string } {
    const time = this.#now();
    const open: OpenTransaction = { signature: newSignature(), time, previous: new Map() };
    if (!this.#recording) {
      // Genesis: plain writes, each with a slot of its own.
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
    // The fee payer paid the fee and the rent of what was created, and got deletes' refunds.
    const payerId = keyId(feePayer);
    let payer: [number, number] | undefined;
    if (!this.#byKey.has(feePayer.toBase58())) {
      const fee = LAMPORTS_PER_SIGNATURE * signerCount(feePayer, instructions);
      const pre = this.#wallets.get(payerId) ?? DEFAULT_WALLET_LAMPORTS;
      const post = Math.max(0, pre - fee - storedGain);
      payer = [pre, post];
      // A wallet running dry is topped up, so balances stay plausible however long a run is.
      this.#wallets.set(
        payerId,
        post < DEFAULT_WALLET_LAMPORTS / 100 ? DEFAULT_WALLET_LAMPORTS : post,
      );
      // Owners come and go (background transfers make a new one each time): keep the newest.
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
      // Inside a transaction the slot moved once, when it began.
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

  /** Drops log entries no view within the retention can need (older than now - retention). */
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
    const owned = this.#byOwner.get(stored.ownerKey);
    owned?.delete(key);
    if (owned?.size === 0) this.#byOwner.delete(stored.ownerKey);
    return true;
  }
}

/**
 * The chain as it was: accounts written since are replaced by their earlier versions
 * (`undone`, undefined = did not exist then); everything else is read from the chain.
 */
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

  *ownedBy(programKey: string): Iterable<StoredAccount> {
    const { undone } = this;
    for (const account of this.chain.ownedBy(programKey)) {
      if (!undone?.has(account.key)) yield account;
    }
    if (!undone) return;
    for (const account of undone.values()) {
      if (account?.ownerKey === programKey) yield account;
    }
  }
}

/** Index of the first entry at or after `from` with `time` > `time` (entries sorted by time). */
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

/** `keys` with `signature` read from `tx` when first asked for (base58 costs microseconds). */
function withSignature(keys: SubdomainKeys, tx: { readonly signature: string }): SubdomainKeys {
  return Object.defineProperty(keys, 'signature', { get: () => tx.signature, enumerable: true });
}

/** The header of name account data; zero keys where the data is too short to hold them. */
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
