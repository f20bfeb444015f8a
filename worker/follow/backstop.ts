import { DELETION_CHECK_OUTCOME, type Metrics } from '../../src/core/metrics.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import type { FollowRpc } from './rpc.js';
import { MULTIPLE_ACCOUNTS_BATCH } from '../sns/subdomain-discovery.js';
import { NAME_PROGRAM } from './name-program.js';
import type { Clock, FollowStore, Member, MemberChange, Reread } from './types.js';

/** The longest wait between two existence checks of a quiet parent: a day. */
export const BACKSTOP_MAX_MS = 24 * 3600_000;
/**
 * Keys checked per round at most (100 a `getMultipleAccounts`, two a subdomain): a round stays
 * bounded however many parents.
 */
const BACKSTOP_ROUND_KEYS = 10_000;

export type BackstopDeps = {
  rpc: Pick<FollowRpc, 'accounts'>;
  store: Pick<FollowStore, 'members' | 'markChecked' | 'applyChanges'>;
  clock: Clock;
  slots: Pick<SlotClock, 'trusts'>;
  /** `CACHE_FRESH_MS`: the first wait, and the wait again after a check that found a deletion. */
  freshMs: number;
  /** Credits of one `getMultipleAccounts` and of one scan (`RPC_CREDITS`). */
  checkCost: number;
  scanCost: number;
  reread: Reread;
  changed: (parent: string) => void;
  /**
   * The follow epoch now (Unix ms; undefined while unknown): a check renews only entries known
   * whole since it, as it sees what is gone and not what was added.
   */
  epoch: () => number | undefined;
  metrics: Metrics;
};

type Schedule = { intervalMs: number; dueAt: number };

/**
 * Existence and owner checks, the backstop of the stream (docs/design.md, "Freshness"): the logs
 * stream reports Deletes within seconds, but a missed one (a notification lost, a transaction
 * that stayed unreadable) would otherwise stay; and an owner the websocket provider reported
 * (`RPC_WS_URL` may be another provider than `RPC_URL`) is taken on its word, so a forged
 * transfer would otherwise stay. Each followed parent's subdomain name accounts and reverse
 * records are read together, in one `getMultipleAccounts` sliced to the head (parent and owner) on
 * the HTTP provider (100 keys a call, keys of every due parent batched together): a reverse
 * record exists when its entry is not null. First one freshness window after the parent is
 * followed, then after twice the last wait while checks find nothing to put right, up to a day: a
 * quiet parent of up to fifty subdomains costs one call a day once settled. A check that finds a
 * deletion or another owner starts again from a window. A parent whose check would cost more
 * than a scan is re-read instead, and so is one whose entry holds a slot past the ceiling when the
 * check finds another owner (the store re-reads it: no change is judged against such an entry);
 * both count as `scanned`.
 */
export class Backstop {
  private readonly schedules = new Map<string, Schedule>();

  constructor(private readonly deps: BackstopDeps) {}

  /** Makes the checked parents `parents`: new ones are first due a window from now. */
  sync(parents: Iterable<string>): void {
    const want = new Set(parents);
    for (const parent of this.schedules.keys())
      if (!want.has(parent)) this.schedules.delete(parent);
    const now = this.deps.clock.now();
    for (const parent of want) {
      if (!this.schedules.has(parent)) {
        this.schedules.set(parent, {
          intervalMs: this.deps.freshMs,
          dueAt: now + this.deps.freshMs,
        });
      }
    }
  }

  /** Checks `parent` too, first a window from now. */
  add(parent: string): void {
    if (this.schedules.has(parent)) return;
    const { freshMs, clock } = this.deps;
    this.schedules.set(parent, { intervalMs: freshMs, dueAt: clock.now() + freshMs });
  }

  /** When `parent` is next checked (tests, metrics). */
  dueAt(parent: string): number | undefined {
    return this.schedules.get(parent)?.dueAt;
  }

  /**
   * Checks the parents due now (up to {@link BACKSTOP_ROUND_KEYS} keys; the rest wait for the
   * next round).
   *
   * @throws RpcCallError when a call fails: nothing is touched, the parents stay due.
   */
  async round(): Promise<void> {
    const { deps } = this;
    const now = deps.clock.now();
    // Read before the calls: an epoch that moves meanwhile is later than `now`, past the date
    // this check gives, so the entries it gave up stay given up. Unknown: none is renewed.
    const epoch = deps.epoch() ?? now;
    type Due = {
      parent: string;
      keys: Array<[account: string, reverse: string]>;
      members: Map<string, Member>;
    };
    const due: Due[] = [];
    let total = 0;
    for (const [parent, schedule] of this.schedules) {
      if (schedule.dueAt > now) continue;
      const members = await deps.store.members(parent);
      if (!members) {
        this.schedules.delete(parent);
        continue;
      }
      const parentKey = domainKey(parent);
      const keys = [...members.keys()].map((account): [string, string] => [
        account,
        toBase58(reverseKeyFromDomainKey(account, parentKey)),
      ]);
      if (Math.ceil((2 * keys.length) / MULTIPLE_ACCOUNTS_BATCH) * deps.checkCost > deps.scanCost) {
        deps.metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.scanned });
        deps.reread(parent, undefined);
        this.quiet(schedule, now);
        continue;
      }
      if (total + 2 * keys.length > BACKSTOP_ROUND_KEYS && due.length > 0) break;
      total += 2 * keys.length;
      due.push({ parent, keys, members });
    }
    if (due.length === 0) return;
    // Both kinds of key in one read: existence costs no call of its own.
    const keys = due.flatMap((d) => d.keys.flat());
    const read = await deps.rpc.accounts(keys);
    const heads = new Map(keys.map((key, i) => [key, read.accounts[i]]));
    // Only an entry per key proves anything: a missing one is never taken for "gone".
    const slot = read.accounts.length === keys.length ? read.slot : undefined;
    for (const { parent, keys, members } of due) {
      const schedule = this.schedules.get(parent);
      if (!schedule) continue;
      // A reply slot not believed proves nothing: the parent stays as it is, checked next time.
      if (slot === undefined || !deps.slots.trusts(slot)) {
        this.quiet(schedule, now);
        continue;
      }
      const parentKey = toBase58(domainKey(parent));
      const gone: string[] = [];
      const moved: MemberChange[] = [];
      for (const [account, reverse] of keys) {
        const owner = ownerIn(heads.get(account), parentKey);
        const member = members.get(account);
        if (owner === undefined || heads.get(reverse) === null) gone.push(account);
        else if (member && member[1] !== owner) {
          moved.push({ account, reverse, member: [member[0], owner] });
        }
      }
      // Per member slot guard: a member added or written after the slot this check read at stays.
      const dropped = await deps.store.markChecked(parent, now, slot, gone, epoch);
      const verdict =
        moved.length > 0 ? await deps.store.applyChanges(parent, moved, slot) : undefined;
      const transferred = verdict === 'written';
      // The entry holds a slot no chain has reached: the store re-read the parent instead.
      const rereading = verdict === 'unsound';
      if (dropped === 0 && !transferred && !rereading) {
        deps.metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.unchanged });
        this.quiet(schedule, now);
        continue;
      }
      if (dropped > 0 || transferred) deps.changed(parent);
      if (dropped > 0) deps.metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.dropped });
      if (transferred) {
        deps.metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.owner });
      }
      if (rereading) deps.metrics.deletionChecks.inc({ outcome: DELETION_CHECK_OUTCOME.scanned });
      schedule.intervalMs = deps.freshMs;
      schedule.dueAt = now + deps.freshMs;
    }
  }

  private quiet(schedule: Schedule, now: number): void {
    schedule.intervalMs = Math.min(BACKSTOP_MAX_MS, schedule.intervalMs * 2);
    schedule.dueAt = now + schedule.intervalMs;
  }
}

/**
 * The owner in a subdomain name account's head (bytes 32..64), base58, or undefined when the
 * account is gone: missing, not the name program's, too short, or under another parent (bytes
 * 0..32, `parentKey` base58). The backstop's existence checks and the registry's page owners read
 * it so.
 */
export function ownerIn(
  account: { owner: string; head: Buffer } | null | undefined,
  parentKey: string,
): string | undefined {
  if (!account || account.owner !== NAME_PROGRAM || account.head.length < 64) return undefined;
  if (toBase58(account.head.subarray(0, 32)) !== parentKey) return undefined;
  return toBase58(account.head.subarray(32, 64));
}
