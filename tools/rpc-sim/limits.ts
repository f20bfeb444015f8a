/** The real RPC's limits and version the simulator holds to. */
/** Claimed by `getVersion` and `context.apiVersion`. */
export const SIM_SOLANA_VERSION = '2.2.0';
/** Real RPC's limit of getProgramAccounts filters. */
export const MAX_FILTERS = 4;
/** Real RPC's limit of getMultipleAccounts keys. */
export const MAX_MULTIPLE_ACCOUNTS = 100;
/** Largest memcmp filter and base58-encoded data, bytes. */
export const MAX_BASE58_BYTES = 128;
/** Agave's MAX_GET_CONFIRMED_SIGNATURES_FOR_ADDRESS2_LIMIT. */
export const MAX_SIGNATURES_LIMIT = 1000;
/** `getProgramAccountsV2`'s largest page (Helius: 1 to 10,000 accounts a request). */
export const MAX_V2_LIMIT = 10_000;
/** `getProgramAccountsV2`'s page without a `limit`. */
export const DEFAULT_V2_LIMIT = 1_000;
