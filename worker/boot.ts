import type { Queue } from 'bullmq';
import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import type { Config } from '../src/core/config.js';
import type { Metrics } from '../src/core/metrics.js';
import { createRefreshQueue, type RefreshJobData } from '../src/core/queue/refresh-queue.js';
import type { RedisClient } from '../src/core/redis.js';
import { CLOCK_START_WAIT_MS, RedisTime } from '../src/core/redis-time.js';
import { creditBudgetOf, type CreditBudget } from '../src/core/rpc/budget.js';
import { EndpointSelector } from '../src/core/rpc/endpoint.js';
import { SlotClock } from '../src/core/rpc/slot.js';
import type { RuntimeKit } from '../src/core/runtime/kit.js';
import { systemClock, type Clock } from './follow/types.js';
import { openLanes, type Lanes } from './lanes.js';
import { CreditMeter } from './rpc/credits.js';
import { Agents } from './rpc/transport.js';

/**
 * What the worker's boot opens and its jobs (./refresh-jobs.ts, ./scan-jobs.ts,
 * ./registry-jobs.ts, ./follow-jobs.ts) are wired from. Each resource's close step is declared on
 * `kit` where it was opened.
 */
export type WorkerBoot = Lanes & {
  kit: RuntimeKit;
  config: Config;
  metrics: Metrics;
  logger: Logger;
  /** BullMQ workers' blocking connection. */
  workerConnection: RedisClient;
  /** Commands: the cache, the budget, the clock, publishes. */
  command: RedisClient;
  /** BullMQ queues' connection. */
  queueConnection: RedisClient;
  endpoints: EndpointSelector;
  /** The configured endpoint's spend, counted across replicas (docs/design.md, "Budget"). */
  budget: CreditBudget;
  credits: CreditMeter;
  /** Redis's clock, synced: every time written for freshness is on it. */
  time: RedisTime;
  /** The deployment's one clock (Redis's), with the process's timers. */
  clock: Clock;
  cache: SubdomainCache;
  /** The newest slot the configured RPC has shown, shared by its refreshes and the follower. */
  slots: SlotClock;
  /** The configured endpoint's refresh queue. */
  queue: Queue<RefreshJobData>;
};

/**
 * The worker's boot: its Redis connections, RPC agents, budget and credit meter, lanes, clock
 * (synced with Redis's, waiting at most `CLOCK_START_WAIT_MS`), cache and refresh queue, each
 * closed with `kit`.
 *
 * @param opts.lookup DNS resolution for RPC connections (tests stage DNS rebinding with it).
 * @param opts.clock this process's own clock, Unix ms (`Date.now`; tests skew it).
 */
export async function bootWorker(
  kit: RuntimeKit,
  config: Config,
  metrics: Metrics,
  logger: Logger,
  opts: { lookup?: LookupFunction; clock?: () => number },
): Promise<WorkerBoot> {
  const workerConnection = kit.redis('worker', 'worker blocking connection');
  const command = kit.redis('command', 'worker command connection');
  const queueConnection = kit.redis('queue', 'worker queue connection');
  const endpoints = new EndpointSelector(config);
  const agents = kit.closes('worker rpc agents', new Agents({ lookup: opts.lookup }), (a) =>
    a.destroy(),
  );
  const budget = creditBudgetOf(config, command, metrics);
  // Closes after the jobs and the follower, before the connections: their last spends are added
  // to the day's counter.
  const credits = kit.closes(
    'worker credit counter',
    new CreditMeter({ metrics, redis: command, prefix: config.QUEUE_PREFIX, budget, logger }),
    (c) => c.close(),
  );
  const lanes = openLanes(kit, config, { metrics, agents, credits, endpoints });
  // Every time written for freshness (a scan's start, the stream's epoch and healthyUntil, a
  // check's start) is on Redis's clock, the one the API reads them with (docs/design.md,
  // "Freshness").
  const time = kit.closes('worker clock', new RedisTime(command, opts.clock), (t) => t.stop());
  time.start(undefined, (err) => kit.reportError(asError(err), 'worker clock'));
  await time.syncWithin(CLOCK_START_WAIT_MS);
  const clock: Clock = { now: time.now, after: (ms, fn) => systemClock.after(ms, fn) };
  const cache = new SubdomainCache(
    command,
    config.QUEUE_PREFIX,
    config.CACHE_FRESH_MS,
    config.CACHE_STALE_MS,
    { ttlMs: config.RPC_OVERRIDE_CACHE_MS, maxBytes: config.RPC_OVERRIDE_CACHE_BYTES },
    time.now,
  );
  const queue = kit.closes(
    'worker refresh queue',
    kit.watchErrors(createRefreshQueue(queueConnection, config), 'worker refresh queue'),
    (q) => q.close().catch(() => undefined),
  );
  return {
    ...lanes,
    kit,
    config,
    metrics,
    logger,
    workerConnection,
    command,
    queueConnection,
    endpoints,
    budget,
    credits,
    time,
    clock,
    cache,
    slots: new SlotClock(),
    queue,
  };
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));
