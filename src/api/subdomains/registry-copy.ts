import { LRUCache } from 'lru-cache';
import type { FollowStatus } from '../../core/cache/follow-status.js';
import { REGISTRY_EVENTS } from '../../core/cache/registry-index.js';
import type { CacheEntry } from '../../core/cache/subdomain-cache.js';
import type { RefreshListener } from '../../core/queue/refresh-events.js';
import type { RegistryRead } from './registry-source.js';

export type RegistryCopyOptions = {
  /** The refresh events: the index's changes come as `endpointId` `registry`, by parent id. */
  listener: RefreshListener;
  /** Bytes of labels kept, counted as the per-parent copy counts them. */
  maxBytes: number;
  /**
   * Counts every event received, every subscription loss and every drop of the per-parent copy
   * (`InProcessCopy.generation`): a read begun under another count may hold what an event
   * replaced, and is not kept.
   */
  generation: () => number;
  /** Counts the changes of the build's state (`RegistrySource.stateVersion`). */
  stateVersion: () => number;
  /** The follow status as last read (`FollowStatusReader.current`). */
  status: () => FollowStatus | null;
};

/** What a read of the index was begun under ({@link RegistryCopy.begin}). */
export type RegistryReadStart = {
  readonly generation: number;
  readonly stateVersion: number;
  readonly epoch: number | undefined;
  /**
   * A fact (a Delete, a feed's fact) waited for its read, or the stream healed a gap: the answer
   * is dated, never kept.
   */
  readonly dated: boolean;
};

type Kept = { read: RegistryRead; entry: CacheEntry; stateVersion: number; epoch?: number };

/**
 * Whether the index's answers are dated now, not current: a fact the stream reported waits for its
 * read (`deletesSince`: a Delete, or a fact the index's feed holds unwritten), or the stream heals
 * a gap or does not vouch (`healingSince`, `vouchedAt`; `healDated` in
 * src/core/cache/registry-serving.ts).
 */
const dated = (status: FollowStatus | null): boolean =>
  status?.deletesSince !== undefined ||
  status?.healingSince !== undefined ||
  status?.vouchedAt !== undefined;

/** Whole seconds, as `Age` counts: a kept answer's entry is dated anew once a second. */
const AGE_UNIT_MS = 1_000;

/**
 * This process's copy of the registry index's answers (docs/design.md, "The registry index"), so a
 * hot parent costs no Redis round trip: kept by parent, dropped on any change event of its parent
 * id, and dropped whole when the build's state changes (a build begun, completed or behind), when
 * the follow status's epoch moves, while a fact waits for its read (`deletesSince`: a Delete, or a
 * fact of the index's feed; answers are dated then, read from Redis), and when events stop being
 * trusted (the subscription lost, a lost event found by the events' count: the per-parent copy's
 * drops). The caller answers from it only while the index serves and events flow. While the index
 * answers through a heal it does not ask the copy (those answers are dated, read from Redis, never
 * kept), so what was kept before the drop survives the heal and is served again once the stream
 * vouches. That is sound: each write the heal makes to the index publishes a change event of its
 * parent, which drops that parent's answer, and a heal that fails moves the epoch, which drops them
 * all.
 */
export class RegistryCopy {
  private readonly answers: LRUCache<string, Kept>;
  /** Parent id -> the parent kept under it, so an event finds its answer. */
  private readonly parentOf = new Map<string, string>();

  constructor(private readonly opts: RegistryCopyOptions) {
    this.answers = new LRUCache<string, Kept>({
      maxSize: opts.maxBytes,
      sizeCalculation: (kept) => kept.entry.labels.reduce((n, label) => n + label.length + 8, 64),
      dispose: (kept, parent) => {
        if (this.parentOf.get(kept.read.parentId) === parent) {
          this.parentOf.delete(kept.read.parentId);
        }
      },
    });
    opts.listener.onRefreshed((endpointId, parentId) => {
      if (endpointId !== REGISTRY_EVENTS) return;
      const parent = this.parentOf.get(parentId);
      if (parent !== undefined) this.answers.delete(parent);
    });
    opts.listener.onLost(() => this.clear());
  }

  /** Drops every kept answer. */
  clear(): void {
    this.answers.clear();
    this.parentOf.clear();
  }

  /** Take before a read of the index; hand to {@link remember} after it. */
  begin(): RegistryReadStart {
    const status = this.opts.status();
    return {
      generation: this.opts.generation(),
      stateVersion: this.opts.stateVersion(),
      epoch: status?.epoch,
      dated: dated(status),
    };
  }

  /**
   * The kept answer of `parent`, its entry dated `now` at most a second ago (the index is current
   * while it serves and its events flow), or `undefined`: none kept, or the copy was just dropped
   * (another build, another epoch, a Delete waiting; a status saying a heal too, though the caller
   * asks only while the index serves, which such a status never lets it).
   *
   * @param parent a normalized single label.
   * @param now the deployment's clock, Unix ms.
   */
  get(parent: string, now: number): { entry: CacheEntry; read: RegistryRead } | undefined {
    if (this.answers.size === 0) return undefined;
    const status = this.opts.status();
    if (dated(status)) {
      this.clear();
      return undefined;
    }
    const kept = this.answers.get(parent);
    if (!kept) return undefined;
    if (kept.stateVersion !== this.opts.stateVersion() || kept.epoch !== status?.epoch) {
      this.clear();
      return undefined;
    }
    const age = now - kept.entry.fetchedAt;
    // A new entry object re-renders the body once: only once a second, when `Age` would show it.
    if (age >= AGE_UNIT_MS || age < 0) kept.entry = { ...kept.entry, fetchedAt: now };
    return kept;
  }

  /**
   * Keeps `read` of `parent` unless anything came since it began: an event, a loss, a change of
   * the build's state or of the epoch, or a Delete waiting or a heal under way then or now.
   */
  remember(parent: string, read: RegistryRead, start: RegistryReadStart): void {
    const now = this.begin();
    if (
      start.dated ||
      now.dated ||
      start.generation !== now.generation ||
      start.stateVersion !== now.stateVersion ||
      start.epoch !== now.epoch
    ) {
      return;
    }
    const other = this.parentOf.get(read.parentId);
    if (other !== undefined && other !== parent) this.answers.delete(other);
    this.answers.set(parent, {
      read,
      entry: read.entry,
      stateVersion: start.stateVersion,
      ...(start.epoch === undefined ? {} : { epoch: start.epoch }),
    });
    this.parentOf.set(read.parentId, parent);
  }
}
