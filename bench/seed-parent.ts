/** A large parent seeded on the simulator's chain, for the benches that scan one. */
import { CENTRAL_STATE, REVERSE_LOOKUP_CLASS } from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import { hashName, nameAccountKey, reverseKeyFromDomainKey } from '../src/core/sns/pda.js';
import {
  DEFAULT_SIM_OWNER,
  DEFAULT_SUBDOMAIN_SPACE,
  encodeNameAccount,
  encodeReverseData,
  type SimChain,
  ZERO_KEY,
} from '../tools/rpc-sim/index.js';
import { labelMaker } from './lib.js';

/** The parent's name, how many subdomains, and the seed of their labels (`labelMaker`). */
export type SeedArgs = { parent: string; count: number; seed: number };

/**
 * Writes `count` subdomains under `parent` exactly as `SimChain.addSubdomain` lays them out (name
 * account with 2000 zero bytes, reverse record "\0" + label under the parent), with the fast
 * derivations of src/core/sns/pda.ts: the SDK's would take most of a minute for 10,000. The bench
 * checks the gateway's answer against the SDK's `findSubdomains` on this chain.
 */
export function seedParent(
  chain: SimChain,
  { parent, count, seed }: SeedArgs,
): { parentKey: Buffer; labels: string[] } {
  const parentPk = chain.addDomain(parent);
  const parentKey = parentPk.toBuffer();
  const label = labelMaker(seed);
  const labels: string[] = [];
  // Seeded as genesis accounts: a transaction per write would cost time and memory the bench
  // does not measure.
  chain.genesis(() => {
    for (let i = 0; i < count; i++) {
      const l = label(i);
      labels.push(l);
      const subKey = nameAccountKey(hashName(`\0${l}`), undefined, parentKey);
      chain.setAccount(new PublicKey(subKey), {
        data: encodeNameAccount(
          { parent: parentPk, owner: DEFAULT_SIM_OWNER, nameClass: ZERO_KEY },
          Buffer.alloc(DEFAULT_SUBDOMAIN_SPACE),
        ),
      });
      chain.setAccount(new PublicKey(reverseKeyFromDomainKey(subKey, parentKey)), {
        data: encodeNameAccount(
          { parent: parentPk, owner: CENTRAL_STATE, nameClass: REVERSE_LOOKUP_CLASS },
          encodeReverseData(`\0${l}`),
        ),
      });
    }
  });
  return { parentKey, labels: labels.sort() };
}
