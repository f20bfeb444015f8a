/** Accounts as the simulated RPC writes them: encodings, data slices, filters, the JSON text. */
import type { MemcmpHint, StoredAccount } from './chain-view.js';
import { base58Encode } from './base58.js';
import { MAX_BASE58_BYTES } from './limits.js';
import { RpcError, RpcErrorCode } from './rpc-error.js';

/** u64::MAX, the real RPC's `rentEpoch` of rent-exempt accounts. */
const RENT_EPOCH_JSON = '18446744073709551615';
/**
 * Data encodings: `base64`/`base58` as `[data, encoding]`, `binary` (pubsub's legacy default) as
 * bare base58; `jsonParsed` served as base64, as the real RPC does for unparsable accounts.
 */
export type Encoding = 'base64' | 'base58' | 'binary';

/** Bytes `offset .. offset+length` of the data, clamped. */
export interface DataSlice {
  offset: number;
  length: number;
}

/**
 * A getProgramAccounts/programSubscribe filter over an account's data; a memcmp carries its
 * offset and bytes, so a read can look them up in the chain's indexes instead of scanning.
 */
export type Filter = ((data: Buffer) => boolean) & { readonly memcmp?: MemcmpHint };

/** Agave's placeholder for base58 data over `MAX_BASE58_BYTES`. */
const BASE58_TOO_LARGE = 'error: data too large for bs58 encoding';
const SYSTEM_PROGRAM = '11111111111111111111111111111111';

/**
 * One account as the RPC writes it, data cut by `slice`.
 * @param base58TooLarge over `MAX_BASE58_BYTES`: `'throw'` (HTTP, -32600) or `'placeholder'`
 *   (pubsub, as agave).
 */
export function accountJson(
  account: StoredAccount,
  encoding: Encoding,
  slice: DataSlice | undefined,
  base58TooLarge: 'throw' | 'placeholder' = 'throw',
): string {
  const { data } = account;
  let encoded: string;
  if (encoding === 'base58' || encoding === 'binary') {
    const bytes = slice ? data.subarray(slice.offset, slice.offset + slice.length) : data;
    if (bytes.length <= MAX_BASE58_BYTES) encoded = base58Encode(bytes);
    else if (base58TooLarge === 'placeholder') encoded = BASE58_TOO_LARGE;
    else {
      throw new RpcError(
        RpcErrorCode.invalidRequest,
        `Encoded binary (base 58) data should be less than ${MAX_BASE58_BYTES} bytes, please use Base64 encoding.`,
      );
    }
  } else if (slice) {
    const bytes = data.subarray(slice.offset, slice.offset + slice.length);
    encoded = bytes.length === 0 ? '' : bytes.toString('base64');
  } else {
    encoded = account.base64 ??= data.toString('base64');
  }
  const dataJson = encoding === 'binary' ? `"${encoded}"` : `["${encoded}","${encoding}"]`;
  return (
    `{"data":${dataJson},"executable":false,"lamports":${account.lamports},` +
    `"owner":"${account.ownerKey}","rentEpoch":${RENT_EPOCH_JSON},"space":${data.length}}`
  );
}

/** A closed account as accountNotification reports it (0 lamports, no data, system-owned). */
export function closedAccountJson(encoding: Encoding): string {
  const dataJson = encoding === 'binary' ? '""' : `["","${encoding}"]`;
  return (
    `{"data":${dataJson},"executable":false,"lamports":0,` +
    `"owner":"${SYSTEM_PROGRAM}","rentEpoch":0,"space":0}`
  );
}
