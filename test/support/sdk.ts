import { findSubdomains, getDomainKeySync } from '@bonfida/spl-name-service';
import { Connection } from '@solana/web3.js';

/** What the SDK's own `findSubdomains` answers on the simulator at `url`, sorted: the oracle. */
export async function sdkSubdomains(url: string, parent: string): Promise<string[]> {
  const connection = new Connection(url, {
    commitment: 'confirmed',
    disableRetryOnRateLimit: true,
  });
  const labels = await findSubdomains(connection, getDomainKeySync(parent).pubkey);
  return labels.sort();
}
