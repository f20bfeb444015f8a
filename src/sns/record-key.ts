import { getRecordV2Key, type Record } from '@bonfida/spl-name-service';
import { LRUCache } from 'lru-cache';
import { REGISTRY_SUFFIX, type DomainName } from './names.js';

/**
 * Derives SNS V2 record keys, offline, with a bounded LRU of results for hot names.
 *
 * The rule is the SDK's `getRecordV2Key(domain, record)`: the record key is the name-program PDA
 * of `sha256("SPL Name Service" + record)` with class `CENTRAL_STATE_SNS_RECORDS` and parent the
 * domain's name account. The derivation is pure, so a cached answer never goes stale.
 */
export class RecordKeyDeriver {
  private readonly cache: LRUCache<string, string> | undefined;

  /** @param cacheSize how many (domain, record) results to keep; 0 turns the cache off. */
  constructor(cacheSize: number) {
    this.cache = cacheSize > 0 ? new LRUCache({ max: cacheSize }) : undefined;
  }

  /**
   * @param domain a parsed name (one or two labels, no suffix); the `.sol` suffix is appended here.
   * @param record a validated `Record` value.
   * @returns the base58 record-account key.
   * @throws whatever the SDK throws for a name it cannot derive (the route maps it to 500).
   */
  derive(domain: DomainName, record: Record): string {
    const cacheKey = `${record}\u0000${domain.name}`;
    const cached = this.cache?.get(cacheKey);
    if (cached !== undefined) return cached;
    const key = getRecordV2Key(domain.name + REGISTRY_SUFFIX, record).toBase58();
    this.cache?.set(cacheKey, key);
    return key;
  }
}
