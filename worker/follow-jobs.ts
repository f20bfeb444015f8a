import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { topHotParents } from '../src/core/cache/hot-parents.js';
import type { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import type { Config } from '../src/core/config.js';
import { occasionalWarning } from '../src/core/logger.js';
import { REFRESH_EVENT_LOSS, type Metrics } from '../src/core/metrics.js';
import { publishChange } from '../src/core/queue/refresh-events.js';
import { addRefreshJob, type RefreshJobData } from '../src/core/queue/refresh-queue.js';
import type { RedisClient } from '../src/core/redis.js';
import { redisKeys } from '../src/core/redis-keys.js';
import type { CreditBudget } from '../src/core/rpc/budget.js';
import type { RpcEndpoint } from '../src/core/rpc/endpoint.js';
import type { SlotClock } from '../src/core/rpc/slot.js';
import type { RuntimeKit } from '../src/core/runtime/kit.js';
import { cacheStore } from './follow/cache-store.js';
import { Follower, type FollowerDeps } from './follow/follower.js';
import { laneRpc } from './follow/lane-rpc.js';
import { redlockLocker } from './follow/ownership.js';
import { Rereads } from './follow/rereads.js';
import { followStatusStore } from './follow/status-store.js';
import { every, type Clock } from './follow/types.js';
import { WsConnection } from './follow/ws-connection.js';
import { costOf } from './rpc/client.js';
import type { CreditMeter } from './rpc/credits.js';
import type { DiscoveryLane } from './sns/subdomain-discovery.js';

/** How often owed re-reads are checked against the stored scans, in milliseconds. */
const REREAD_CHECK_MS = 2_000;

/** What the follower's jobs are wired from: the worker's boot (./runtime.ts) opens each. */
export type FollowJobsDeps = {
  kit: RuntimeKit;
  config: Config;
  metrics: Metrics;
  logger: Logger;
  /** The worker's command connection. */
  command: RedisClient;
  /** The configured endpoint's refresh queue. */
  queue: Queue<RefreshJobData>;
  cache: SubdomainCache;
  defaultEndpoint: RpcEndpoint;
  defaultLane: DiscoveryLane;
  slots: SlotClock;
  /** The deployment's one clock (Redis's), with the process's timers. */
  clock: Clock;
  budget: CreditBudget;
  credits: CreditMeter;
  registry?: FollowerDeps['registry'];
};

/**
 * The re-read job: a parent re-read at a slot is queued (`change`), remembered, and queued again
 * every {@link REREAD_CHECK_MS} until a scan that far is stored (a re-read that joined a scan
 * under way may have been read too early; docs/design.md, "Freshness"). Closed with the kit.
 */
export function startRereads(deps: FollowJobsDeps): Rereads {
  const { kit, queue, cache, defaultEndpoint, logger, clock } = deps;
  const rereads = new Rereads({
    queue: (parent, minContextSlot) =>
      void addRefreshJob(
        queue,
        {
          cacheKey: cache.key(defaultEndpoint.id, parent),
          parent,
          endpoint: { kind: 'default' },
          ...(minContextSlot === undefined ? {} : { minContextSlot }),
        },
        'change',
      ).catch((err: unknown) =>
        logger.warn({ err: String(err), parent }, 'could not queue a re-read'),
      ),
    scanSlotOf: async (parent) => {
      const head = await cache.head(defaultEndpoint.id, parent);
      return head === null ? null : head.scanSlot;
    },
  });
  kit.closes(
    'worker re-read checks',
    every(
      clock,
      REREAD_CHECK_MS,
      () => rereads.check(),
      (err: unknown) => logger.warn({ err: String(err) }, 're-read check'),
    ),
    (stop) => stop(),
  );
  return rereads;
}

/**
 * The follower's "entry changed" publish: tried again with back-off when Redis refuses it
 * ({@link publishChange}); a publish still refused is counted
 * (`sns_refresh_events_lost_total{stage="publish"}`) and logged once a minute at most, and the
 * API processes notice it by the events' count. Never throws.
 */
function changePublisher(deps: FollowJobsDeps): (parent: string) => void {
  const { command, config, metrics, defaultEndpoint } = deps;
  const warn = occasionalWarning(deps.logger);
  return (parent) =>
    void publishChange(
      command,
      config.QUEUE_PREFIX,
      { endpointId: defaultEndpoint.id, parent, ok: true },
      (err, attempt, final) => {
        if (!final) return;
        metrics.refreshEventsLost.inc({ stage: REFRESH_EVENT_LOSS.publish });
        warn(
          { err: String(err), parent, attempts: attempt },
          "could not publish a followed change: API processes see it by the events' count",
        );
      },
    );
}

/**
 * The follower of the configured endpoint (docs/design.md, "Freshness"), closed with the kit
 * (first of what is opened before it: its lease goes back at once to another worker), started.
 */
export function startFollower(deps: FollowJobsDeps, rereads: Rereads): Follower {
  const { kit, config, metrics, logger, command, defaultEndpoint } = deps;
  const url = config.RPC_WS_URL;
  if (!url) throw new Error('the follower needs RPC_WS_URL');
  const freshMs = config.CACHE_FRESH_MS;
  const follower = kit.closes(
    'worker follower',
    new Follower({
      store: (reread) =>
        cacheStore(
          deps.cache,
          command,
          config.QUEUE_PREFIX,
          defaultEndpoint.id,
          deps.slots,
          reread,
        ),
      rpc: laneRpc(deps.defaultLane, defaultEndpoint, deps.slots),
      clock: deps.clock,
      slots: deps.slots,
      metrics,
      logger,
      budget: deps.budget,
      reread: (parent, minContextSlot) => rereads.want(parent, minContextSlot),
      owed: () => rereads.owed(),
      changed: changePublisher(deps),
      status: followStatusStore(command, config.QUEUE_PREFIX),
      locker: redlockLocker(command),
      leaseResource: redisKeys(config.QUEUE_PREFIX).followLease,
      leaseMs: config.WATCH_LEASE_MS,
      freshMs,
      checkCost: costOf(config.RPC_CREDITS, 'getMultipleAccounts'),
      scanCost: costOf(config.RPC_CREDITS, 'getProgramAccounts'),
      hotParents: () =>
        config.HOT_KEYS_TOP_N > 0
          ? topHotParents(
              command,
              config.QUEUE_PREFIX,
              freshMs,
              config.HOT_KEYS_TOP_N,
              config.HOT_KEYS_MIN_CLIENTS,
            )
          : Promise.resolve([]),
      ...(deps.registry ? { registry: deps.registry } : {}),
      connect: (hooks) =>
        new WsConnection({
          url,
          metrics,
          logger,
          costs: config.RPC_CREDITS,
          credits: deps.credits,
          pingMs: config.RPC_WS_PING_MS,
          ...hooks,
        }),
    }),
    (f) =>
      f.close().catch((err: unknown) => logger.warn({ err: String(err) }, 'closing the follower')),
  );
  follower.start();
  return follower;
}
