/**
 * A whole name registry at scale, for the simulator: top-level names with their reverse records,
 * subdomains with theirs, and the accounts a bootstrap of a registry index must read past (record
 * accounts of other classes, v1-style records with no reverse record, orphan reverse records).
 * Laid out as `SimChain.addDomain` and `addSubdomain` lay them out, deterministic from a seed.
 */
import { createHash } from 'node:crypto';
import {
  CENTRAL_STATE,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  getDomainKeySync,
  getHashedNameSync,
  getNameAccountKeySync,
  getReverseKeyFromDomainKey,
} from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import {
  DEFAULT_DOMAIN_SPACE,
  DEFAULT_SUBDOMAIN_SPACE,
  ZERO_KEY,
  encodeNameAccount,
  encodeReverseData,
} from './name-layout.js';
import type { SimChain } from './chain.js';

/** How the registry's keys are derived; each returns 32 bytes. */
export interface RegistryDerivation {
  /** The SDK's `getDomainKeySync(name)` of a top-level name (no ".sol"). */
  domainKey(name: string): Uint8Array;
  /** The key of `label.parent`, `parentKey` the parent's (32 bytes). */
  subdomainKey(label: string, parentKey: Uint8Array): Uint8Array;
  /** The SDK's `getReverseKeyFromDomainKey(nameKey, parentKey?)`. */
  reverseKey(nameKey: Uint8Array, parentKey?: Uint8Array): Uint8Array;
}

/**
 * The SDK's derivations (about half a millisecond a name and its reverse record): a registry of
 * 50,000 names takes about half a minute to derive. Callers with faster ones pass them.
 */
export const SDK_DERIVATION: RegistryDerivation = {
  domainKey: (name) => getDomainKeySync(name).pubkey.toBuffer(),
  subdomainKey: (label, parentKey) =>
    getNameAccountKeySync(
      getHashedNameSync(`\0${label}`),
      undefined,
      new PublicKey(parentKey),
    ).toBuffer(),
  reverseKey: (nameKey, parentKey) =>
    getReverseKeyFromDomainKey(
      new PublicKey(nameKey),
      parentKey && new PublicKey(parentKey),
    ).toBuffer(),
};

/** What `seedRegistry` writes. Counts are accounts of that kind (reverse records apart). */
export interface RegistryOptions {
  /** Top-level names, each with its reverse record (all-zero parent field). */
  topLevel: number;
  /** Subdomains, each with its reverse record (parent at bytes 0..32). */
  subdomains?: number;
  /** Top-level names holding the subdomains (each at least one); default min(subdomains, 1). */
  parents?: number;
  /** Subdomains of the largest parent (default an even share); the others share the rest. */
  largest?: number;
  /** Accounts under top-level names with a class other than zero and the reverse-lookup one. */
  records?: number;
  /** Name accounts under top-level names with class zero and no reverse record. */
  v1Records?: number;
  /** Reverse records of subdomains whose name account does not exist. */
  orphanReverses?: number;
  /** Default 1: the same seed writes the same registry. */
  seed?: number;
  /** Data bytes after the header (defaults `DEFAULT_DOMAIN_SPACE`, `DEFAULT_SUBDOMAIN_SPACE`). */
  domainSpace?: number;
  subdomainSpace?: number;
  /** Default `SDK_DERIVATION`. */
  derive?: RegistryDerivation;
}

/** What `seedRegistry` wrote, for checking answers against it. */
export interface SeededRegistry {
  /** Every top-level name written (no ".sol"), in the order written. */
  readonly names: readonly string[];
  /** Parents with subdomains: name -> labels `findSubdomains` lists, sorted. */
  readonly subdomains: ReadonlyMap<string, readonly string[]>;
  /** The parent with the most subdomains, if any. */
  readonly largestParent: string | undefined;
  /** Name-program accounts written, reverse records included. */
  readonly accounts: number;
}

/** Classes of the record accounts (not mainnet keys: only "neither zero nor reverse" matters). */
const RECORD_CLASSES = [0, 1, 2, 3].map(
  (i) => new PublicKey(createHash('sha256').update(`rpc-sim record class ${i}`).digest()),
);

/**
 * Writes a registry into `chain` as genesis accounts (no transactions, so no notifications and
 * no slot per account): deterministic from `opts.seed`. Names are `r<letters><index>`, labels
 * `s<letters><index>`; owners random; record and v1-record keys random (nothing derives them).
 * @throws RangeError when a count is not a non-negative integer, `parents` exceeds `topLevel` or
 *   `subdomains`, or `largest` leaves the other parents without one each.
 */
export function seedRegistry(chain: SimChain, opts: RegistryOptions): SeededRegistry {
  const count = (value: number | undefined, what: string): number => {
    const n = value ?? 0;
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new RangeError(`${what} must be a non-negative integer, got ${value}`);
    }
    return n;
  };
  const topLevel = count(opts.topLevel, 'topLevel');
  const subdomains = count(opts.subdomains, 'subdomains');
  const parents = count(opts.parents ?? Math.min(subdomains, 1), 'parents');
  const records = count(opts.records, 'records');
  const v1Records = count(opts.v1Records, 'v1Records');
  const orphans = count(opts.orphanReverses, 'orphanReverses');
  if (parents > topLevel)
    throw new RangeError(`parents (${parents}) exceed topLevel (${topLevel})`);
  if (parents > subdomains) {
    throw new RangeError(`parents (${parents}) exceed subdomains (${subdomains})`);
  }
  if (subdomains > 0 && parents === 0) throw new RangeError('subdomains need parents >= 1');
  if ((records > 0 || v1Records > 0 || orphans > 0) && topLevel === 0) {
    throw new RangeError('records, v1 records and orphan reverse records need topLevel >= 1');
  }
  const largest = count(opts.largest ?? Math.ceil(subdomains / Math.max(parents, 1)), 'largest');
  const othersTake = subdomains - largest;
  if (parents > 0 && (largest < 1 || othersTake < parents - 1 || (parents === 1 && othersTake))) {
    throw new RangeError(
      `largest (${largest}) must leave each of the other ${parents - 1} parents a subdomain ` +
        `and no subdomain without a parent (${subdomains} in all)`,
    );
  }
  const derive = opts.derive ?? SDK_DERIVATION;
  const random = seededRandom(opts.seed ?? 1);
  const int = (n: number): number => Math.floor(random() * n);
  const letters = (min: number, span: number): string =>
    // fromCharCode makes a flat string; `+=` would keep a rope of one-letter pieces.
    String.fromCharCode(...Array.from({ length: min + int(span) }, () => 97 + int(26)));
  const key = (): PublicKey => {
    const bytes = Buffer.alloc(32);
    for (let i = 0; i < 32; i += 4) bytes.writeUInt32LE(Math.floor(random() * 2 ** 32), i);
    return new PublicKey(bytes);
  };
  const domainSpace = opts.domainSpace ?? DEFAULT_DOMAIN_SPACE;
  const subdomainSpace = opts.subdomainSpace ?? DEFAULT_SUBDOMAIN_SPACE;

  // Which names are parents, and how many subdomains each holds: the largest its share, the
  // others one each and the rest at random.
  const names = Array.from({ length: topLevel }, (_, i) => `r${letters(2, 10)}${i.toString(36)}`);
  const parentIndexes = pickDistinct(topLevel, parents, int);
  const shares = parentIndexes.map((_, i) => (i === 0 ? largest : 1));
  for (let left = subdomains - largest - (parents - 1); left > 0 && parents > 1; left--) {
    const j = 1 + int(parents - 1);
    shares[j] = (shares[j] ?? 0) + 1;
  }
  const listed = new Map<string, string[]>();
  let accounts = 0;

  const nameAccount = (
    at: Uint8Array,
    parent: PublicKey,
    owner: PublicKey,
    cls: PublicKey,
    space: number,
  ): void => {
    chain.setAccount(new PublicKey(at), {
      data: encodeNameAccount({ parent, owner, nameClass: cls }, Buffer.alloc(space)),
    });
    accounts++;
  };
  const reverse = (at: Uint8Array, parent: PublicKey, text: string): void => {
    chain.setAccount(new PublicKey(at), {
      data: encodeNameAccount(
        { parent, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
        encodeReverseData(text),
      ),
    });
    accounts++;
  };

  chain.genesis(() => {
    const keys = names.map((name) => {
      const domainKey = derive.domainKey(name);
      nameAccount(domainKey, ROOT_DOMAIN_ACCOUNT, key(), ZERO_KEY, domainSpace);
      reverse(derive.reverseKey(domainKey), ZERO_KEY, name);
      return domainKey;
    });
    let label = 0;
    parentIndexes.forEach((index, i) => {
      const parent = names[index] as string;
      const parentKey = keys[index] as Uint8Array;
      const parentPk = new PublicKey(parentKey);
      const labels: string[] = [];
      for (let n = shares[i] ?? 0; n > 0; n--) {
        const text = `s${letters(1, 12)}${(label++).toString(36)}`;
        const subKey = derive.subdomainKey(text, parentKey);
        nameAccount(subKey, parentPk, key(), ZERO_KEY, subdomainSpace);
        reverse(derive.reverseKey(subKey, parentKey), parentPk, `\0${text}`);
        labels.push(text);
      }
      listed.set(parent, labels.sort());
    });
    const anyParent = (): { parentKey: Uint8Array; parentPk: PublicKey } => {
      const parentKey = keys[int(topLevel)] as Uint8Array;
      return { parentKey, parentPk: new PublicKey(parentKey) };
    };
    for (let i = 0; i < records; i++) {
      const cls = RECORD_CLASSES[i % RECORD_CLASSES.length] as PublicKey;
      nameAccount(key().toBuffer(), anyParent().parentPk, key(), cls, 32 + int(64));
    }
    for (let i = 0; i < v1Records; i++) {
      nameAccount(key().toBuffer(), anyParent().parentPk, key(), ZERO_KEY, 32 + int(64));
    }
    for (let i = 0; i < orphans; i++) {
      const { parentKey, parentPk } = anyParent();
      const text = `o${letters(1, 12)}${i.toString(36)}`;
      reverse(
        derive.reverseKey(derive.subdomainKey(text, parentKey), parentKey),
        parentPk,
        `\0${text}`,
      );
    }
  });
  let largestParent: string | undefined;
  for (const [parent, labels] of listed) {
    if (largestParent === undefined || labels.length > (listed.get(largestParent)?.length ?? 0)) {
      largestParent = parent;
    }
  }
  return { names, subdomains: listed, largestParent, accounts };
}

/** `k` distinct indexes below `n`, in a seeded order (a partial Fisher-Yates shuffle). */
function pickDistinct(n: number, k: number, int: (n: number) => number): number[] {
  const swapped = new Map<number, number>();
  const at = (i: number): number => swapped.get(i) ?? i;
  const picked: number[] = [];
  for (let i = 0; i < k; i++) {
    const j = i + int(n - i);
    const value = at(j);
    swapped.set(j, at(i));
    picked.push(value);
  }
  return picked;
}

/** Uniform numbers in [0, 1) from a 32-bit seed (mulberry32: small, fast, reproducible). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
