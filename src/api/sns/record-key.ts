import type { Record } from '@bonfida/spl-name-service';
import type { DomainName } from './names.js';
import { domainKey, recordKeyV2, recordKeyV2Under, toBase58 } from '../../core/sns/pda.js';

/**
 * Derives SNS V2 record keys, offline (passed to the route so tests can replace it): the SDK's
 * `getRecordV2Key(domain + ".sol", record)` (@bonfida/spl-name-service 3.x), computed by
 * `recordKeyV2` of src/core/sns/pda.ts, bit-identical (test/pda.test.ts) and much faster.
 */
export class RecordKeyDeriver {
  /**
   * @param domain a parsed name (one or two labels, no suffix): derived as the SDK derives
   *   `domain.name + ".sol"`.
   * @param record a validated `Record` value.
   * @returns the base58 record-account key.
   * @throws RangeError for a name of more than two labels, as the SDK throws for one it cannot
   *   derive (the route maps it to 500).
   */
  derive(domain: DomainName, record: Record): string {
    return toBase58(recordKeyV2(domain.name, record));
  }

  /**
   * The keys of several records of one domain, as {@link derive} gives each, in the order of
   * `records`. The domain's name account is derived once for all of them, not once a record.
   *
   * @param domain a parsed name, as for {@link derive}.
   * @param records validated `Record` values.
   * @returns one base58 key per record, at the same index.
   * @throws RangeError as {@link derive} does.
   */
  deriveAll(domain: DomainName, records: readonly Record[]): string[] {
    if (records.length === 0) return [];
    const parent = domainKey(domain.name);
    return records.map((record) => toBase58(recordKeyV2Under(parent, record)));
  }
}
