import { Record } from '@bonfida/spl-name-service';
import { echoInput, InvalidInputError } from '../errors.js';

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
