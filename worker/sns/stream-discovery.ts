import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import type { ScannedMember } from '../../src/core/cache/subdomain-cache.js';
import { packMembers, type PackedMembers } from '../../src/core/cache/packed-members.js';
import { domainKey } from '../../src/core/sns/pda.js';
import { INLINE_TEXT_BYTES, type ProgramAccountsSummary } from './discovery-decode.js';
import {
  AnswerBounds,
  completeTruncated,
  MULTIPLE_ACCOUNTS_BATCH,
  pendingBytes,
  scanUnder,
  type DiscoveryLane,
} from './subdomain-discovery.js';

/**
 * Discovery whose members go to a write as the decode thread lists them (docs/design.md,
 * "Discovery"): a refresh of the configured endpoint writes its entry while the thread goes on.
 */

/** Where a streamed scan's members go ({@link streamSubdomains}): the entry's write. */
export type MemberSink = {
  /** Members in a part the decode thread hands over: at most this many a call of {@link add}. */
  readonly partMembers: number;
  /**
   * Members of a large reply's first part, the parts after doubling up to `partMembers`
   * (`MemberStream.first`, ./scan-classify.ts); absent: every part `partMembers`.
   */
  readonly firstPartMembers?: number;
  /**
   * Takes members of the scan: each once, unsorted, in parts packed for the write (none of more
   * than `partMembers`), the first while the reply is still being decoded; `slot` is the reply's.
   * `eager`: the reply is large and its parts start small, so the write should send them as soon
   * as it can (`ScanWrite.addPacked`). Called synchronously; a throw fails the scan.
   */
  add(slot: number | undefined, members: PackedMembers, eager: boolean): void;
  /**
   * Every member has been handed over but those whose cut texts are being completed: what the
   * write holds back for a fuller chunk is worth sending now, while the completions run.
   */
  listed?(): void;
  /**
   * A request waits on the scan: when the reply is large (its parts start small), the scan's
   * labels come back sorted ({@link ScanHead.answer}) for its answer before the write is done.
   */
  readonly answer?: boolean;
};

/** What a streamed scan found, its members aside. */
export type ScanHead = {
  slot: number | undefined;
  /** Accounts the scan returned (all kinds). */
  accounts: number;
  /** Members handed to the sink. */
  listed: number;
  /**
   * Every label handed to the sink, sorted: only when {@link MemberSink.answer} asked for it, the
   * reply was large and no label came twice.
   */
  answer?: string[];
};

/**
 * `discoverSubdomains` (./subdomain-discovery.ts), its members handed to `sink` as the decode thread lists them rather
 * than returned sorted at the end: a write fed with them runs while the thread goes on (docs/design.md,
 * "Discovery"). The lane's bounds are checked as members come, so a scan past them fails after
 * some were handed over.
 *
 * @throws RpcCallError as `discoverSubdomains`; what `sink.add` throws.
 */
export async function streamSubdomains(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  parent: string,
  sink: MemberSink,
  signal?: AbortSignal,
  minContextSlot?: number,
): Promise<ScanHead> {
  const bounds = new AnswerBounds(lane);
  let listed = 0;
  const count = (members: readonly ScannedMember[]) => {
    for (const member of members) bounds.label(member[0]);
  };
  // Late members (completed cut texts) go as the parts of the listing went.
  let eager = false;
  const hand = (slot: number | undefined, members: PackedMembers) => {
    listed += members.count;
    if (members.count > 0) sink.add(slot, members, eager);
  };
  // The write stages a part as it comes, whole (packed, it cannot split one): the completed
  // members (any number) go in parts no larger than the thread's.
  const partMembers = Math.max(1, sink.partMembers);
  const handAll = (slot: number | undefined, members: readonly ScannedMember[]) => {
    for (let from = 0; from < members.length; from += partMembers) {
      hand(slot, packMembers(members.slice(from, from + partMembers)));
    }
  };
  const completion = new Completion(lane, endpoint, signal);
  // A part comes in the thread's message event: what it throws fails the scan once decoded.
  let failure: { error: unknown } | undefined;
  let found: ProgramAccountsSummary;
  try {
    found = await scanUnder(lane, endpoint, domainKey(parent), signal, minContextSlot, {
      partMembers: sink.partMembers,
      ...(sink.answer === true ? { answer: true } : {}),
      ...(sink.firstPartMembers === undefined ? {} : { firstPartMembers: sink.firstPartMembers }),
      onPart: ({ slot, members, answerBytes, longestLabel, cut, waiting, eager: small }) => {
        if (failure) return;
        try {
          eager = small;
          bounds.sized(answerBytes, longestLabel);
          // Texts still to complete are longer than the inline text: no call for one that
          // cannot fit.
          bounds.within(waiting * (INLINE_TEXT_BYTES + 3));
          completion.add(cut, slot);
          hand(slot, members);
        } catch (error) {
          failure = { error };
        }
      },
    });
    if (failure) throw failure.error;
  } catch (err) {
    completion.stop();
    throw err;
  }
  // A streamed classification's last part held the members left and their cut records: the
  // summary lists none (scan-classify.ts), only those waiting.
  const { waiting, truncated, slot, accounts } = found;
  let completed: Map<string, string | null>;
  try {
    bounds.within(pendingBytes(waiting));
    // The last completion call goes out, then the write sends what it holds back: each then
    // waits on another process (the RPC, Redis) while the other goes on.
    completion.add(truncated, slot, true);
    sink.listed?.();
    completed = await completion.done();
  } catch (err) {
    completion.stop();
    throw err;
  }
  const late: ScannedMember[] = [];
  for (const { reverse, children: waitingChildren, owners: waitingOwners } of waiting) {
    const label = completed.get(reverse);
    if (!label) continue;
    waitingChildren.forEach((child, i) =>
      late.push([label, child, waitingOwners[i] as string, reverse]),
    );
  }
  count(late);
  handAll(slot, late);
  const answer = found.answer && distinct(withLate(found.answer, late));
  return { slot, accounts, listed, ...(answer ? { answer } : {}) };
}

/** `sorted` labels with those of the `late` members, sorted as answers list them. */
function withLate(sorted: string[], late: readonly ScannedMember[]): string[] {
  if (late.length === 0) return sorted;
  for (const [label] of late) sorted.push(label);
  return sorted.sort();
}

/**
 * `sorted` when no label in it comes twice, else undefined. A reply that lists an account twice
 * lists its label twice, and the write keeps an account once: such an answer would hold more than
 * the entry. Two accounts of one label cost only the early answer.
 */
function distinct(sorted: string[]): string[] | undefined {
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) return undefined;
  return sorted;
}

/**
 * The completions of a streamed scan's cut texts, made as the thread hands the records over: a
 * call once a batch is full, one call at a time, as {@link completeTruncated} makes them.
 */
class Completion {
  private pending: string[] = [];
  private chain: Promise<void> = Promise.resolve();
  private failure: { error: unknown } | undefined;
  private readonly texts = new Map<string, string | null>();
  /** Aborts the calls under way or to come once the scan has failed. */
  private readonly stopped = new AbortController();
  private readonly signal: AbortSignal;

  constructor(
    private readonly lane: DiscoveryLane,
    private readonly endpoint: RpcEndpoint,
    signal: AbortSignal | undefined,
  ) {
    this.signal = signal ? AbortSignal.any([signal, this.stopped.signal]) : this.stopped.signal;
  }

  /** Queues `keys`, read at `slot` or later; a call per full batch (per any rest, when `last`). */
  add(keys: readonly string[], slot: number | undefined, last = false): void {
    for (const key of keys) this.pending.push(key);
    while (this.pending.length >= MULTIPLE_ACCOUNTS_BATCH || (last && this.pending.length > 0)) {
      const batch = this.pending.splice(0, MULTIPLE_ACCOUNTS_BATCH);
      this.chain = this.chain.then(async () => {
        if (this.failure) return;
        try {
          const done = await completeTruncated(this.lane, this.endpoint, batch, slot, this.signal);
          for (const [key, text] of done) this.texts.set(key, text);
        } catch (error) {
          this.failure ??= { error };
        }
      });
    }
  }

  /** Each text, once every call is done. @throws the first call's failure. */
  async done(): Promise<Map<string, string | null>> {
    await this.chain;
    if (this.failure) throw this.failure.error;
    return this.texts;
  }

  /** The scan failed: no more calls, and those under way are aborted. */
  stop(): void {
    this.failure ??= { error: new Error('scan failed') };
    this.stopped.abort();
  }
}
