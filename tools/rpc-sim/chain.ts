/**
 * The RPC simulator's chain: an `AccountStore` (account-store.ts) written as the SPL Name Service
 * and the SNS registrar write on mainnet (layouts in name-layout.ts). Every name-program write is
 * a transaction of the name program's instructions: the helpers say which (addDomain's Create
 * and createReverse, transferName's Transfer...), and a bare `setAccount` of a name account
 * becomes the Create, Transfer or Update it amounts to (name-writes.ts).
 */
import {
  CENTRAL_STATE,
  NAME_PROGRAM_ID,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  getDomainKeySync,
  getReverseKeyFromDomainKey,
} from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import { AccountStore } from './account-store.js';
import type { SimAccountInput, StoredAccount } from './chain-view.js';
import { nameCreate, nameDelete, nameTransfer, nameUpdate, wrapperCall } from './instructions.js';
import {
  DEFAULT_DOMAIN_SPACE,
  DEFAULT_SIM_OWNER,
  DEFAULT_SUBDOMAIN_SPACE,
  NAME_HEADER_LEN,
  ZERO_KEY,
  checkLabel,
  checkSpace,
  encodeNameAccount,
  encodeReverseData,
  headerOf,
  rentExemptLamports,
  subdomainKeys,
  topLevelName,
  withSignature,
} from './name-layout.js';
import type { SubdomainKeys } from './name-layout.js';
import { createReverse, implicitWrite } from './name-writes.js';
import type { SimInstruction } from './transactions.js';

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

/** Options of `deleteSubdomain` and `deleteName`. */
export interface DeleteOptions {
  /**
   * Delete as inner instructions (stack height 2) of one call of this program, as a program closing
   * names for users does; default top-level Deletes.
   */
  via?: PublicKey;
}

/**
 * The simulator's chain: the accounts, slot, history and transactions of `AccountStore`, with
 * the name program's writes (each helper one transaction) on top.
 */
export class SimChain extends AccountStore {
  /**
   * Stores (a copy of) an account and notifies `onWrite`. A bare write of a name account becomes
   * the name program's transaction: Create, Transfer (only owner bytes changed), else Update.
   * @throws TypeError if lamports is not a non-negative safe integer.
   */
  setAccount(pubkey: PublicKey, account: SimAccountInput): void {
    const owner = account.owner ?? NAME_PROGRAM_ID;
    // Genesis writes are no transaction: no instruction to build (a registry seeds 100,000s).
    if (!this.inTransaction && this.recording && owner.equals(NAME_PROGRAM_ID)) {
      const previous = this.lookup(pubkey.toBase58());
      const data = Buffer.from(account.data);
      const header = headerOf(data);
      this.transact(header.owner, () => {
        this.store(pubkey, account);
        return [implicitWrite(pubkey, previous, data, header, (key) => this.#ownerOf(key))];
      });
      return;
    }
    this.store(pubkey, account);
  }

  /** Removes an account (notifying `onWrite`); returns whether it existed. */
  deleteAccount(pubkey: PublicKey): boolean {
    const key = pubkey.toBase58();
    const previous = this.lookup(key);
    if (!previous) return false;
    if (!this.inTransaction && previous.ownerKey === NAME_PROGRAM_ID.toBase58()) {
      // The name program's Delete, signed by the owner.
      const owner = headerOf(previous.data).owner;
      this.transact(owner, () => {
        this.drop(pubkey, key, previous);
        return [nameDelete(pubkey, owner, owner)];
      });
      return true;
    }
    this.drop(pubkey, key, previous);
    return true;
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
    this.transact(owner, () => {
      const existed = this.lookup(domainKey.toBase58()) !== undefined;
      this.store(domainKey, {
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
    const tx = this.transact(parentOwner, () => {
      const existed = this.lookup(keys.subKey.toBase58()) !== undefined;
      this.store(keys.subKey, {
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
    const tx = this.transact(parentOwner, () => [
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
    const targets = [keys.subKey, keys.reverseKey].filter(
      (key) => this.lookup(key.toBase58()) !== undefined,
    );
    return this.#deleteNames(targets, opts) !== undefined;
  }

  /** Deletes a name account (Delete, tag 3, by its owner); undefined signature if none. */
  deleteName(key: PublicKey, opts: DeleteOptions = {}): string | undefined {
    return this.#deleteNames(this.lookup(key.toBase58()) !== undefined ? [key] : [], opts);
  }

  /**
   * Transfers a name account (Transfer, tag 2): only bytes 32..64 change.
   * @throws Error when there is no name-program account at `key`.
   */
  transferName(key: PublicKey, newOwner: PublicKey): string {
    const stored = this.#nameAccount(key);
    const owner = headerOf(stored.data).owner;
    return this.transact(owner, () => {
      const data = Buffer.from(stored.data);
      newOwner.toBuffer().copy(data, 32);
      this.store(key, { data, lamports: stored.lamports });
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
    return this.transact(signer, () => {
      const data = Buffer.from(stored.data);
      Buffer.from(bytes).copy(data, start);
      this.store(key, { data, lamports: stored.lamports });
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
    return this.transact(signer, () => [
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

  #nameAccount(key: PublicKey): StoredAccount {
    const stored = this.lookup(key.toBase58());
    if (!stored || stored.ownerKey !== NAME_PROGRAM_ID.toBase58()) {
      throw new Error(`no name account at ${key.toBase58()}`);
    }
    return stored;
  }

  #deleteNames(keys: PublicKey[], opts: DeleteOptions): string | undefined {
    const first = keys[0] && this.lookup(keys[0].toBase58());
    if (!first) return undefined;
    const payer = headerOf(first.data).owner;
    return this.transact(payer, () => {
      const deletes: SimInstruction[] = [];
      for (const key of keys) {
        const stored = this.lookup(key.toBase58());
        if (!stored) continue;
        deletes.push(nameDelete(key, headerOf(stored.data).owner, payer));
        this.drop(key, stored.key, stored);
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
    const existed = this.lookup(reverseKey.toBase58()) !== undefined;
    this.store(reverseKey, {
      data: encodeNameAccount(
        { parent: parentKey ?? ZERO_KEY, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
        body,
      ),
    });
    const parentOwner = parentKey && this.#ownerOf(parentKey);
    return createReverse({
      payer,
      nameKey,
      reverseKey,
      parentKey,
      parentOwner,
      name,
      body,
      existed,
    });
  }

  #ownerOf(key: PublicKey): PublicKey | undefined {
    const stored = this.lookup(key.toBase58());
    return stored && stored.data.length >= NAME_HEADER_LEN
      ? new PublicKey(stored.data.subarray(32, 64))
      : undefined;
  }

  #ensureParent(parent: string): { parentKey: PublicKey; parentOwner: PublicKey } {
    const parentKey = getDomainKeySync(topLevelName(parent)).pubkey;
    const existing = this.lookup(parentKey.toBase58());
    if (existing && existing.data.length >= NAME_HEADER_LEN) {
      return { parentKey, parentOwner: new PublicKey(existing.data.subarray(32, 64)) };
    }
    return { parentKey: this.addDomain(parent), parentOwner: DEFAULT_SIM_OWNER };
  }
}
