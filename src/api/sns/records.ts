import { Record } from '@bonfida/spl-name-service';
import { echoInput, InvalidInputError } from '../../core/errors.js';

/** The SDK's `Record` enum object (name -> value), as `GET /types/record` returns it. */
export const RECORD_ENUM: Readonly<{ [name: string]: string }> = Object.freeze({ ...Record });

const RECORD_VALUES: ReadonlySet<string> = new Set(Object.values(RECORD_ENUM));

/**
 * Checks that `raw` is exactly one of the SDK's `Record` values (`SOL`, `email`, ...), with no
 * trimming or case folding: the contract asks for an exact match (docs/design.md, "Endpoints and
 * the error contract").
 *
 * @throws InvalidInputError for any other string.
 */
export function parseRecord(raw: string): Record {
  if (!RECORD_VALUES.has(raw)) {
    throw new InvalidInputError('unknown record', {
      detail: `record must be one of the values of /types/record, case-sensitive (got ${echoInput(raw)})`,
    });
  }
  return raw as Record;
}

/**
 * Parses the `records` of `/record-keys-v2`: comma-separated values, each checked as
 * {@link parseRecord} checks one (exact, no trimming: `SOL, email` holds `" email"`). A value
 * given more than once is answered once, where it first appears; every value given counts
 * towards `max`. With at most as many distinct values as the SDK has record types (28 in 3.x),
 * a list costs at most that many derivations, however long it is.
 *
 * @param raw the query value, e.g. `SOL,email,url`.
 * @param max most values accepted (duplicates included).
 * @returns the distinct records, in the order of their first appearance.
 * @throws InvalidInputError for an empty list, more than `max` values, or any value that is not
 *   a `Record` value (the `detail` names the first one, and its position from 1).
 */
export function parseRecordList(raw: string, max: number): Record[] {
  // A limit on split: a list far over `max` is not split whole.
  const items = raw.split(',', max + 1);
  if (raw === '' || items.length > max) {
    throw new InvalidInputError(raw === '' ? 'no records' : 'too many records', {
      detail: `records must hold 1 to ${max} values of /types/record, comma-separated${raw === '' ? ' (got none)' : ` (got more than ${max})`}`,
    });
  }
  const distinct = new Set<Record>();
  items.forEach((item, index) => {
    if (!RECORD_VALUES.has(item)) {
      throw new InvalidInputError('unknown record', {
        detail: `records: value ${index + 1} is not one of the values of /types/record, case-sensitive (got ${echoInput(item)})`,
      });
    }
    distinct.add(item as Record);
  });
  return [...distinct];
}
