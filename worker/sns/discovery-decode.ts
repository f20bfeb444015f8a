import { ELEMENTS_PER_RANGE, type JsonElements } from '../rpc/bounded-json.js';
import { decodeEnvelope, decodeEnvelopeSplit, malformed, RpcCallError } from '../rpc/envelope.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import {
  existingNameAccountKey,
  fromBase58,
  hashName,
  REVERSE_LOOKUP_CLASS,
  toBase58,
} from '../../src/core/sns/pda.js';

/**
 * The heavy half of discovery, run in the discovery thread so a reply of megabytes never stalls
 * the worker's event loop; it hands back labels and the few texts still to fetch.
 */

/**
 * SPL Name Service layout: header `parent(32) | owner(32) | class(32)`, then data; reverse data is
 * `u32 LE length | UTF-8` (the SDK's `deserializeReverse`), a subdomain's starting with NUL.
 */
export const CLASS_OFFSET = 64;
export const HEADER_LEN = 96;
/**
 * Reverse-text bytes fetched inline by the scan; every account returns them, so few. 30 makes the
 * slice 66 bytes, a multiple of 3: base64 without padding, as long as for 28 bytes. Longer texts
 * are completed by `getMultipleAccounts`. Sizes: BENCHMARKS.md, "Inline reverse-text bytes".
 */
export const INLINE_TEXT_BYTES = 30;
/**
 * The `dataSlice` of the scan and subscriptions, from one byte before the owner: that byte puts
 * the class at byte 33 (a multiple of 3), so reverse records are told by comparing base64 text
 * without decoding, and the slice is 99 bytes (132 characters, no padding).
 */
export const SCAN_SLICE = Object.freeze({
  offset: 31,
  length: 1 + 32 + 32 + 4 + INLINE_TEXT_BYTES,
});
/** Offsets in a {@link SCAN_SLICE}. */
export const SLICE_AT = Object.freeze({ owner: 1, class: 33, data: 65 });
const CLASS_B64_AT = (SLICE_AT.class / 3) * 4;
/** The reverse class's first 30 bytes in base64, at {@link CLASS_B64_AT} in reverse slices. */
const REVERSE_CLASS_B64_PREFIX = REVERSE_LOOKUP_CLASS.subarray(0, 30).toString('base64');

/** Base58 of a 32-byte key. */
const BASE58_KEY = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;
/** Base64 length of a whole slice. */
const SLICE_B64_LEN = Math.ceil(SCAN_SLICE.length / 3) * 4;

/**
 * The base64 `data` of an account, at most `maxChars` (the sliced length).
 *
 * @throws RpcCallError (final) otherwise: a provider ignoring `dataSlice` sends whole accounts,
 *   and its list would read as empty.
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

/** An account's `data` bytes; see {@link base64Data}. */
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

/** What a parent's accounts say, short of the cut reverse texts. */
export type ProgramAccountsSummary = {
  /** Labels whose reverse text came whole, sorted. */
  labels: string[];
  /** Subdomain account (base58) per label, same order. */
  children: string[];
  /** Owner (base58) per child, same order. */
  owners: string[];
  /** Reverse record (base58) per child, same order. */
  reverses: string[];
  /** Cut reverse records, and the subdomains (with owners) they belong to. */
  waiting: Array<{ reverse: string; children: string[]; owners: string[] }>;
  /** Cut reverse records some subdomain points at, to complete. */
  truncated: string[];
  slot: number | undefined;
  accounts: number;
};

type Account = { pubkey: string; data: unknown };

/**
 * The reply's accounts, each checked for `{ pubkey, account: { data } }`: from `elements` when the
 * account list was left out of the parse (parsed a range at a time and dropped: only the pubkey
 * and the data are kept), else from the list in `reply`.
 */
function accountList(
  reply: unknown,
  elements: JsonElements | undefined,
): { accounts: Account[]; slot: number | undefined } {
  const withContext = typeof reply === 'object' && reply !== null && !Array.isArray(reply);
  const list: unknown = withContext ? (reply as { value?: unknown }).value : reply;
  if (!Array.isArray(list)) throw malformed('getProgramAccounts: no account list');
  const slot = withContext ? (reply as { context?: { slot?: unknown } }).context?.slot : undefined;
  const count = elements ? elements.count : list.length;
  const accounts = new Array<Account>(count);
  let range: unknown[] = list;
  let rangeFrom = 0;
  for (let i = 0; i < count; i++) {
    if (elements && i % ELEMENTS_PER_RANGE === 0) {
      range = elementRange(elements, i, Math.min(i + ELEMENTS_PER_RANGE, count));
      rangeFrom = i;
    }
    const item = range[i - rangeFrom] as {
      pubkey?: unknown;
      account?: { data?: unknown } | null;
    } | null;
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
  // A slot that is not one (Infinity, past 2^53, negative) is never stored.
  return { accounts, slot: isSlot(slot) ? slot : undefined };
}

/**
 * Elements `from` to `to - 1` ({@link JsonElements.range}); one that is not JSON fails as a body
 * that is not JSON does (decodeEnvelope).
 */
function elementRange(elements: JsonElements, from: number, to: number): unknown[] {
  try {
    return elements.range(from, to);
  } catch (err) {
    if (err instanceof SyntaxError) {
      throw new RpcCallError('getProgramAccounts: malformed JSON body', 'http_error', true);
    }
    throw err;
  }
}

/**
 * The owner in a slice's base64 text, as base58, through `known` (owner text -> base58): a parent's
 * subdomains share few owners, and a lookup costs a fraction of an encoding.
 */
function sliceOwner(text: string, known: Map<string, string>): string {
  const head = text.slice(0, 44);
  let owner = known.get(head);
  if (owner === undefined) {
    owner = toBase58(Buffer.from(head, 'base64').subarray(SLICE_AT.owner, SLICE_AT.class));
    known.set(head, owner);
  }
  return owner;
}

/**
 * Decodes a scan reply (`memcmp` on the parent, {@link SCAN_SLICE}) and sorts its accounts:
 * reverse records by key, and each account's reverse key (`getReverseKeyFromDomainKey` of its
 * base58 text), found among the reply's reverse records ({@link existingNameAccountKey}). A
 * reverse record's own reverse key is sought only while some reverse record is unclaimed.
 *
 * @param release called once the body is read (the decode thread frees the body there).
 * @throws RpcCallError for no JSON-RPC reply to `id`, and, final, for accounts of the wrong shape.
 */
export function classifyProgramAccounts(
  method: string,
  body: Uint8Array,
  id: number,
  parentKey: Uint8Array,
  release?: () => void,
): ProgramAccountsSummary {
  // The account list is parsed a range of accounts at a time, never as one tree (docs/design.md,
  // "Replies from an RPC"); the body is freed once the accounts are out of it.
  const { result, elements } = decodeEnvelopeSplit<unknown>(method, body, id, ['value'], release);
  const { accounts, slot } = accountList(result, elements);
  release?.();

  // This parent's reverse records by key: text bytes so far.
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

  // Cut texts are known only once completed; subdomains pointing at them wait.
  const cutKeys = new Set(truncated);
  const waiting = new Map<string, { children: string[]; owners: string[] }>();
  const members: Array<[label: string, child: string, owner: string, reverse: string]> = [];
  // The reverse records by their bytes, for looking candidate keys up without base58.
  const byBytes = new Map<string, string>();
  for (const key of reverses.keys()) byBytes.set(fromBase58(key).toString('latin1'), key);
  const find = (key: string) => byBytes.get(key);
  const claimed = new Set<string>();
  const ownerOf = new Map<string, string>();
  const list = (i: number, reverse: string | undefined) => {
    if (reverse === undefined) return;
    claimed.add(reverse);
    const child = (accounts[i] as Account).pubkey;
    if (cutKeys.has(reverse)) {
      const found = waiting.get(reverse) ?? { children: [], owners: [] };
      found.children.push(child);
      found.owners.push(sliceOwner(texts[i] as string, ownerOf));
      waiting.set(reverse, found);
      return;
    }
    const payload = reverses.get(reverse);
    const label = payload && reverseText(payload);
    if (label) members.push([label, child, sliceOwner(texts[i] as string, ownerOf), reverse]);
  };
  const reverseOf = (i: number) =>
    existingNameAccountKey(
      hashName((accounts[i] as Account).pubkey),
      REVERSE_LOOKUP_CLASS,
      parentKey,
      find,
    );
  for (let i = 0; i < accounts.length; i++) {
    if (!reverses.has((accounts[i] as Account).pubkey)) list(i, reverseOf(i));
  }
  // A reverse record's own reverse record would be one no other account claimed (two accounts
  // share a reverse key only through a SHA-256 collision): with none left, none has one.
  if (claimed.size < reverses.size) {
    for (let i = 0; i < accounts.length; i++) {
      if (reverses.has((accounts[i] as Account).pubkey)) list(i, reverseOf(i));
    }
  }
  members.sort(byLabel);
  return {
    labels: members.map((m) => m[0]),
    children: members.map((m) => m[1]),
    owners: members.map((m) => m[2]),
    reverses: members.map((m) => m[3]),
    waiting: [...waiting].map(([reverse, found]) => ({ reverse, ...found })),
    // Only texts a subdomain points at: others would let a reply cause calls for nothing.
    truncated: [...waiting.keys()],
    slot,
    accounts: accounts.length,
  };
}

/** Orders tuples by label as `sort()` orders labels (UTF-16 code units). */
export const byLabel = (a: readonly [string, ...string[]], b: readonly [string, ...string[]]) =>
  a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;

/** A {@link SCAN_SLICE} of a reverse record. */
export function isReverseSlice(slice: Buffer): boolean {
  return (
    slice.length >= SLICE_AT.data &&
    slice.subarray(SLICE_AT.class, SLICE_AT.data).equals(REVERSE_LOOKUP_CLASS)
  );
}

/**
 * The `dataSlice` completing reverse texts, from the class (a whole account would start with its
 * parent, proving the slice was ignored).
 */
export const reverseTextSlice = (maxTextBytes: number) => ({
  offset: CLASS_OFFSET,
  length: 32 + 4 + maxTextBytes,
});

/**
 * Each reverse text of a {@link reverseTextSlice} reply, or null for a record gone since.
 *
 * @throws RpcCallError (final) for a wrong count, a non-reverse slice, a text past `maxTextBytes`.
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

/** An existence check's read slot, and each key's presence. */
export type Existence = { slot: number | undefined; exists: boolean[] };

/**
 * Decodes a zero-length `dataSlice` `getMultipleAccounts` reply: false for a null entry (closed;
 * the name program's delete closes the account).
 *
 * @throws RpcCallError (final) for a wrong count or an entry that is not a dataless account.
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
 * Every decode the thread runs, by task kind (../discovery-thread.ts dispatches on it, and
 * `DecodeThread.run()` types from it): a new method's decoder is one entry.
 */
export const DECODERS = {
  envelope: (method, body, id) => decodeEnvelope<unknown>(method, body, id),
  'program-accounts': (method, body, id, task: { parentKey: Uint8Array; release?: () => void }) =>
    classifyProgramAccounts(method, body, id, task.parentKey, task.release),
  'reverse-texts': (method, body, id, task: { count: number; maxTextBytes: number }) =>
    decodeReverseTexts(method, body, id, task.count, task.maxTextBytes),
  existence: (method, body, id, task: { count: number }) =>
    decodeExistence(method, body, id, task.count),
} satisfies Record<string, (method: string, body: Uint8Array, id: number, task: never) => unknown>;
