import { LRUCache } from 'lru-cache';
import type {
  CacheEntry,
  EntryAccounts,
  SubdomainCache,
} from '../../core/cache/subdomain-cache.js';
import type { FollowStatus } from '../../core/cache/follow-status.js';
import { runsOfOneRevision } from '../../core/cache/runs-of-one-revision.js';
import { InternalError } from '../../core/errors.js';
import type { CacheState, LookupResult } from './lookup.js';
import {
  buildDetailsView,
  precedes,
  renderView,
  type DetailsView,
  type SubdomainDetail,
} from './details-view.js';

/**
 * Members read per round trip when a large entry's view is read a run at a time (at most this:
 * the script's `unpack` of them stops near 8,000).
 */
const RUN_MEMBERS = 5_000;
/** How soon after a background build of a parent's view began another may begin, in ms. */
const WARM_EVERY_MS = 5_000;
/** The fewest bytes a view counts per row (a row's JSON holds two base58 keys). */
const MIN_ROW_BYTES = 100;

/**
 * Entries of at least this many labels have a page of `/details` read from Redis by its labels
 * when no view of their revision is kept, rather than a view rendered: a view costs the event
 * loop time in proportion to the whole entry (docs/design.md, "`/details` views").
 */
export const RANGED_PAGES_FROM = 1_000;

/** A view, with the revision answers are cut from, its state, and its caching headers' entry. */
export type DetailsAnswer = { view: DetailsView; entry: CacheEntry; state: CacheState };

/** What names a revision of an entry: its write count, when it was known whole, its slot. */
type Revision = Pick<CacheEntry, 'rev' | 'fetchedAt' | 'slot'>;

/** One read of the accounts per (endpoint, parent, revision): what concurrent requests share. */
const flightKeyOf = (endpointId: string, parent: string, r: Revision): string =>
  `${endpointId}\n${parent}\n${r.rev}\n${r.fetchedAt}\n${r.slot}`;

const sameRevision = (a: Revision, b: Revision): boolean =>
  a.rev === b.rev && a.fetchedAt === b.fetchedAt && a.slot === b.slot;

/**
 * A kept view, with the order of the read that made it and the revisions it also answers for:
 * those a request held when its read began and which Redis had already replaced by this view.
 * A view of a registry index's answer is kept with the accounts it was rendered from instead
 * (`from`): the answer kept in process is the revision.
 */
type Kept = {
  endpointId: string;
  view: DetailsView;
  seq: number;
  alsoFor: Revision[];
  from?: EntryAccounts;
};

/** Revisions one kept view answers for besides its own; more are forgotten, oldest first. */
const MAX_ALSO_FOR = 4;

export type DetailsViewsOptions = {
  /** Where the accounts are read, with the entry, in one step (`getWithAccounts`). */
  cache: SubdomainCache;
  /** Bytes of views kept (`DETAILS_CACHE_BYTES`, {@link DetailsView.bytes}); 0 keeps none. */
  maxBytes: number;
  /** The follow status as last read (`FollowStatusReader.current`); window only when absent. */
  status?: () => FollowStatus | null;
  /** Members read per round trip when a large entry's view is read a run at a time (5,000). */
  runMembers?: number;
};

/**
 * This process's `/details` views of the configured endpoint, one per parent, checked against the
 * entry's revision on every request (docs/design.md, "`/details` views"). A read that finds a
 * newer revision than the request's entry answers from it and marks the view as answering for the
 * older revision too: it is no older, so holders of that entry do not read again.
 */
export class DetailsViews {
  private readonly views: LRUCache<string, Kept> | undefined;
  private readonly inflight = new Map<string, Promise<DetailsView | null>>();
  /** The one background build under way ({@link warm}), if any. */
  private warming: Promise<unknown> | undefined;
  /** When the last background build of (endpoint, parent) began (`performance.now()`). */
  private readonly warmedAt = new LRUCache<string, number>({ max: 4_096 });
  private reads = 0;

  constructor(private readonly opts: DetailsViewsOptions) {
    if (opts.maxBytes > 0) {
      this.views = new LRUCache<string, Kept>({
        maxSize: opts.maxBytes,
        sizeCalculation: (kept) => kept.view.bytes,
      });
    }
  }

  /**
   * The answer of a kept view for what the lookup found, synchronously, or `undefined` when none
   * is kept for its revision (then {@link get}).
   *
   * @param parent a normalized single label.
   */
  peek(endpointId: string, parent: string, found: LookupResult): DetailsAnswer | undefined {
    const kept = this.views?.get(parent);
    if (!kept || kept.endpointId !== endpointId) return undefined;
    if (found.accounts || kept.from) {
      return kept.from === found.accounts
        ? { view: kept.view, entry: found.entry, state: found.state }
        : undefined;
    }
    const asked = found.entry;
    if (sameRevision(kept.view.entry, asked) || kept.alsoFor.some((r) => sameRevision(r, asked))) {
      return this.answer(kept.view, found);
    }
    return undefined;
  }

  /**
   * The answer for what the lookup found: a kept view, or one rendered from the entry and
   * accounts read now (one read for all concurrent requests of that revision).
   *
   * @param parent a normalized single label.
   * @returns null when one of the entry's accounts is unreadable, or the entry is gone by the
   *   time of the read.
   * @throws InternalError when Redis fails.
   */
  async get(
    endpointId: string,
    parent: string,
    found: LookupResult,
  ): Promise<DetailsAnswer | null> {
    const kept = this.peek(endpointId, parent, found);
    if (kept) return kept;
    // The registry index's answer carries its accounts: rendered once for the answer kept in
    // process (the same accounts object while it is kept).
    if (found.accounts) {
      const view = buildDetailsView(found.entry, found.accounts);
      this.views?.set(parent, {
        endpointId,
        view,
        seq: ++this.reads,
        alsoFor: [],
        from: found.accounts,
      });
      return { view, entry: found.entry, state: found.state };
    }
    const flightKey = flightKeyOf(endpointId, parent, found.entry);
    let flight = this.inflight.get(flightKey);
    if (!flight) {
      flight = this.read(endpointId, parent, found.entry).finally(() =>
        this.inflight.delete(flightKey),
      );
      this.inflight.set(flightKey, flight);
    }
    const view = await flight;
    return view && this.answer(view, found);
  }

  /**
   * Starts rendering the view of `found`'s revision in the background: pages of a large entry are
   * read by their labels meanwhile ({@link pageRows}), and cut from the view once it is kept. At
   * most one such build runs in the process, a parent's at most once per {@link WARM_EVERY_MS}
   * whatever came of the last (kept, evicted, failed, or given up because the entry kept
   * changing), and none for a view the byte budget could not keep: so that no client can make the
   * API read whole entries faster than that, however it alternates parents or revisions. A build
   * reads in runs only, never in one step.
   *
   * @param parent a normalized single label.
   */
  warm(endpointId: string, parent: string, found: LookupResult): void {
    if (!this.views || found.accounts || this.warming) return;
    if (found.entry.labels.length * MIN_ROW_BYTES > this.opts.maxBytes) return;
    const key = `${endpointId}\n${parent}`;
    const now = performance.now();
    const last = this.warmedAt.get(key);
    if (last !== undefined && now - last < WARM_EVERY_MS) return;
    this.warmedAt.set(key, now);
    this.warming = this.read(endpointId, parent, found.entry, true)
      .catch(() => undefined)
      .finally(() => (this.warming = undefined));
  }

  /** Settles once no background build ({@link warm}) runs. */
  async idle(): Promise<void> {
    while (this.warming) await this.warming;
  }

  /**
   * The rows of a page of `found.entry.labels` (`labels`, as `selectPage` cut them) read from
   * Redis by their labels, as {@link rowsText} would cut them from a view of that revision: for
   * an entry of {@link RANGED_PAGES_FROM} labels or more with no view kept. O(page · log n).
   *
   * @param parent a normalized single label.
   * @returns the rows' text, or undefined when Redis holds another revision now, or a label's
   *   rows could not be read (then {@link get}).
   * @throws InternalError when Redis fails.
   */
  async pageRows(
    endpointId: string,
    parent: string,
    found: LookupResult,
    labels: readonly string[],
  ): Promise<string | undefined> {
    if (labels.length === 0) return '';
    let read: Awaited<ReturnType<SubdomainCache['rowsOf']>>;
    try {
      read = await this.opts.cache.rowsOf(endpointId, parent, labels);
    } catch (err) {
      throw new InternalError('cache read failed', { cause: err });
    }
    if (!read?.rows || !sameRevision(read.head, found.entry)) return undefined;
    const parts = read.rows.map(({ label, account, owner }) => {
      const row: SubdomainDetail = { label, key: account, owner };
      return JSON.stringify(row);
    });
    return parts.join(',');
  }

  /**
   * Reads the entry and its accounts, renders them, and keeps the view unless a later read's is.
   *
   * @param background a build of {@link warm}: a large entry that keeps changing is given up
   *   (null), never read in one step.
   */
  private async read(
    endpointId: string,
    parent: string,
    asked: CacheEntry,
    background = false,
  ): Promise<DetailsView | null> {
    let view: DetailsView | null;
    try {
      view =
        asked.labels.length >= RANGED_PAGES_FROM
          ? await this.readInRuns(endpointId, parent, background)
          : await this.readWhole(endpointId, parent);
    } catch (err) {
      throw new InternalError('cache read failed', { cause: err });
    }
    // Reads on one connection are answered in order, and a read in runs is of the revision its
    // last run saw: a read that ends later saw a state no older.
    const seq = ++this.reads;
    if (!view) return null;
    const kept = this.views?.peek(parent);
    const before = kept?.endpointId === endpointId && !kept.from ? kept : undefined;
    if (!this.views || (before && before.seq > seq)) return view;
    const alsoFor =
      before && sameRevision(before.view.entry, view.entry) ? [...before.alsoFor] : [];
    if (!sameRevision(view.entry, asked)) {
      alsoFor.push({ rev: asked.rev, fetchedAt: asked.fetchedAt, slot: asked.slot });
    }
    this.views.set(parent, { endpointId, view, seq, alsoFor: alsoFor.slice(-MAX_ALSO_FOR) });
    return view;
  }

  /** The view of the entry read whole, in one step (one script: one revision). */
  private async readWhole(endpointId: string, parent: string): Promise<DetailsView | null> {
    const read = await this.opts.cache.getWithAccounts(endpointId, parent);
    return read?.accounts ? buildDetailsView(read.entry, read.accounts) : null;
  }

  /**
   * The view of a large entry, read a run of members at a time so that no step holds the event
   * loop for long (reading and rendering 100,000 rows at once took it about a second), each row
   * rendered as it comes. The runs are of one revision: each carries the head, and a change
   * between two begins the read again ({@link runsOfOneRevision}: three times, then it is read
   * whole, or given up when `background`).
   */
  private async readInRuns(
    endpointId: string,
    parent: string,
    background: boolean,
  ): Promise<DetailsView | null> {
    const size = Math.min(
      RUN_MEMBERS,
      Math.max(1, Math.floor(this.opts.runMembers ?? 0) || RUN_MEMBERS),
    );
    return runsOfOneRevision({
      size,
      run: (start, count) => this.opts.cache.membersRun(endpointId, parent, start, count),
      sameHead: sameRevision,
      begin: (head) => new ViewRows(head),
      fallback: async () => (background ? null : this.readWhole(endpointId, parent)),
    });
  }

  /**
   * The answer of `view` for what the lookup found: its state when the view is of that revision;
   * else (a newer one, read since) a miss stays a miss, and a hit or stale hit is what the
   * view's own entry is now.
   */
  private answer(view: DetailsView, found: LookupResult): DetailsAnswer {
    if (sameRevision(view.entry, found.entry) || found.state === 'MISS') {
      return { view, entry: view.entry, state: found.state };
    }
    const fresh = this.opts.cache.freshness(
      view.entry,
      this.opts.cache.now(),
      this.opts.status?.(),
    );
    const state = fresh === 'fresh' ? 'HIT' : 'STALE';
    return { view, entry: view.entry, state };
  }
}

/** A run of members of an entry, with its head ({@link SubdomainCache.membersRun}). */
type MembersRun = NonNullable<Awaited<ReturnType<SubdomainCache['membersRun']>>>;

/**
 * The rows of one read of a large entry's view, taken a run of members at a time, each row
 * rendered as it comes. Rows come in Redis's order, which is the answers' unless a label holds a
 * NUL or characters past U+D7FF: then they are sorted once at the end.
 */
class ViewRows {
  private readonly labels: string[] = [];
  private readonly keys: string[] = [];
  private readonly parts: string[] = [];
  private ordered = true;

  constructor(private readonly head: Omit<CacheEntry, 'labels'>) {}

  /** Renders a run's rows: how many it held, or null when one of its members is unreadable. */
  take(run: MembersRun): number | null {
    if (!run.members) return null;
    const { labels, keys } = this;
    for (const { label, account, owner } of run.members) {
      const last = labels.length - 1;
      if (last >= 0 && !precedes(labels[last] as string, keys[last] as string, label, account)) {
        this.ordered = false;
      }
      labels.push(label);
      keys.push(account);
      const row: SubdomainDetail = { label, key: account, owner };
      this.parts.push(JSON.stringify(row));
    }
    return run.members.length;
  }

  /** The view of the rows taken, in the answers' order. */
  done(): DetailsView {
    const { head, labels, keys, parts } = this;
    if (this.ordered) return renderView({ ...head, labels }, labels, parts);
    const order = labels.map((_, i) => i);
    order.sort((i, j) =>
      precedes(labels[i] as string, keys[i] as string, labels[j] as string, keys[j] as string)
        ? -1
        : 1,
    );
    const sorted = order.map((i) => labels[i] as string);
    return renderView(
      { ...head, labels: sorted },
      sorted,
      order.map((i) => parts[i] as string),
    );
  }
}
