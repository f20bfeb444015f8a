import { decodeEnvelope, malformed } from '../rpc/envelope.js';
import { isSlot } from '../../core/rpc/slot.js';
import { REVERSE_LOOKUP_CLASS, reverseKeyFromDomainKey, toBase58 } from '../../core/sns/pda.js';

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
/**
 * The `dataSlice` of the `getProgramAccounts` call and of the subscriptions: the owner, the class,
 * then the start of a reverse record, from one byte before the owner (the parent's last byte,
 * ignored). That byte puts the class at byte 33, a multiple of 3, so its base64 starts at
 * character 44 and a reverse record is told by comparing text, without decoding; and it makes the
 * slice 99 bytes, 132 base64 characters without padding.
 */
export const SCAN_SLICE = Object.freeze({
  offset: 31,
  length: 1 + 32 + 32 + 4 + INLINE_TEXT_BYTES,
});
/** Where the owner, the class and the reverse record's data start in a {@link SCAN_SLICE}. */
export const SLICE_AT = Object.freeze({ owner: 1, class: 33, data: 65 });
/** The base64 character at which a slice's class starts (byte 33). */
const CLASS_B64_AT = (SLICE_AT.class / 3) * 4;
/**
 * The base64 text of the reverse-lookup class's first 30 bytes (40 characters, no padding): every
 * slice of a reverse record holds it at {@link CLASS_B64_AT}, so other accounts are skipped
 * without decoding.
 */
const REVERSE_CLASS_B64_PREFIX = REVERSE_LOOKUP_CLASS.subarray(0, 30).toString('base64');

/** Base58 text of a 32-byte key: 32 to 44 characters of the Bitcoin alphabet. */
const BASE58_KEY = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;
/** Base64 characters of a whole slice ({@link SCAN_SLICE}, no padding). */
const SLICE_B64_LEN = Math.ceil(SCAN_SLICE.length / 3) * 4;

/**
 * The base64 text of an account's `data` (`[text, "base64"]`).
 *
 * @param maxChars longest base64 text accepted: the length the request sliced.
 * @throws RpcCallError (malformed, not retried) for any other shape, or a longer text: a provider
 *   that ignores `dataSlice` sends whole accounts, and its list would read as empty.
 */
function base64Data(data: unknown, maxChars: number): string {
  if (
    !Array.isArray(data) ||
    data.length !== 2 ||
    typeof data[0] !== 'string' ||
    data[1] !== 'base64'
  ) {
    throw malformed('account data is not base64');
  }
  if (data[0].length > maxChars) {
    throw malformed(`account data longer than the ${maxChars} base64 characters sliced`);
  }
  return data[0];
}

/** The bytes of an account's `data`; see {@link base64Data}. */
export function decodeData(data: unknown, maxChars: number): Buffer {
  return Buffer.from(base64Data(data, maxChars), 'base64');
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
  /** The subdomain name account (base58) behind each of `labels`, in the same order. */
  children: string[];
  /** The owner (base58, from its header) of each of `children`, in the same order. */
  owners: string[];
  /**
   * Reverse records with a cut text, and the subdomains (keys, with their owners) whose reverse key
   * they are.
   */
  waiting: Array<{ reverse: string; children: string[]; owners: string[] }>;
  /**
   * The reverse records whose text was cut at the slice and that a subdomain points at, to
   * complete with getMultipleAccounts.
   */
  truncated: string[];
  slot: number | undefined;
  accounts: number;
};

type Account = { pubkey: string; data: unknown };

/** The accounts of a reply, each checked for the shape `{ pubkey, account: { data } }`. */
function accountList(reply: unknown): { accounts: Account[]; slot: number | undefined } {
  const withContext = typeof reply === 'object' && reply !== null && !Array.isArray(reply);
  const list: unknown = withContext ? (reply as { value?: unknown }).value : reply;
  if (!Array.isArray(list)) throw malformed('getProgramAccounts: no account list');
  const slot = withContext ? (reply as { context?: { slot?: unknown } }).context?.slot : undefined;
  const accounts = new Array<Account>(list.length);
  for (let i = 0; i < list.length; i++) {
    const item = list[i] as { pubkey?: unknown; account?: { data?: unknown } | null } | null;
    if (typeof item !== 'object' || item === null) {
      throw malformed('getProgramAccounts: an account entry is not an object');
    }
    const { pubkey, account } = item;
    if (typeof pubkey !== 'string' || !BASE58_KEY.test(pubkey)) {
      throw malformed('getProgramAccounts: account without a pubkey');
    }
    if (typeof account !== 'object' || account === null) {
      throw malformed('getProgramAccounts: account without data');
    }
    accounts[i] = { pubkey, data: account.data };
  }
  // A slot that is not one (Infinity, past 2^53, negative) is as good as none: never stored.
  return { accounts, slot: isSlot(slot) ? slot : undefined };
}

/** The owner in a slice's base64 text ({@link SCAN_SLICE}): bytes 1 to 33, base58. */
function sliceOwner(text: string): string {
  return toBase58(
    Buffer.from(text.slice(0, 44), 'base64').subarray(SLICE_AT.owner, SLICE_AT.class),
  );
}

/**
 * Decodes the body of a `getProgramAccounts` reply (a `memcmp` on the parent, the
 * {@link SCAN_SLICE}) and sorts its accounts: reverse records, by key, and for
 * every account the reverse key derived from it under the parent (`getReverseKeyFromDomainKey`,
 * from the base58 text the RPC returns, canonical as the SDK's `toBase58()` writes it).
 *
 * @param parentKey the parent's name account (32 bytes).
 * @throws RpcCallError for a body that is no JSON-RPC reply to `id` (../rpc/envelope.ts), and, not
 *   retried, for a reply whose accounts are not what the request asked for (see `malformed`).
 */
export function classifyProgramAccounts(
  method: string,
  body: Uint8Array,
  id: number,
  parentKey: Uint8Array,
): ProgramAccountsSummary {
  const { accounts, slot } = accountList(decodeEnvelope<unknown>(method, body, id));

  // Reverse records under this parent, by key: the text bytes fetched so far.
  const reverses = new Map<string, Buffer>();
  const truncated: string[] = [];
  const texts = new Array<string>(accounts.length);
  for (let i = 0; i < accounts.length; i++) {
    const { pubkey, data } = accounts[i] as Account;
    const text = base64Data(data, SLICE_B64_LEN);
    texts[i] = text;
    if (!text.startsWith(REVERSE_CLASS_B64_PREFIX, CLASS_B64_AT)) continue;
    const slice = Buffer.from(text, 'base64');
    if (!isReverseSlice(slice)) continue;
    const payload = slice.subarray(SLICE_AT.data);
    reverses.set(pubkey, payload);
    if (slice.length === SCAN_SLICE.length && payload.readUInt32LE(0) > INLINE_TEXT_BYTES)
      truncated.push(pubkey);
  }

  // Cut texts are known only once completed: the subdomains pointing at them wait for that.
  const cutKeys = new Set(truncated);
  const waiting = new Map<string, { children: string[]; owners: string[] }>();
  const members: Array<[label: string, child: string, owner: string]> = [];
  for (let i = 0; i < accounts.length; i++) {
    const child = (accounts[i] as Account).pubkey;
    const reverse = toBase58(reverseKeyFromDomainKey(child, parentKey));
    if (cutKeys.has(reverse)) {
      const found = waiting.get(reverse) ?? { children: [], owners: [] };
      found.children.push(child);
      found.owners.push(sliceOwner(texts[i] as string));
      waiting.set(reverse, found);
      continue;
    }
    const payload = reverses.get(reverse);
    const label = payload && reverseText(payload);
    if (label) members.push([label, child, sliceOwner(texts[i] as string)]);
  }
  members.sort(byLabel);
  return {
    labels: members.map((m) => m[0]),
    children: members.map((m) => m[1]),
    owners: members.map((m) => m[2]),
    waiting: [...waiting].map(([reverse, found]) => ({ reverse, ...found })),
    // Only the cut texts some subdomain points at: a reverse record no child names lists nothing,
    // and fetching it would let a reply send the discovery on follow-up calls for nothing.
    truncated: [...waiting.keys()],
    slot,
    accounts: accounts.length,
  };
}

/** Orders tuples by their label as `Array.prototype.sort` orders labels (UTF-16 code units). */
export const byLabel = (a: readonly [string, ...string[]], b: readonly [string, ...string[]]) =>
  a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;

/** Whether a {@link SCAN_SLICE} is a reverse record's: its class is the reverse-lookup class. */
export function isReverseSlice(slice: Buffer): boolean {
  return (
    slice.length >= SLICE_AT.data &&
    slice.subarray(SLICE_AT.class, SLICE_AT.data).equals(REVERSE_LOOKUP_CLASS)
  );
}

/**
 * The `dataSlice` that completes reverse texts: from the class (so the reply proves the slice was
 * honoured: a whole account starts with its parent), then the length and up to `maxTextBytes`.
 */
export const reverseTextSlice = (maxTextBytes: number) => ({
  offset: CLASS_OFFSET,
  length: 32 + 4 + maxTextBytes,
});

/**
 * Decodes a `getMultipleAccounts` reply for `count` reverse records sliced with
 * {@link reverseTextSlice}: each record's text, or null for a record gone since the first call.
 *
 * @throws RpcCallError (malformed, not retried) for a list of the wrong size, an entry that is not
 *   a reverse record's slice, or a text longer than `maxTextBytes` (a label past the bound).
 */
export function decodeReverseTexts(
  method: string,
  body: Uint8Array,
  id: number,
  count: number,
  maxTextBytes: number,
): Array<string | null> {
  const reply = decodeEnvelope<{ value?: unknown } | null>(method, body, id);
  const list = reply?.value;
  if (!Array.isArray(list) || list.length !== count) {
    throw malformed(`${method}: wrong account list`);
  }
  const { length } = reverseTextSlice(maxTextBytes);
  const maxChars = Math.ceil(length / 3) * 4;
  return list.map((entry: unknown) => {
    if (entry === null) return null;
    if (typeof entry !== 'object') throw malformed(`${method}: an account entry is not an object`);
    const slice = decodeData((entry as { data?: unknown }).data, maxChars);
    if (slice.length < 36 || !slice.subarray(0, 32).equals(REVERSE_LOOKUP_CLASS)) {
      throw malformed(`${method}: not a reverse record's slice`);
    }
    const payload = slice.subarray(32);
    if (payload.readUInt32LE(0) > maxTextBytes) {
      throw malformed(`${method}: a reverse text longer than ${maxTextBytes} bytes`);
    }
    return reverseText(payload) ?? null;
  });
}

/** What a `getMultipleAccounts` existence check saw: the slot it read at, and each key's fate. */
export type Existence = { slot: number | undefined; exists: boolean[] };

/**
 * Decodes a `getMultipleAccounts` reply for `count` keys asked with a `dataSlice` of length 0 (an
 * existence check: 1 call per 100 keys, no data): true for an account, false for a null entry
 * (closed; the name program's delete zeroes and closes it).
 *
 * @throws RpcCallError (malformed, not retried) for a list of the wrong size or an entry that is
 *   not an account object carrying no more data than was sliced.
 */
export function decodeExistence(
  method: string,
  body: Uint8Array,
  id: number,
  count: number,
): Existence {
  const reply = decodeEnvelope<{ value?: unknown; context?: { slot?: unknown } } | null>(
    method,
    body,
    id,
  );
  const list = reply?.value;
  if (!Array.isArray(list) || list.length !== count) {
    throw malformed(`${method}: wrong account list`);
  }
  const exists = list.map((entry: unknown) => {
    if (entry === null) return false;
    if (typeof entry !== 'object') throw malformed(`${method}: an account entry is not an object`);
    base64Data((entry as { data?: unknown }).data, 0);
    return true;
  });
  const slot = reply?.context?.slot;
  return { slot: isSlot(slot) ? slot : undefined, exists };
}

/**
 * Every decode the thread runs, by task kind (src/worker/sns/discovery-thread.ts dispatches on
 * it, and `DecodeThread.run()` takes its types from it): a new RPC method's decoder is one entry
 * here. Each gets the method, the body, the JSON-RPC id, and the task's own fields.
 */
export const DECODERS = {
  envelope: (method, body, id) => decodeEnvelope<unknown>(method, body, id),
  'program-accounts': (method, body, id, task: { parentKey: Uint8Array }) =>
    classifyProgramAccounts(method, body, id, task.parentKey),
  'reverse-texts': (method, body, id, task: { count: number; maxTextBytes: number }) =>
    decodeReverseTexts(method, body, id, task.count, task.maxTextBytes),
  existence: (method, body, id, task: { count: number }) =>
    decodeExistence(method, body, id, task.count),
} satisfies Record<string, (method: string, body: Uint8Array, id: number, task: never) => unknown>;
