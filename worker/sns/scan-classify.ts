import { ELEMENTS_PER_RANGE, type JsonElements } from '../rpc/bounded-json.js';
import { canonicalAccounts, type CanonicalAccounts } from './canonical-accounts.js';
import { decodeEnvelopeSplit, malformed, RpcCallError } from '../rpc/envelope.js';
import { isSlot } from '../../src/core/rpc/slot.js';
import type { ScannedMember } from '../../src/core/cache/scan-write.js';
import { packMember, type PackedMembers } from '../../src/core/cache/packed-members.js';
import {
  existingNameAccountKey,
  REVERSE_LOOKUP_CLASS,
  type KeySet,
} from '../../src/core/sns/pda.js';
import { base64Data, SCAN_SLICE } from './name-slices.js';
import { keysByBytes, readReverses, sliceOwner, type Reverses } from './reply-slices.js';

/**
 * The classification of a scan reply, run in the decode thread (./discovery-decode.ts's
 * `DECODERS`): its accounts sorted into subdomains with their reverse records, owners and labels.
 */

/** Base58 of a 32-byte key. */
const BASE58_KEY = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;
/** Base64 length of a whole slice. */
const SLICE_B64_LEN = Math.ceil(SCAN_SLICE.length / 3) * 4;

/** What a parent's accounts say, short of the cut reverse texts. */
export type ProgramAccountsSummary = {
  /** Labels whose reverse text came whole (and were not handed over), sorted unless streamed. */
  labels: string[];
  /** Subdomain account (base58) per label, same order. */
  children: string[];
  /** Owner (base58) per child, same order. */
  owners: string[];
  /** Reverse record (base58) per child, same order. */
  reverses: string[];
  /** Cut reverse records, and the subdomains (with owners) they belong to. */
  waiting: Array<{ reverse: string; children: string[]; owners: string[] }>;
  /** Cut reverse records some subdomain points at, to complete (and not handed over). */
  truncated: string[];
  slot: number | undefined;
  accounts: number;
  /**
   * Streamed with {@link MemberStream.answer} and large ({@link ListedPart.eager}): every label
   * handed over, sorted, for the scan's answer before its write.
   */
  answer?: string[];
};

/** A scan reply's accounts, in reply order: their keys and their slices' base64 text. */
type Accounts = CanonicalAccounts;

/** The reader of an account list as Agave writes it, read without its parse. */
const CANONICAL_ACCOUNTS = canonicalAccounts(SLICE_B64_LEN);

/**
 * The reply's accounts, each checked for `{ pubkey, account: { data } }` and its data for a
 * slice's base64 text: from `elements` when the account list was left out of the parse (parsed a
 * range at a time and dropped: only the key and the text are kept), else from the list in `reply`.
 */
function accountList(
  reply: unknown,
  elements: JsonElements | undefined,
  read: Accounts | undefined,
): Accounts & { slot: number | undefined } {
  const withContext = typeof reply === 'object' && reply !== null && !Array.isArray(reply);
  const list: unknown = withContext ? (reply as { value?: unknown }).value : reply;
  if (!Array.isArray(list)) throw malformed('getProgramAccounts: no account list');
  const slot = withContext ? (reply as { context?: { slot?: unknown } }).context?.slot : undefined;
  // A slot that is not one (Infinity, past 2^53, negative) is never stored.
  if (read) return { ...read, slot: isSlot(slot) ? slot : undefined };
  const count = elements ? elements.count : list.length;
  const pubkeys = new Array<string>(count);
  const texts = new Array<string>(count);
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
    pubkeys[i] = pubkey;
    texts[i] = base64Data(account.data, SLICE_B64_LEN);
  }
  // A slot that is not one (Infinity, past 2^53, negative) is never stored.
  return { pubkeys, texts, slot: isSlot(slot) ? slot : undefined };
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
 * What a streamed classification hands over: members, packed for the entry's write, with their
 * labels' sizes (for the answer's bounds), cut reverse records newly claimed (to complete), how
 * many subdomains wait for cut texts so far, and the reply's slot.
 */
export type ListedPart = {
  slot: number | undefined;
  members: PackedMembers;
  /** The labels' UTF-8 bytes, each with 3 more (an answer's quotes and comma). */
  answerBytes: number;
  /** The longest label's UTF-8 bytes (0 for none). */
  longestLabel: number;
  cut: string[];
  waiting: number;
  /**
   * The reply is large enough that its parts start small ({@link MemberStream.first}): the write
   * should send each as soon as Redis is free rather than wait for a full chunk.
   */
  eager: boolean;
};

/**
 * How a classification hands its members over as it lists them: a part once `size` members or
 * `cutBatch` cut records are listed.
 */
export type MemberStream = {
  readonly size: number;
  /**
   * Members of the first part of a reply that may list at least {@link EAGER_PARTS} parts' worth
   * of members, each part after twice the one before up to `size`: its write starts once the first few members
   * are listed, not a whole part later, and each part is ready about when Redis is done with the
   * one before. Absent: every part `size`.
   */
  readonly first?: number;
  readonly cutBatch: number;
  readonly emit: (part: ListedPart) => void;
  /**
   * A request waits on the scan: a reply large enough that its parts start small also lists its
   * labels, sorted, in the summary ({@link ProgramAccountsSummary.answer}), so that the request is
   * answered before the write is done (docs/design.md, "Early answers").
   */
  readonly answer?: boolean;
};

/**
 * Parts' worth of members a reply may list from which its parts start small
 * ({@link MemberStream.first}): a write of several chunks. What it may list is bounded by the
 * fewer of its reverse records and its other accounts (a member is one of each).
 */
export const EAGER_PARTS = 2;

/**
 * Lists a scan reply's accounts under their reverse records (looked up by their bytes), handing
 * the members over in parts when it is given a {@link MemberStream}, else keeping them.
 */
class Lister {
  /** Members listed and kept (none when streamed). */
  readonly members: ScannedMember[] = [];
  /** Members listed and not handed over, packed, and their labels' sizes (streamed). */
  private packed = '';
  private packedCount = 0;
  private answerBytes = 0;
  private longestLabel = 0;
  /** Cut reverse records, and the subdomains (with owners) they belong to. */
  readonly waiting = new Map<string, { children: string[]; owners: string[] }>();
  /** Cut reverse records claimed and not handed over, in the order claimed. */
  cut: string[] = [];
  /** Subdomains waiting for cut texts. */
  private waitingCount = 0;
  readonly claimed = new Set<string>();
  private readonly byBytes: KeySet<string>;
  private readonly ownerOf = new Map<string, string>();
  /** Members of the part being listed (streamed), and whether parts started small. */
  private partSize: number;
  private readonly eager: boolean;
  /** Labels handed over, for {@link ProgramAccountsSummary.answer}; none when not asked. */
  readonly answerLabels: string[] | undefined;

  constructor(
    private readonly accounts: Accounts,
    private readonly reverses: Reverses,
    private readonly parentKey: Uint8Array,
    private readonly slot: number | undefined,
    private readonly stream: MemberStream | undefined,
  ) {
    this.byBytes = keysByBytes(reverses);
    const size = stream?.size ?? 0;
    // A member is a reverse record and another account: the fewer of the two bounds them.
    const reverseRecords = reverses.labels.size;
    const mostMembers = Math.min(reverseRecords, accounts.pubkeys.length - reverseRecords);
    this.eager =
      stream?.first !== undefined && stream.first < size && mostMembers >= EAGER_PARTS * size;
    this.partSize = this.eager ? Math.max(1, stream?.first ?? size) : size;
    this.answerLabels = this.eager && stream?.answer === true ? [] : undefined;
  }

  /** Lists each account that is (`reverseRecords`) or is not a reverse record. */
  listAll(reverseRecords: boolean): void {
    const { pubkeys } = this.accounts;
    const { labels } = this.reverses;
    for (let i = 0; i < pubkeys.length; i++) {
      if (labels.has(pubkeys[i] as string) === reverseRecords) this.list(i);
    }
  }

  /** Lists account `i` under its reverse record, if the reply holds one. */
  private list(i: number): void {
    const pubkey = this.accounts.pubkeys[i] as string;
    const reverse = existingNameAccountKey(
      pubkey,
      REVERSE_LOOKUP_CLASS,
      this.parentKey,
      this.byBytes,
    );
    if (reverse === undefined) return;
    this.claimed.add(reverse);
    if (this.reverses.cut.has(reverse)) this.wait(i, reverse);
    else this.listWhole(i, reverse);
  }

  /** Lists account `i` under the reverse record `reverse`, its text whole. */
  private listWhole(i: number, reverse: string): void {
    const label = this.reverses.labels.get(reverse);
    if (!label) return;
    const account = this.accounts.pubkeys[i] as string;
    if (!this.stream) {
      this.members.push([label, account, this.owner(i), reverse]);
      return;
    }
    const bytes = Buffer.byteLength(label);
    this.answerLabels?.push(label);
    this.packed += packMember(label, bytes, account, this.owner(i), reverse);
    this.packedCount++;
    this.answerBytes += bytes + 3;
    if (bytes > this.longestLabel) this.longestLabel = bytes;
    if (this.packedCount >= this.partSize) {
      this.handOver(this.stream);
      // Parts handed over for their cut records leave the ramp where it was.
      this.partSize = Math.min(this.stream.size, this.partSize * 2);
    }
  }

  /** Hands the members and cut records listed so far over (once more at the end: the rest). */
  handOver(stream: MemberStream): void {
    stream.emit({
      slot: this.slot,
      members: { text: this.packed, count: this.packedCount },
      answerBytes: this.answerBytes,
      longestLabel: this.longestLabel,
      cut: this.cut,
      waiting: this.waitingCount,
      eager: this.eager,
    });
    this.packed = '';
    this.packedCount = 0;
    this.answerBytes = 0;
    this.longestLabel = 0;
    this.cut = [];
  }

  /** Account `i` waits for the completion of `reverse`'s cut text. */
  private wait(i: number, reverse: string): void {
    let found = this.waiting.get(reverse);
    if (!found) {
      found = { children: [], owners: [] };
      this.waiting.set(reverse, found);
      this.cut.push(reverse);
    }
    found.children.push(this.accounts.pubkeys[i] as string);
    found.owners.push(this.owner(i));
    this.waitingCount++;
    if (this.stream && this.cut.length >= this.stream.cutBatch) this.handOver(this.stream);
  }

  private owner(i: number): string {
    return sliceOwner(this.accounts.texts[i] as string, this.ownerOf);
  }
}

/**
 * Decodes a scan reply (`memcmp` on the parent, {@link SCAN_SLICE}) and sorts its accounts:
 * reverse records by key, and each account's reverse key (`getReverseKeyFromDomainKey` of its
 * base58 text), found among the reply's reverse records ({@link existingNameAccountKey}). A
 * reverse record's own reverse key is sought only while some reverse record is unclaimed.
 *
 * With `stream`, the members are handed over in parts as they are listed, unsorted and packed
 * for the entry's write (`PackedMembers`), the last part holding those left: a write fed with
 * them runs while the classification goes on; so are the cut records to complete, whose calls can
 * go out meanwhile. The summary then lists no member and no cut record to complete (its `waiting`
 * holds all of them). No part comes before the whole reply is read and checked, so a decode that
 * handed members over fails only by its thread's budgets, not by the reply's form.
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
  stream?: MemberStream,
): ProgramAccountsSummary {
  // The account list is read from the bytes when Agave wrote it, else parsed a range at a time,
  // never as one tree (docs/design.md, "Replies from an RPC"); the body is freed once the
  // accounts are out of it.
  const { result, elements, read } = decodeEnvelopeSplit<unknown, Accounts>(
    method,
    body,
    id,
    ['value'],
    release,
    CANONICAL_ACCOUNTS,
  );
  const { slot, ...accounts } = accountList(result, elements, read);
  release?.();
  const reverses = readReverses(accounts);
  // Cut texts are known only once completed; subdomains pointing at them wait.
  const lister = new Lister(accounts, reverses, parentKey, slot, stream);
  lister.listAll(false);
  // A reverse record's own reverse record would be one no other account claimed (two accounts
  // share a reverse key only through a SHA-256 collision): with none left, none has one.
  if (lister.claimed.size < reverses.labels.size) lister.listAll(true);
  // The rest goes over as a last part: the summary then holds no member and no cut record.
  if (stream) lister.handOver(stream);
  const { members, waiting, cut } = lister;
  if (!stream) members.sort(byLabel);
  return {
    labels: members.map((m) => m[0]),
    children: members.map((m) => m[1]),
    owners: members.map((m) => m[2]),
    reverses: members.map((m) => m[3]),
    waiting: [...waiting].map(([reverse, found]) => ({ reverse, ...found })),
    // Only texts a subdomain points at: others would let a reply cause calls for nothing. Those
    // handed over already are not again.
    truncated: cut,
    slot,
    accounts: accounts.pubkeys.length,
    ...(lister.answerLabels ? { answer: lister.answerLabels.sort() } : {}),
  };
}

/** Orders tuples by label as `sort()` orders labels (UTF-16 code units). */
export const byLabel = (a: readonly [string, ...string[]], b: readonly [string, ...string[]]) =>
  a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
