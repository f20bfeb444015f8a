import { echoInput, InvalidInputError } from '../../core/errors.js';

/**
 * The `Record` enum (name -> value) of @bonfida/spl-name-service 3.x, as `GET /types/record`
 * returns it. A copy, so the API does not load the SDK, and @solana/web3.js with it, at run time
 * (both are development dependencies); test/derivation.test.ts checks it equals the SDK's.
 */
export const RECORD_ENUM = Object.freeze({
  IPFS: 'IPFS',
  ARWV: 'ARWV',
  SOL: 'SOL',
  ETH: 'ETH',
  BTC: 'BTC',
  LTC: 'LTC',
  DOGE: 'DOGE',
  Email: 'email',
  Url: 'url',
  Discord: 'discord',
  Github: 'github',
  Reddit: 'reddit',
  Twitter: 'twitter',
  Telegram: 'telegram',
  Pic: 'pic',
  SHDW: 'SHDW',
  POINT: 'POINT',
  BSC: 'BSC',
  Injective: 'INJ',
  Backpack: 'backpack',
  A: 'A',
  AAAA: 'AAAA',
  CNAME: 'CNAME',
  TXT: 'TXT',
  Background: 'background',
  BASE: 'BASE',
  IPNS: 'IPNS',
  Bio: 'bio',
} as const);

/** A value of {@link RECORD_ENUM}: what the SDK's `Record` type holds. */
export type RecordType = (typeof RECORD_ENUM)[keyof typeof RECORD_ENUM];

const RECORD_VALUES: ReadonlySet<string> = new Set<string>(Object.values(RECORD_ENUM));

/**
 * `raw` as one of the SDK's `Record` values ({@link RECORD_ENUM}), matched exactly (no trim, no case folding).
 *
 * @throws InvalidInputError for any other string.
 */
export function parseRecord(raw: string): RecordType {
  if (!RECORD_VALUES.has(raw)) {
    throw new InvalidInputError('unknown record', {
      detail: `record must be one of the values of /types/record, case-sensitive (got ${echoInput(raw)})`,
    });
  }
  return raw as RecordType;
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
export function parseRecordList(raw: string, max: number): RecordType[] {
  // Bounded split: a list far over `max` is not split whole.
  const items = raw.split(',', max + 1);
  if (raw === '' || items.length > max) {
    throw new InvalidInputError(raw === '' ? 'no records' : 'too many records', {
      detail: `records must hold 1 to ${max} values of /types/record, comma-separated${raw === '' ? ' (got none)' : ` (got more than ${max})`}`,
    });
  }
  const distinct = new Set<RecordType>();
  items.forEach((item, index) => {
    if (!RECORD_VALUES.has(item)) {
      throw new InvalidInputError('unknown record', {
        detail: `records: value ${index + 1} is not one of the values of /types/record, case-sensitive (got ${echoInput(item)})`,
      });
    }
    distinct.add(item as RecordType);
  });
  return [...distinct];
}
