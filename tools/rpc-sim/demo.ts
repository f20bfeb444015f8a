/**
 * Demo accounts for the simulator (`npm run rpc:sim`, tests).
 *
 * Mainnet truth (as of writing): `67679.sol` has the subdomains `bullish`, `hollaaa` and
 * `testing`, each with a reverse record; `bonfida.sol` exists. Only names, keys and layout
 * match mainnet: owners are `DEFAULT_SIM_OWNER`, name data is zeroed, and other mainnet
 * subdomains (e.g. of bonfida.sol) are not modelled.
 *
 * Made-up names, to show the edge cases of the SDK's `findSubdomains`:
 * - `demo.sol`: `alpha`, `beta`, `gamma` with reverse records (listed); `noreverse`, a name
 *   account without reverse record (not listed: findSubdomains reads labels from reverse
 *   records); `ghost`, a reverse record without name account (not listed either: it only
 *   lists reverse records of existing accounts under the parent).
 * - `empty.sol`: a domain without subdomains (findSubdomains gives []).
 */
import type { PublicKey } from '@solana/web3.js';
import type { SimChain } from './chain.js';

/** One demo parent domain and what the simulator holds under it. */
export interface DemoDomain {
  /** Top-level name without ".sol". */
  name: string;
  /** Subdomain labels with name account and reverse record. */
  subdomains: readonly string[];
  /** Subdomain labels with a name account but no reverse record. */
  withoutReverse: readonly string[];
  /** Labels with a reverse record under this parent but no name account. */
  orphanReverses: readonly string[];
  /** Where the data comes from. */
  note: string;
}

/** What `seedDemoChain` writes. */
/** Each demo domain's subdomain labels as `/subdomains` lists them: sorted. */
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
  /** Name account key of the domain. */
  key: PublicKey;
  /** What `findSubdomains(connection, key)` returns, sorted. */
  expectedSubdomains: string[];
}

/**
 * Writes `DEMO_DOMAINS` into `chain` (domains with their reverse records, subdomains,
 * orphan reverse records), replacing accounts at the same keys.
 * @returns one entry per demo domain, in `DEMO_DOMAINS` order.
 */
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
