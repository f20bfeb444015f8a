import type { Worker } from 'bullmq';
import { RegistryIndex, REGISTRY_EVENTS } from '../src/core/cache/registry-index.js';
import { REGISTRY_SERVING_VALUE, registryServing } from '../src/core/cache/registry-serving.js';
import { readFollowStatus } from '../src/core/cache/follow-status.js';
import { publishChange } from '../src/core/queue/refresh-events.js';
import type { RpcEndpoint } from '../src/core/rpc/endpoint.js';
import type { RedisClient } from '../src/core/redis.js';
import type { Logger } from 'pino';
import type { WorkerBoot } from './boot.js';
import type { FollowRpc } from './follow/rpc.js';
import { laneRpc } from './follow/lane-rpc.js';
import { AUDIT_EVERY_MS, auditRound } from './registry/audit.js';
import {
  createRegistryBuildQueue,
  createRegistryBuildWorker,
  superviseBuild,
} from './registry/build.js';
import { RegistryFeed } from './registry/feed.js';

/** How often the registry index's build is supervised (started, resumed, rebuilt), in ms. */
const REGISTRY_SUPERVISE_MS = 5_000;

/** The registry index's jobs, opened by {@link openRegistryJobs}. */
export type RegistryJobs = {
  /** What the follower feeds the index with (its `registry`). */
  feed: RegistryFeed;
  /** The BullMQ worker of the build's pieces; the caller closes it with the other jobs. */
  worker: Worker;
  /**
   * Supervises the build every {@link REGISTRY_SUPERVISE_MS} (and once now), stopped with the
   * kit: starts, resumes or rebuilds it, sets the registry's gauges, and, while the index serves
   * and the budget is normal, runs an audit round every `AUDIT_EVERY_MS` when `streamOwner()`.
   */
  supervise(streamOwner: () => boolean): void;
};

/**
 * Publishes that the listed subdomains of these parent ids changed (the feed's writes, the audit's
 * repairs), as refresh events of `endpointId` {@link REGISTRY_EVENTS}: the API's live updates of
 * those parents, and its copies of their answers, read them again. Never throws; an event still
 * refused after its retries is logged (the events' count lets the API notice it).
 */
export function registryChangePublisher(
  command: RedisClient,
  prefix: string,
  logger: Pick<Logger, 'warn'>,
): (parentIds: readonly string[]) => void {
  return (parentIds) => {
    for (const parent of parentIds) {
      void publishChange(
        command,
        prefix,
        { endpointId: REGISTRY_EVENTS, parent, ok: true },
        (err, attempt, final) => {
          if (final) logger.warn({ err: String(err), attempt }, 'registry: an event was lost');
        },
      );
    }
  };
}

/**
 * The registry index (docs/design.md, "The registry index"): built in pieces once the stream is
 * followed whole, fed by the stream from then on. Opens its build queue (closed with the kit),
 * its feed and its build worker; the caller decides whether the deployment has one
 * (`SUBDOMAIN_INDEX=registry` with a websocket and a configured endpoint).
 */
export function openRegistryJobs(boot: WorkerBoot, endpoint: RpcEndpoint): RegistryJobs {
  const { kit, config, metrics, logger, command, budget, defaultLane, slots } = boot;
  const prefix = config.QUEUE_PREFIX;
  const index = new RegistryIndex(command, prefix);
  const buildQueue = kit.closes(
    'worker registry build queue',
    kit.watchErrors(
      createRegistryBuildQueue(boot.queueConnection, prefix),
      'worker registry build queue',
    ),
    (q) => q.close().catch(() => undefined),
  );
  const rpc: FollowRpc = laneRpc(defaultLane, endpoint, slots);
  const publishChanged = registryChangePublisher(command, prefix, logger);
  const feed = new RegistryFeed({
    index,
    rpc,
    logger,
    now: () => boot.clock.now(),
    changed: publishChanged,
    lost: (why) => {
      logger.warn({ why }, 'registry: the stream lost facts; the index is behind');
      void index.markBehind().catch(() => undefined);
    },
  });
  // The build shares nothing a refresh waits on: a lane (decode thread) and a blocking connection
  // of its own, and it stands aside while refresh jobs wait to be taken.
  const worker = createRegistryBuildWorker(
    kit.redis('worker', 'worker registry build connection'),
    prefix,
    {
      index,
      lane: boot.buildLane,
      endpoint,
      slots,
      budget,
      followStatus: () => readFollowStatus(command, prefix),
      refreshWaiting: () => boot.queue.getJobCountByTypes('wait', 'prioritized'),
      logger,
    },
    (err) => kit.reportError(err, 'registry build worker'),
  );
  const supervise = (streamOwner: () => boolean) => {
    let supervising: Promise<void> | undefined;
    let auditedAt = Date.now();
    const round = () => {
      supervising ??= readFollowStatus(command, prefix)
        .then(async (status) => {
          await superviseBuild(index, buildQueue, { status, logger });
          const state = await index.state();
          const serving = registryServing(state, status, Date.now());
          metrics.registryState.set(REGISTRY_SERVING_VALUE[serving]);
          metrics.registryShardsDone.set(state.done);
          // The audit: proactive spend, by the stream's owner, while the index serves.
          if (
            serving === 'serving' &&
            streamOwner() &&
            budget.state() === 'normal' &&
            Date.now() - auditedAt >= AUDIT_EVERY_MS
          ) {
            auditedAt = Date.now();
            await auditRound({
              index,
              rpc,
              lane: defaultLane,
              endpoint,
              metrics,
              logger,
              changed: publishChanged,
            });
          }
        })
        .catch((err: unknown) => logger.warn({ err: String(err) }, 'registry: supervision'))
        .finally(() => (supervising = undefined));
    };
    round();
    const timer = setInterval(round, REGISTRY_SUPERVISE_MS);
    timer.unref();
    kit.closes('worker registry supervision', timer, async (t) => {
      clearInterval(t);
      await supervising;
    });
  };
  return { feed, worker, supervise };
}
