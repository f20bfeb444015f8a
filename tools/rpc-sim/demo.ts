/**
 * Demo accounts for the simulator. `67679.sol` (subdomains `bullish`, `hollaaa`, `testing`) and
 * `bonfida.sol` match mainnet in names, keys and layout only. Made up, for `findSubdomains`' edge
 * cases: `demo.sol` with `noreverse` (no reverse record) and `ghost` (reverse record, no account),
 * neither listed; `empty.sol` with none.
 */
import type { PublicKey } from '@solana/web3.js';
import type { SimChain } from './chain.js';

/** One demo parent and what the simulator holds under it. */
export interface DemoDomain {
  /** Without ".sol". */
  name: string;
  /** Labels with name account and reverse record. */
  subdomains: readonly string[];
  /** Labels with a name account only. */
  withoutReverse: readonly string[];
  /** Labels with a reverse record only. */
  orphanReverses: readonly string[];
  note: string;
}

/** Each demo parent's labels as `/subdomains` lists them (sorted). */
export const demoLabels = (): Map<string, string[]> =>
  new Map(DEMO_DOMAINS.map((d) => [d.name, [...d.subdomains].sort()]));

export const DEMO_DOMAINS: readonly DemoDomain[] = [
  {
    name: '67679',
    subdomains: ['bullish', 'hollaaa', 'testing'],
    withoutReverse: [],
    orphanReverses: [],
    note: 'mainnet truth',
  },
  {
    name: 'bonfida',
    subdomains: [],
    withoutReverse: [],
    orphanReverses: [],
    note: 'exists on mainnet; its subdomains are not modelled',
  },
  {
    name: 'demo',
    subdomains: ['alpha', 'beta', 'gamma'],
    withoutReverse: ['noreverse'],
    orphanReverses: ['ghost'],
    note: 'made up: listed, unlisted (no reverse) and orphan-reverse subdomains',
  },
  {
    name: 'empty',
    subdomains: [],
    withoutReverse: [],
    orphanReverses: [],
    note: 'made up: a domain without subdomains',
  },
];

/** A seeded parent domain. */
export interface SeededDomain extends DemoDomain {
  key: PublicKey;
  /** What `findSubdomains` returns, sorted. */
  expectedSubdomains: string[];
}

/** Writes `DEMO_DOMAINS` into `chain`, replacing accounts at their keys; one entry per domain. */
export function seedDemoChain(chain: SimChain): SeededDomain[] {
  return DEMO_DOMAINS.map((domain) => {
    const key = chain.addDomain(domain.name);
    for (const label of domain.subdomains) chain.addSubdomain(domain.name, label);
    for (const label of domain.withoutReverse) {
      chain.addSubdomain(domain.name, label, { reverse: false });
    }
    for (const label of domain.orphanReverses) chain.addOrphanReverse(domain.name, label);
    return { ...domain, key, expectedSubdomains: [...domain.subdomains].sort() };
  });
}
