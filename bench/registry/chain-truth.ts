/**
 * bench:registry's chain: the registry it seeds, what the chain holds as the bench changes it, and
 * which parents each step asks.
 */
import { randomBytes } from 'node:crypto';
import { PublicKey } from '@solana/web3.js';
import {
  domainKey,
  hashName,
  nameAccountKey,
  reverseKeyFromDomainKey,
} from '../../src/core/sns/pda.js';
import type { RegistryDerivation, SeededRegistry, SimChain } from '../../tools/rpc-sim/index.js';
import { MODES, type Mode, type RegistryOptions } from './options.js';

/** The gateway's own derivations (src/core/sns/pda.ts): the SDK's take minutes for 120,000 keys. */
export const FAST_DERIVATION: RegistryDerivation = {
  domainKey: (name) => domainKey(name),
  subdomainKey: (label, parentKey) => nameAccountKey(hashName(`\0${label}`), undefined, parentKey),
  reverseKey: (nameKey, parentKey) => reverseKeyFromDomainKey(nameKey, parentKey),
};

/** Uniform integers below n from a seed (the registry's own generator, another stream). */
export function seededInts(seed: number): (n: number) => number {
  let state = (seed ^ 0x9e3779b9) >>> 0;
  return (n) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return Math.floor((state / 2 ** 32) * n);
  };
}

// ---------------------------------------------------------------------------------------------
// What the chain holds, as the bench changed it.

/** Parent -> label -> owner (base58) of the listed subdomains; owners only where the bench set one. */
export type Truth = Map<string, Map<string, string | undefined>>;

export function truthOf(registry: SeededRegistry): Truth {
  const truth: Truth = new Map();
  for (const [parent, labels] of registry.subdomains) {
    truth.set(parent, new Map(labels.map((l) => [l, undefined])));
  }
  return truth;
}

export const labelsOf = (truth: Truth, parent: string): string[] =>
  [...(truth.get(parent)?.keys() ?? [])].sort();

export type ChangeKind = 'create' | 'transfer' | 'delete';
export type Made = { kind: ChangeKind; parent: string; label: string; owner?: string };

/**
 * Makes change `i` (creations, transfers and deletions in turn) under a parent drawn from
 * `names` (a transfer or deletion under one with subdomains), one transaction each.
 */
export function makeChange(
  chain: SimChain,
  truth: Truth,
  names: readonly string[],
  i: number,
  int: (n: number) => number,
): Made {
  const kind: ChangeKind = (['create', 'transfer', 'delete'] as const)[i % 3] ?? 'create';
  const withSubdomains = names.filter((p) => (truth.get(p)?.size ?? 0) > 1);
  if (kind === 'create' || withSubdomains.length === 0) {
    const parent = names[int(names.length)] as string;
    const label = `chg${i}-${randomBytes(3).toString('hex')}`;
    chain.addSubdomain(parent, label);
    if (!truth.has(parent)) truth.set(parent, new Map());
    truth.get(parent)?.set(label, undefined);
    return { kind: 'create', parent, label };
  }
  const parent = withSubdomains[int(withSubdomains.length)] as string;
  const labels = labelsOf(truth, parent);
  const label = labels[int(labels.length)] as string;
  if (kind === 'transfer') {
    const owner = new PublicKey(randomBytes(32));
    chain.transferSubdomain(parent, label, owner);
    truth.get(parent)?.set(label, owner.toBase58());
    return { kind, parent, label, owner: owner.toBase58() };
  }
  chain.deleteSubdomain(parent, label);
  truth.get(parent)?.delete(label);
  return { kind, parent, label };
}

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Which parents each step asks: disjoint, so every one is asked for the first time.

export type Pools = {
  /** Parents changes go under during the build (any name). */
  changeable: string[];
  /** The never-asked parents of (c). */
  asked: string[];
  /** Parents of (d), with subdomains, never asked. */
  unasked: string[];
};

export function pools(
  registry: SeededRegistry,
  mode: Mode,
  int: (n: number) => number,
  o: RegistryOptions,
): Pools {
  const shuffle = <T>(list: T[]): T[] => {
    for (let i = list.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [list[i], list[j]] = [list[j] as T, list[i] as T];
    }
    return list;
  };
  const withSubdomains = shuffle(
    [...registry.subdomains.keys()].filter((p) => p !== registry.largestParent),
  );
  const without = shuffle(registry.names.filter((n) => !registry.subdomains.has(n)));
  const nWith = Math.round(o.asked * 0.6);
  const nWithout = Math.round(o.asked * 0.3);
  const nMadeUp = o.asked - nWith - nWithout;
  // Each mode draws its own parents, so the second mode's are new to it too.
  const half = (list: string[]) =>
    mode === MODES[0] ? list.slice(0, list.length >> 1) : list.slice(list.length >> 1);
  const mine = half(withSubdomains);
  const mineWithout = half(without);
  const askedWith = [
    ...(mode === MODES[0] && registry.largestParent ? [registry.largestParent] : []),
    ...mine.slice(0, nWith),
  ].slice(0, nWith);
  const asked = shuffle([
    ...askedWith,
    ...mineWithout.slice(0, nWithout),
    ...Array.from(
      { length: nMadeUp },
      (_, i) => `madeup-${mode}-${i}-${randomBytes(4).toString('hex')}`,
    ),
  ]);
  const unasked = mine.slice(nWith, nWith + 3 * o.watch);
  const changeable = [...mine.slice(nWith + 3 * o.watch), ...mineWithout.slice(nWithout)];
  if (unasked.length < 3 * o.watch || changeable.length === 0 || askedWith.length < nWith) {
    throw new Error(
      `the registry is too small for ${o.asked} parents asked in ${o.modes.length} mode(s): ` +
        'raise --parents and --top-level, or lower --asked',
    );
  }
  return { changeable, asked, unasked };
}

// ---------------------------------------------------------------------------------------------
