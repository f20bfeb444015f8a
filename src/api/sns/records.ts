import { Record } from '@bonfida/spl-name-service';
import { echoInput, InvalidInputError } from '../../core/errors.js';

/** The SDK's `Record` enum (name -> value), as `GET /types/record` returns it. */
export const RECORD_ENUM: Readonly<{ [name: string]: string }> = Object.freeze({ ...Record });

const RECORD_VALUES: ReadonlySet<string> = new Set(Object.values(RECORD_ENUM));

/**
 * `raw` as one of the SDK's `Record` values, matched exactly (no trim, no case folding).
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
 * `records` of `/record-keys-v2`: comma-separated, each exact as in {@link parseRecord}.
 * Duplicates count towards `max` but are answered once, so a list costs at most one derivation
 * per record type.
 *
 * @returns the distinct records in first-seen order.
 * @throws InvalidInputError for an empty list, over `max` values, or an unknown value (the
 *   `detail` names the first, by position from 1).
 */
export function parseRecordList(raw: string, max: number): Record[] {
  // Bounded split: a list far over `max` is not split whole.
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
