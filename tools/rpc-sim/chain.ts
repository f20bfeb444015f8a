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
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  getDomainKeySync,
  getReverseKeyFromDomainKey,
} from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import { performance } from 'node:perf_hooks';

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
  /** The chain's slot right after the write (each write advances the slot by one). */
  readonly slot: number;
}

/** Called synchronously after each write; must not throw (see `onWrite`). */
export type WriteListener = (write: AccountWrite) => void;

/** Options of the `SimChain` constructor. */
export interface SimChainOptions {
  /** First slot number (default 1). */
  slot?: number;
  /**
   * Monotonic clock in milliseconds used to time-stamp history (default
   * `performance.now`); tests can pass a fake one to move time by hand.
   */
  now?: () => number;
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

  /** @param opts.slot first slot number (default 1); `opts.now`: the history clock. */
  constructor(opts: SimChainOptions = {}) {
    this.#slot = opts.slot ?? 1;
    this.#now = opts.now ?? (() => performance.now());
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
   * @throws TypeError if lamports is not a non-negative safe integer.
   */
  setAccount(pubkey: PublicKey, account: SimAccountInput): void {
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
    this.#remove(key);
    this.#written(pubkey, key, undefined, previous);
    return true;
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
   * Replaces existing accounts at those keys.
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
    this.setAccount(domainKey, {
      data: encodeNameAccount(
        { parent: ROOT_DOMAIN_ACCOUNT, owner, nameClass: ZERO_KEY },
        Buffer.alloc(checkSpace(opts.space ?? DEFAULT_DOMAIN_SPACE)),
      ),
    });
    if (opts.reverse !== false) {
      this.setAccount(getReverseKeyFromDomainKey(domainKey), {
        data: encodeNameAccount(
          { parent: ZERO_KEY, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
          encodeReverseData(domain),
        ),
      });
    }
    return domainKey;
  }

  /**
   * Adds `label.parent` as `createSubdomain` would: the name account
   * `getDomainKeySync(`${label}.${parent}`).pubkey` (header parent = parent domain key, owner,
   * zero class, `space` zero bytes) and, unless `reverse: false`, its reverse record at
   * `getReverseKeyFromDomainKey(subKey, parentKey)` (header parent = parent domain key, owner
   * and class `REVERSE_LOOKUP_CLASS`, data = borsh string "\0" + label). Creates the parent
   * with `addDomain` if it does not exist. Replaces existing accounts at those keys.
   * @throws Error if parent or label is empty or has a dot.
   */
  addSubdomain(parent: string, label: string, opts: AddSubdomainOptions = {}): SubdomainKeys {
    const { parentKey, parentOwner } = this.#ensureParent(parent);
    const keys = subdomainKeys(parentKey, topLevelName(parent), checkLabel(label));
    this.setAccount(keys.subKey, {
      data: encodeNameAccount(
        { parent: parentKey, owner: opts.owner ?? parentOwner, nameClass: ZERO_KEY },
        Buffer.alloc(checkSpace(opts.space ?? DEFAULT_SUBDOMAIN_SPACE)),
      ),
    });
    if (opts.reverse !== false) this.#writeSubReverse(keys, label);
    return keys;
  }

  /**
   * Adds the reverse record of `label.parent` without its name account (deleting the name
   * account if there was one), like a subdomain that was deleted while its reverse record
   * stayed. Creates the parent with `addDomain` if it does not exist.
   * @returns the keys; `subKey` holds no account afterwards.
   */
  addOrphanReverse(parent: string, label: string): SubdomainKeys {
    const { parentKey } = this.#ensureParent(parent);
    const keys = subdomainKeys(parentKey, topLevelName(parent), checkLabel(label));
    this.deleteAccount(keys.subKey);
    this.#writeSubReverse(keys, label);
    return keys;
  }

  /**
   * Deletes `label.parent`'s name account and its reverse record (keys derived as in
   * `addSubdomain`), as deleting a subdomain with the name program does for each. Each
   * deleted account advances the slot and notifies `onWrite` listeners. Does not create or
   * touch the parent.
   * @returns whether either account existed.
   * @throws Error if parent or label is empty or has a dot.
   */
  deleteSubdomain(parent: string, label: string): boolean {
    const domain = topLevelName(parent);
    const keys = subdomainKeys(getDomainKeySync(domain).pubkey, domain, checkLabel(label));
    const nameDeleted = this.deleteAccount(keys.subKey);
    const reverseDeleted = this.deleteAccount(keys.reverseKey);
    return nameDeleted || reverseDeleted;
  }

  #writeSubReverse(keys: SubdomainKeys, label: string): void {
    this.setAccount(keys.reverseKey, {
      data: encodeNameAccount(
        { parent: keys.parentKey, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
        encodeReverseData(`\0${label}`),
      ),
    });
  }

  #ensureParent(parent: string): { parentKey: PublicKey; parentOwner: PublicKey } {
    const parentKey = getDomainKeySync(topLevelName(parent)).pubkey;
    const existing = this.#byKey.get(parentKey.toBase58());
    if (existing && existing.data.length >= NAME_HEADER_LEN) {
      return { parentKey, parentOwner: new PublicKey(existing.data.subarray(32, 64)) };
    }
    return { parentKey: this.addDomain(parent), parentOwner: DEFAULT_SIM_OWNER };
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
    const time = this.#retentionMs > 0 ? this.#now() : 0;
    if (this.#retentionMs > 0) this.#writeLog.push({ time, key, previous });
    this.#bumpSlot(time);
    if (this.#listeners.size === 0) return;
    const write: AccountWrite = { key, pubkey, account, previous, slot: this.#slot };
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
