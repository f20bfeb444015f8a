import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { EarlyAnswer, ScanWrite, SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { FIRST_CHUNK_MEMBERS, PUT_CHUNK_MEMBERS } from '../src/core/cache/split-entries.js';
import { occasionalWarning } from '../src/core/logger.js';
import type { Metrics } from '../src/core/metrics.js';
import { publishEarlyAnswer, publishRefreshEvent } from '../src/core/queue/refresh-events.js';
import type { RefreshJobData } from '../src/core/queue/refresh-queue.js';
import { RpcCallError } from './rpc/client.js';
import { chargedTo, CreditBudgetRefusal, type CreditAccount } from './rpc/credits.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { DecodeThread } from './sns/decode-thread.js';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import { overrideEndpoint, type RpcEndpoint } from '../src/core/rpc/endpoint.js';
import type { RedisClient } from '../src/core/redis.js';
import { isSlot, type SlotClock } from '../src/core/rpc/slot.js';
import {
  accountsInBatches,
  discoverSubdomains,
  type DiscoveryLane,
} from './sns/subdomain-discovery.js';
import { streamSubdomains, type ScanHead } from './sns/stream-discovery.js';
import type { Existence } from './sns/discovery-decode.js';

/**
 * Scans one refresh may make when the stored entry keeps turning out newer (see the loop below):
 * the second reads at the stored slot, so more are needed only while changes keep landing.
 */
const MAX_SCANS_PER_REFRESH = 3;

export type RefreshProcessorDeps = {
  /** What discovery runs through: the configured endpoint's lane, or the overrides' lane. */
  lane: DiscoveryLane;
  cache: SubdomainCache;
  /** Command connection used to publish refresh events. */
  publisher: RedisClient;
  prefix: string;
  metrics: Metrics;
  logger: Logger;
  /** The configured `RPC_URL` as an endpoint, or undefined when unset. */
  defaultEndpoint: RpcEndpoint | undefined;
  /**
   * The worker's slot clock, for the configured endpoint's lane: each scan's slot is observed and
   * stored unless refused, and the ceiling given to `put`, so an entry holding a slot no chain
   * has reached is replaced (an override's slots say nothing of the configured RPC's chain:
   * neither is done for them).
   */
  slots?: SlotClock;
  /**
   * Check a parent's name account (`getMultipleAccounts`, 1 credit) before its scan (10) unless it
   * is known to exist (docs/design.md, "Budget"): a made-up parent costs a check, never a scan,
   * and only a parent known to exist may spend the reserve. The configured endpoint with a budget.
   */
  checkParents?: boolean;
  /**
   * The deployment's one clock (src/core/redis-time.ts), Unix ms: what a scan's `fetchedAt` is
   * written on, so it compares with the stream owner's epoch on the same clock. `Date.now` when
   * absent.
   */
  now?: () => number;
};

/** How long a parent found on chain is known to exist (its key lives that long), ms. */
const PARENT_EXISTS_TTL_MS = 7 * 86_400_000;

export type RefreshResult = { labels: number; accounts: number; slot: number | undefined };

/**
 * The slot a scan of the configured endpoint is stored at (docs/design.md, "Freshness"): its
 * reply's, unless the clock refuses it as past the ceiling; then none, so a slot no chain has
 * reached never holds an entry back. A refused slot is logged through `warn`.
 */
function believed(
  slots: SlotClock | undefined,
  parent: string,
  slot: number | undefined,
  warn: ReturnType<typeof occasionalWarning>,
): number | undefined {
  if (!slots) return slot;
  const verdict = slots.observe(slot);
  if (verdict === 'ahead') {
    warn(
      { parent, slot, ceiling: slots.ceiling() },
      'scan reply slot past any the RPC can have reached: stored without it',
    );
  }
  return verdict === 'trusted' || verdict === 'unconfirmed' ? slot : undefined;
}

/**
 * The endpoint a job runs against (its id is the one the API computed the cache key it waits on
 * from): the job's override, else the configured endpoint, undefined when `RPC_URL` is unset.
 */
function jobEndpoint(
  data: RefreshJobData,
  defaultEndpoint: RpcEndpoint | undefined,
): RpcEndpoint | undefined {
  return data.endpoint.kind === 'override' ? overrideEndpoint(data.endpoint.url) : defaultEndpoint;
}

/**
 * The refresh job: run discovery against the job's endpoint, write the cache entry, then tell
 * waiting API requests. On failure it tells them too (so a cold request gets its 502 once the RPC
 * client's retries are spent) and rethrows, so BullMQ's attempts and back-off fill the cache later,
 * except for a failure a retry would meet again (a malformed or oversized reply, a call the daily
 * credit budget refused: BullMQ's UnrecoverableError). A failed refresh never touches the entry already cached (stale-if-error).
 */
export function createRefreshProcessor(deps: RefreshProcessorDeps) {
  const warnAhead = occasionalWarning(deps.logger);
  const now = deps.now ?? Date.now;
  const warnRefused = occasionalWarning(deps.logger);
  const keys = redisKeys(deps.prefix);
  /**
   * Whether `parent` is known to exist, or found to by a check charged to the job's account (set
   * then, so the reserve may pay its scan); the check's slot when it was made and found nothing.
   */
  const existence = async (
    endpoint: RpcEndpoint,
    parent: string,
    minContextSlot: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ exists: true } | { exists: false; slot: number | undefined }> => {
    const known = keys.parentExists(endpoint.id, parent);
    if ((await deps.publisher.get(known)) !== null) return { exists: true };
    const [checked] = await accountsInBatches<Existence>(
      deps.lane,
      endpoint,
      [toBase58(domainKey(parent))],
      {
        dataSlice: { offset: 0, length: 0 },
        minContextSlot,
        signal,
        decode:
          (count) =>
          (body, { method, id }) =>
            deps.lane.thread.run(
              { kind: 'existence', method, id, body: DecodeThread.transferable(body), count },
              signal,
            ),
      },
    );
    if (checked?.result.exists[0] !== true) return { exists: false, slot: checked?.result.slot };
    await deps.publisher.set(known, '1', 'PX', PARENT_EXISTS_TTL_MS);
    return { exists: true };
  };
  /**
   * Lists a large scan's answer before its write and tells the requests waiting on it
   * (docs/design.md, "Early answers"). Never throws: a request that misses it gets the entry's
   * own event once the write is done.
   */
  const answerEarly = async (endpointId: string, parent: string, answer: EarlyAnswer) => {
    try {
      await deps.cache.putEarlyAnswer(endpointId, parent, answer);
      await publishEarlyAnswer(deps.publisher, deps.prefix, endpointId, parent);
    } catch (err) {
      deps.logger.warn(
        { err: err instanceof Error ? err.message : String(err), parent },
        'could not list a scan’s answer before its write',
      );
    }
  };
  return (job: Job<RefreshJobData>, token?: string, signal?: AbortSignal) => {
    const { client } = job.data;
    // Every credit of the refresh is charged to the client that started it, or to the proactive
    // share (a refresh ahead, a re-read after a change): none to nobody.
    const account: CreditAccount =
      typeof client === 'string' && job.data.endpoint.kind === 'default'
        ? { kind: 'client', client, reserve: false }
        : { kind: 'proactive' };
    return chargedTo(account, () => refresh(job, account, token, signal));
  };

  async function refresh(
    job: Job<RefreshJobData>,
    account: CreditAccount,
    _token?: string,
    signal?: AbortSignal,
  ): Promise<RefreshResult> {
    const { parent } = job.data;
    const stopTimer = deps.metrics.refreshDuration.startTimer();
    // The lane's refresh bound counts from when the job was queued: an override job that waited
    // its whole bound in the queue has nobody waiting for it any more.
    const left =
      deps.lane.refreshMs === undefined
        ? undefined
        : deps.lane.refreshMs - (Date.now() - job.timestamp);
    const deadline = left === undefined ? undefined : AbortSignal.timeout(Math.max(1, left));
    if (deadline) signal = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const endpoint = jobEndpoint(job.data, deps.defaultEndpoint);
    try {
      const override = job.data.endpoint.kind === 'override';
      if (!endpoint) throw new UnrecoverableError('RPC_URL is not configured on the worker');
      if (left !== undefined && left <= 0) {
        throw new RpcCallError('refresh expired in the queue', 'timeout', false, undefined, {
          final: true,
        });
      }
      let minContextSlot = isSlot(job.data.minContextSlot) ? job.data.minContextSlot : undefined;
      let found: ScanHead;
      let early: Promise<void> | undefined;
      for (let scan = 1; ; scan++) {
        // A scan counts from when it began: a change made while it ran may be missing from it, so
        // `fetchedAt` (what the window and the stream's epoch compare with) is its start, never
        // its end (docs/design.md, "Freshness").
        const scannedAt = now();
        const checked =
          deps.checkParents && !override && scan === 1
            ? await existence(endpoint, parent, minContextSlot, signal)
            : { exists: true as const };
        if (checked.exists && account.kind === 'client') account.reserve = true;
        if (override) {
          // No name account, no subdomain (creating one takes the parent's owner): the check's
          // answer is the scan's, an empty list at its slot.
          const discovered = checked.exists
            ? await discoverSubdomains(deps.lane, endpoint, parent, signal, minContextSlot)
            : { labels: [], members: {}, slot: checked.slot, accounts: 0 };
          found = {
            slot: discovered.slot,
            accounts: discovered.accounts,
            listed: discovered.labels.length,
          };
          await deps.cache.putOverride(endpoint.id, parent, {
            labels: discovered.labels,
            fetchedAt: scannedAt,
            slot: discovered.slot,
            scanSlot: discovered.slot,
            scannedAt,
            accounts: discovered.members,
          });
          break;
        }
        // The configured endpoint's entry is written as the scan lists it: its chunks while the
        // decode thread goes on (docs/design.md, "Discovery"). The slot written with each member
        // is the one the entry is stored at, judged once per scan.
        let judged: { slot: number | undefined } | undefined;
        const storedSlot = (replySlot: number | undefined) => {
          judged ??= { slot: believed(deps.slots, parent, replySlot, warnAhead) };
          return judged.slot;
        };
        let write: ScanWrite | undefined;
        const writeAt = (replySlot: number | undefined) =>
          (write ??= deps.cache.scanWrite(endpoint.id, parent, storedSlot(replySlot) ?? 0));
        try {
          found = checked.exists
            ? await streamSubdomains(
                deps.lane,
                endpoint,
                parent,
                {
                  partMembers: PUT_CHUNK_MEMBERS,
                  firstPartMembers: FIRST_CHUNK_MEMBERS,
                  add: (replySlot, members, eager) => writeAt(replySlot).addPacked(members, eager),
                  listed: () => write?.flush(),
                  answer: scan === 1 && job.data.coldMiss === true,
                },
                signal,
                minContextSlot,
              )
            : // No name account: as above, an empty list at the check's slot.
              { slot: checked.slot, accounts: 0, listed: 0 };
        } catch (err) {
          await write?.abandon().catch(() => undefined);
          throw err;
        }
        // A request waits on a large scan: answered from its labels while the write goes on.
        if (found.answer) {
          early = answerEarly(endpoint.id, parent, {
            labels: found.answer,
            fetchedAt: scannedAt,
            slot: storedSlot(found.slot),
          });
        }
        if (deps.checkParents && found.listed > 0) {
          await deps.publisher.set(
            keys.parentExists(endpoint.id, parent),
            '1',
            'PX',
            PARENT_EXISTS_TTL_MS,
          );
        }
        const slot = storedSlot(found.slot);
        const ceiling = deps.slots?.ceiling();
        const outcome = await writeAt(found.slot).commit(
          { fetchedAt: scannedAt, slot, scanSlot: slot, scannedAt },
          ceiling,
        );
        if (outcome === 'written') break;
        // The stored entry reflects a later slot. When that is a later scan, this one is simply
        // older. When it is patches or a deletion check on top of an older scan than this one,
        // dropping this scan would leave out for good what it was for (a change no notification
        // proved): scan again at the stored slot, which then supersedes both.
        const stored = await deps.cache.head(endpoint.id, parent);
        const newerScan = (stored?.scanSlot ?? -1) >= (slot ?? -1);
        if (stored?.slot === undefined || newerScan || scan >= MAX_SCANS_PER_REFRESH) break;
        minContextSlot = stored.slot;
      }
      // The entry's event after the early one: a request that got neither waits on the entry.
      await early;
      await publishRefreshEvent(deps.publisher, deps.prefix, {
        endpointId: endpoint.id,
        parent,
        ok: true,
      });
      return { labels: found.listed, accounts: found.accounts, slot: found.slot };
    } catch (thrown) {
      const err =
        deadline?.aborted && !(thrown instanceof RpcCallError)
          ? new RpcCallError(
              `refresh over its ${deps.lane.refreshMs} ms`,
              'timeout',
              false,
              undefined,
              { final: true },
            )
          : thrown;
      const reason =
        err instanceof RpcCallError
          ? 'rpc'
          : err instanceof CreditBudgetRefusal
            ? err.kind === 'client'
              ? 'share'
              : 'budget'
            : 'internal';
      // A refusal of the budget or a share may come once per refused request: summed up.
      (err instanceof CreditBudgetRefusal ? warnRefused : deps.logger.warn.bind(deps.logger))(
        {
          err: err instanceof Error ? err.message : String(err),
          jobId: job.id,
          attempt: job.attemptsMade + 1,
          reason,
        },
        'refresh failed',
      );
      await publishRefreshEvent(deps.publisher, deps.prefix, {
        endpointId: endpoint?.id ?? '',
        parent,
        ok: false,
        reason,
      }).catch(() => undefined);
      // A reply that is not what was asked for (malformed, oversized, past the decode budget)
      // comes again: no retry. Anything else, a 403 or a JSON-RPC error included, may pass.
      if (err instanceof RpcCallError && err.final) throw new UnrecoverableError(err.message);
      // The day's budget is spent: a retry before the next UTC day meets the same refusal.
      if (err instanceof CreditBudgetRefusal) throw new UnrecoverableError(err.message);
      throw err;
    } finally {
      stopTimer();
    }
  }
}
