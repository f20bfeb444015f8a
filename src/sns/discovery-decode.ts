import { decodeEnvelope, RpcCallError } from '../rpc/envelope.js';
import { REVERSE_LOOKUP_CLASS, reverseKeyFromDomainKey, toBase58 } from './pda.js';

/**
 * The heavy half of subdomain discovery (./subdomain-discovery.ts): the `getProgramAccounts` reply
 * parsed, its accounts sorted and a reverse key derived per account. It runs in the discovery
 * thread (./discovery-thread.ts), so a reply of megabytes never stalls the worker's event loop;
 * what it hands back is small (labels, and the few reverse texts still to fetch).
 */

/**
 * Name-account layout (SPL Name Service): a 96-byte header `parent(32) | owner(32) | class(32)`,
 * then the data. A reverse record's data is `u32 LE length | UTF-8 bytes` (the SDK's
 * `deserializeReverse`); a subdomain's reverse text starts with a NUL byte.
 */
export const CLASS_OFFSET = 64;
export const HEADER_LEN = 96;
/**
 * Reverse-text bytes fetched inline with the single `getProgramAccounts` call. Every account under
 * the parent returns this slice, so it is kept small; longer reverse texts (rare) are completed
 * with one `getMultipleAccounts` call per 100 accounts. 30 makes the slice 66 bytes, a multiple of
 * 3, so its base64 carries no padding: the same 88 characters per account as 28 bytes would take,
 * with two more bytes of text. Measured on a 10,000-subdomain parent (BENCHMARKS.md): 6.2 MB per
 * refresh against the SDK's 8.4 MB, and sizes from 20 to 32 within 1% of each other in bytes.
 */
export const INLINE_TEXT_BYTES = 30;
/** The `dataSlice` of the `getProgramAccounts` call: class, then the start of a reverse record. */
export const SLICE_LEN = 32 + 4 + INLINE_TEXT_BYTES;
/**
 * The base64 text of the reverse-lookup class's first 30 bytes (40 characters, no padding): every
 * slice of a reverse record starts with it, so other accounts are skipped without decoding.
 */
const REVERSE_CLASS_B64_PREFIX = REVERSE_LOOKUP_CLASS.subarray(0, 30).toString('base64');

type EncodedAccount = { pubkey: string; account: { data: [string, string] | string } };
type ProgramAccountsReply =
  EncodedAccount[] | { context?: { slot?: number }; value: EncodedAccount[] };

export function decodeData(data: [string, string] | string): Buffer {
  if (typeof data === 'string' || data[1] !== 'base64') {
    throw new RpcCallError('account data is not base64', 'http_error', false);
  }
  return Buffer.from(data[0], 'base64');
}

/** The SDK's `deserializeReverse(data, true)`: the text, minus one leading NUL. */
export function reverseText(payload: Buffer): string | undefined {
  if (payload.length < 4) return undefined;
  const len = payload.readUInt32LE(0);
  return payload
    .subarray(4, 4 + len)
    .toString('utf8')
    .replace(/^\0/, '');
}

/** What the accounts under a parent say, short of the reverse texts that did not fit the slice. */
export type ProgramAccountsSummary = {
  /** Labels of the subdomains whose reverse text came whole, sorted. */
  labels: string[];
  /** Reverse records with a cut text, and the subdomains (keys) whose reverse key they are. */
  waiting: Array<{ reverse: string; children: string[] }>;
  slot: number | undefined;
  accounts: number;
};

/**
 * The accounts of a `getProgramAccounts` reply, sorted. `truncated` lists the reverse records
 * whose text was cut at the slice, in account order: the discovery completes every one of them
 * (`getMultipleAccounts`) before it lists labels or throws `error`. An error with `truncated`
 * absent ends the discovery at once. The errors are those the discovery threw before it moved
 * here, at the same points.
 */
export type Classified<E> =
  | { kind: 'listed'; truncated: string[]; summary: ProgramAccountsSummary }
  | { kind: 'fails-after-truncated'; truncated: string[]; error: E }
  | { kind: 'fails'; error: E };

/**
 * Decodes the body of a `getProgramAccounts` reply (a `memcmp` on the parent, a `dataSlice` of
 * {@link SLICE_LEN} bytes from the class) and sorts its accounts: reverse records, by key, and for
 * every account the reverse key derived from it under the parent (`getReverseKeyFromDomainKey`,
 * from the base58 text the RPC returns, canonical as the SDK's `toBase58()` writes it).
 *
 * @param parentKey the parent's name account (32 bytes).
 * @throws RpcCallError for a body that is no JSON-RPC reply to `id` (./envelope.ts), which the RPC
 *   client treats as that round trip's failure; anything wrong past the envelope is returned.
 */
export function classifyProgramAccounts(
  method: string,
  body: Uint8Array,
  id: number,
  parentKey: Uint8Array,
): Classified<unknown> {
  const reply = decodeEnvelope<ProgramAccountsReply>(method, body, id);
  let truncated: string[] | undefined;
  try {
    const accounts = Array.isArray(reply) ? reply : reply?.value;
    if (!Array.isArray(accounts))
      throw new RpcCallError('getProgramAccounts: no account list', 'http_error', true);
    const slot = Array.isArray(reply) ? undefined : reply.context?.slot;

    // Reverse records under this parent, by key: the text bytes fetched so far.
    const reverses = new Map<string, Buffer>();
    const cut: string[] = [];
    for (let i = 0; i < accounts.length; i++) {
      const { pubkey, account } = accounts[i] as EncodedAccount;
      const data = account.data;
      if (
        Array.isArray(data) &&
        data[1] === 'base64' &&
        !data[0].startsWith(REVERSE_CLASS_B64_PREFIX)
      )
        continue;
      const slice = decodeData(data);
      if (slice.length < 32 || !slice.subarray(0, 32).equals(REVERSE_LOOKUP_CLASS)) continue;
      const payload = slice.subarray(32);
      reverses.set(pubkey, payload);
      if (slice.length === SLICE_LEN && payload.readUInt32LE(0) > INLINE_TEXT_BYTES)
        cut.push(pubkey);
    }
    truncated = cut;

    // Cut texts are known only once completed: the subdomains pointing at them wait for that.
    const cutKeys = new Set(cut);
    const waiting = new Map<string, string[]>();
    const labels: string[] = [];
    for (let i = 0; i < accounts.length; i++) {
      const child = (accounts[i] as EncodedAccount).pubkey;
      if (typeof child !== 'string')
        throw new RpcCallError('getProgramAccounts: account without a pubkey', 'http_error', true);
      const reverse = toBase58(reverseKeyFromDomainKey(child, parentKey));
      if (cutKeys.has(reverse)) {
        const children = waiting.get(reverse);
        if (children) children.push(child);
        else waiting.set(reverse, [child]);
        continue;
      }
      const payload = reverses.get(reverse);
      const label = payload && reverseText(payload);
      if (label) labels.push(label);
    }
    labels.sort();
    return {
      kind: 'listed',
      truncated,
      summary: {
        labels,
        waiting: [...waiting].map(([reverse, children]) => ({ reverse, children })),
        slot: typeof slot === 'number' ? slot : undefined,
        accounts: accounts.length,
      },
    };
  } catch (error) {
    return truncated
      ? { kind: 'fails-after-truncated', truncated, error }
      : { kind: 'fails', error };
  }
}
