import type { DomainName } from './names.js';
import type { RecordType } from './records.js';
import { domainKey, recordKeyV2, recordKeyV2Under, toBase58 } from '../../core/sns/pda.js';

/**
 * SNS V2 record keys offline, as the SDK's `getRecordV2Key(domain + ".sol", record)` (via
 * src/core/sns/pda.ts); a class so tests can replace it.
 */
export class RecordKeyDeriver {
  /**
   * @returns the base58 record-account key of `domain.name + ".sol"`.
   * @throws RangeError for more than two labels, as the SDK does (the route answers 500).
   */
  derive(domain: DomainName, record: RecordType): string {
    return toBase58(recordKeyV2(domain.name, record));
  }

  /**
   * {@link derive} for several records, in order; the domain key is derived once.
   *
   * @throws RangeError as {@link derive} does.
   */
  deriveAll(domain: DomainName, records: readonly RecordType[]): string[] {
    if (records.length === 0) return [];
    const parent = domainKey(domain.name);
    return records.map((record) => toBase58(recordKeyV2Under(parent, record)));
  }
}
