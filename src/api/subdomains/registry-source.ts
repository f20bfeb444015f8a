import type {
  CacheEntry,
  EntryAccounts,
  SubdomainCache,
} from '../../core/cache/subdomain-cache.js';
import type { FollowStatus } from '../../core/cache/follow-status.js';
import { ownerText } from '../../core/cache/registry-value.js';
import {
  parentIdOf,
  type RegistryIndex,
  type RegistryState,
} from '../../core/cache/registry-index.js';
import {
  healDated,
  indexCurrentUpTo,
  registryServing,
  type RegistryServing,
} from '../../core/cache/registry-serving.js';
import { domainKey, toBase58 } from '../../core/sns/pda.js';

export type RegistrySourceOptions = {
  index: Pick<RegistryIndex, 'state' | 'listed'>;
  /**
   * The follow status as last read (`FollowStatusReader.current`): whether it follows, since when
   * a fact the stream reported waits for its read (`deletesSince`: a Delete, or a fact the index's
   * feed holds unwritten), since when it heals a gap (`healingSince`), and when it last vouched
   * (`vouchedAt`).
   */
  status: () => FollowStatus | null;
  /**
   * The subdomain cache, whose freshness with no status is the window (`CACHE_FRESH_SECONDS`):
   * how long after the stream's last vouch the index answers through a heal ({@link healDated}).
   */
  window: Pick<SubdomainCache, 'freshness'>;
  /** Reads the build's state at most this often, in ms (500). */
  intervalMs?: number;
  /** The deployment's one clock (Redis's, as the follow status is written on), Unix ms. */
  now?: () => number;
  onError?: (err: unknown) => void;
  /** Each state decided ({@link serving}): the gauge `sns_registry_state`. */
  onState?: (state: RegistryServing) => void;
};

/** A parent's answer from the index ({@link RegistrySource.read}). */
export type RegistryRead = {
  entry: CacheEntry;
  /** The parent's id ({@link parentIdOf}): what the index's change events name. */
  parentId: string;
  /** Its listed subdomains' accounts, built when first read. */
  readonly accounts: EntryAccounts;
  /**
   * Row `i` of its `/details` (label, name account, owner), in answer order: the row of
   * `entry.labels[i]`, made when asked (an owner's base58 costs microseconds).
   */
  rowAt(i: number): { label: string; key: string; owner: string };
};

/**
 * How the index answers `/subdomains/:parent` now ({@link RegistrySource.answers}): `serving`, or
 * `healing` (not serving, the stream healing a gap: answers dated from its last vouch,
 * `healDated`).
 */
export type RegistryAnswers = 'serving' | 'healing';

/** Whether two reads of the build's state are of one build, as complete (shards done aside). */
const sameBuild = (a: RegistryState | null, b: RegistryState): boolean =>
  a !== null &&
  a.run === b.run &&
  a.status === b.status &&
  a.startedAt === b.startedAt &&
  a.completedAt === b.completedAt &&
  a.floor === b.floor;

/**
 * The API's side of the registry index (docs/design.md, "The registry index"): whether it answers
 * now ({@link serving}, synchronous), and a parent's answer from it ({@link read}: one HGETALL, no
 * RPC, no queue).
 */
export class RegistrySource {
  private state: RegistryState | null = null;
  private readAt = -Infinity;
  private inflight: Promise<void> | undefined;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private version = 0;

  constructor(private readonly opts: RegistrySourceOptions) {
    this.intervalMs = opts.intervalMs ?? 500;
    this.now = opts.now ?? Date.now;
  }

  /** The index's state now, from the last reads; a read begins in the background when due. */
  serving(): RegistryServing {
    const now = this.now();
    if (now - this.readAt >= this.intervalMs) void this.refresh();
    const state = registryServing(this.state, this.opts.status(), now);
    this.opts.onState?.(state);
    return state;
  }

  /**
   * Whether the index answers now, and how: `serving` ({@link serving}), `healing` while the
   * stream heals a gap and the window since its last vouch has not passed (the state stays
   * `unfollowed`; {@link healDated}), or undefined (the per-parent path answers).
   */
  answers(): RegistryAnswers | undefined {
    const serving = this.serving();
    if (serving === 'serving') return serving;
    if (serving !== 'unfollowed') return undefined;
    const now = this.now();
    const fresh = (fetchedAt: number) =>
      this.opts.window.freshness({ labels: [], fetchedAt }, now) === 'fresh';
    return healDated(this.state, this.opts.status(), now, fresh) === undefined
      ? undefined
      : 'healing';
  }

  /** Reads the build's state now (sharing a read in flight). */
  refresh(): Promise<void> {
    this.inflight ??= this.opts.index
      .state()
      .then(
        (state) => {
          if (!sameBuild(this.state, state)) this.version++;
          this.state = state;
          this.readAt = this.now();
        },
        (err: unknown) => this.opts.onError?.(err),
      )
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /**
   * Counts the changes of the build's state read (a build begun, completed or marked behind, a
   * new floor), which rewrite members with no event per parent: an answer read under another
   * count is of another build and is not kept.
   */
  get stateVersion(): number {
    return this.version;
  }

  /**
   * `parent`'s answer from the index: its listed subdomains as an entry (at the newest slot among
   * them) and their accounts (built when first read). A made-up parent answers an empty list, as
   * `findSubdomains` does. The entry is fetched now, or, while a fact the stream reported waits for
   * its read (the follow status's `deletesSince`: a Delete, or a fact the index's feed holds
   * unwritten), when that fact was reported, and while the stream does not vouch (a heal under way,
   * {@link healDated}), when it last vouched (`vouchedAt`), whichever is earliest, by the status as
   * read before the hash and after: the index is current only up to then, and the answer's
   * freshness and `Age` count from it.
   *
   * @param parent a normalized single label.
   * @throws what Redis throws.
   */
  async read(parent: string): Promise<RegistryRead> {
    const parentKey = toBase58(domainKey(parent));
    // The status as last read before the hash is read and after: a heal or a Delete said by
    // either dates the answer (one said after is one said while the hash was read; one said
    // before is not undone by a status read meanwhile that says it is over, as the hash may
    // predate its end).
    const before = this.opts.status();
    const { members, slot } = await this.opts.index.listed(parentKey);
    const now = this.now();
    const after = this.opts.status();
    const entry: CacheEntry = {
      labels: members.map((m) => m.label),
      fetchedAt: Math.min(indexCurrentUpTo(before, now), indexCurrentUpTo(after, now)),
      ...(slot === undefined ? {} : { slot }),
    };
    // Owners are base58'd only for `/details`, the one answer showing them: a list of thousands
    // would otherwise pay a few microseconds each.
    let accounts: Record<string, readonly [string, string]> | undefined;
    return {
      entry,
      rowAt(i: number) {
        const m = members[i];
        if (m === undefined) throw new RangeError(`no row ${i} of ${members.length}`);
        return { label: m.label, key: m.account, owner: ownerText(m.owner) };
      },
      parentId: parentIdOf(parentKey),
      get accounts() {
        if (!accounts) {
          accounts = {};
          for (const m of members) accounts[m.account] = [m.label, ownerText(m.owner)];
        }
        return accounts;
      },
    };
  }
}
