import { setTimeout as sleep } from 'node:timers/promises';
import type { Registry } from 'prom-client';
import { Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
import type { RefusalReason } from './errors.js';

/** Which endpoint a call went to; never the URL itself (docs/observability.md, "The metrics"). */
export type EndpointLabel = 'default' | 'override';
/**
 * How one RPC round trip ended; `behind` is -32016 (the node has not reached the `minContextSlot`
 * asked for): retried with back-off, a lagging node rather than a failure.
 */
export type RpcOutcome = 'ok' | 'behind' | 'rpc_error' | 'http_error' | 'timeout';
export type QueueState = 'waiting' | 'active' | 'delayed' | 'failed';
/** How a subdomain cache lookup went (`SubdomainLookup`'s `HIT`, `STALE`, `MISS`). */
export type CacheLookupResult = 'hit' | 'stale' | 'miss';

// The `outcome` values of the counters below, written here once and used at every call site:
// prom-client types a label value as any string, so a literal at a call site would go unchecked.
// The values are the contract of docs/observability.md's table (test/metrics.test.ts holds them).

/** `sns_refresh_jobs_total{outcome}`: `retried` = BullMQ tries again, `failed` = attempts spent. */
export const REFRESH_OUTCOME = Object.freeze({
  completed: 'completed',
  failed: 'failed',
  retried: 'retried',
} as const);
/**
 * `sns_refresh_events_lost_total{stage}`: `publish` = a worker's publish of an entry's change
 * failed after its retries; `receive` = an API process found it received fewer events than were
 * counted, and dropped its in-process copy.
 */
export const REFRESH_EVENT_LOSS = Object.freeze({
  publish: 'publish',
  receive: 'receive',
} as const);
/** `sns_ws_notifications_total{outcome}`: what one notification did. */
export const WS_NOTIFICATION_OUTCOME = Object.freeze({
  patched: 'patched',
  reread: 'reread',
  ignored: 'ignored',
  refused: 'refused',
  coalesced: 'coalesced',
} as const);
export type WsNotificationOutcome =
  (typeof WS_NOTIFICATION_OUTCOME)[keyof typeof WS_NOTIFICATION_OUTCOME];
/** `sns_deletion_checks_total{outcome}`: what one check of a watched parent did. */
export const DELETION_CHECK_OUTCOME = Object.freeze({
  unchanged: 'unchanged',
  dropped: 'dropped',
  owner: 'owner',
  scanned: 'scanned',
} as const);

/** `sns_http_refusals_total{reason}`: every reason a 429 or 503 refusal carries. */
const REFUSAL_REASONS: readonly RefusalReason[] = Object.freeze([
  'cold_miss_limit',
  'client_share',
  'stream_limit',
  'budget',
  'overloaded',
  'unavailable',
  'shutting_down',
]);

/** What `sns_rpc_budget_spent_credits` and `sns_rpc_budget_state` read at scrape time. */
export type BudgetSource = () => Promise<{ spent: number; state: number }>;

/**
 * The name of every metric the gateway defines, exported once: createMetrics names its metrics
 * with these, and the dashboard's panels (grafana/metric-panels.ts) query them by these.
 */
export const METRIC = Object.freeze({
  cacheLookups: 'sns_cache_lookups_total',
  rpcRequests: 'sns_rpc_requests_total',
  rpcRequestDurationSeconds: 'sns_rpc_request_duration_seconds',
  rpcResponseBytes: 'sns_rpc_response_bytes_total',
  rpcCredits: 'sns_rpc_credits_total',
  rpcBudgetCredits: 'sns_rpc_budget_credits',
  rpcBudgetSpentCredits: 'sns_rpc_budget_spent_credits',
  rpcBudgetState: 'sns_rpc_budget_state',
  rpcRetries: 'sns_rpc_retries_total',
  refreshJobs: 'sns_refresh_jobs_total',
  refreshDurationSeconds: 'sns_refresh_duration_seconds',
  queueJobs: 'sns_queue_jobs',
  redisUp: 'sns_redis_up',
  wsConnected: 'sns_ws_connected',
  wsReconnects: 'sns_ws_reconnects_total',
  wsSubscriptions: 'sns_ws_subscriptions',
  wsReceivedBytes: 'sns_ws_received_bytes_total',
  wsNotifications: 'sns_ws_notifications_total',
  refreshEventsLost: 'sns_refresh_events_lost_total',
  deletionChecks: 'sns_deletion_checks_total',
  followHealthy: 'sns_follow_healthy',
  followLastEventTimestampSeconds: 'sns_follow_last_event_timestamp_seconds',
  registryState: 'sns_registry_state',
  registryShardsDone: 'sns_registry_shards_done',
  registryAuditMismatches: 'sns_registry_audit_mismatches_total',
  registryAuditedParents: 'sns_registry_audited_parents_total',
  watchedParents: 'sns_watched_parents',
  httpRefusals: 'sns_http_refusals_total',
  httpRequestDurationSeconds: 'http_request_duration_seconds',
});

/**
 * Every metric of docs/observability.md's table, registered on one registry. One instance per
 * process: with `ROLE=all` the API and the worker share it, so nothing is registered twice.
 */
export type Metrics = ReturnType<typeof createMetrics>;

/** Reads the refresh queue's job counts by state (BullMQ's `getJobCounts`). */
export type QueueCountsSource = () => Promise<Partial<Record<QueueState, number>>>;
/** The values of `sns_queue_jobs`' `state` label. */
export const QUEUE_STATES: readonly QueueState[] = Object.freeze([
  'waiting',
  'active',
  'delayed',
  'failed',
]);
export const QUEUE_SCRAPE_TIMEOUT_MS = 500;
/** Whether Redis answers this process now (the readiness probe, at most one write a second). */
export type RedisUpSource = () => Promise<boolean>;

const RPC_LABELS = ['method', 'endpoint'] as const;

/**
 * Creates the metrics on `registry` and, unless told not to, prom-client's default process
 * metrics. The names, types and labels are the contract with the dashboard (docs/observability.md).
 *
 * @param registry a fresh registry; registering twice on one registry throws.
 */
export function createMetrics(registry: Registry, opts: { defaultMetrics?: boolean } = {}) {
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let queueCounts: QueueCountsSource | undefined;
  let budgetSource: BudgetSource | undefined;
  // One read of the budget per scrape, shared by its two gauges' collects.
  let budgetRead: Promise<{ spent: number; state: number } | undefined> | undefined;
  const readBudget = () =>
    (budgetRead ??= Promise.race([
      budgetSource?.().catch(() => undefined),
      sleep(QUEUE_SCRAPE_TIMEOUT_MS, undefined, { ref: false }),
    ]).finally(() => (budgetRead = undefined)));
  let redisProbe: RedisUpSource | undefined;
  let pendingHits = 0;
  const cacheLookups = new Counter({
    name: METRIC.cacheLookups,
    help: 'Subdomain cache lookups by result.',
    labelNames: ['result'] as const,
    registers,
    collect() {
      if (pendingHits === 0) return;
      this.inc({ result: 'hit' }, pendingHits);
      pendingHits = 0;
    },
  });
  const metrics = {
    /**
     * Counts one subdomain cache lookup in `sns_cache_lookups_total{result}`: the only way to
     * count one. Hits are the hot path: they are added up in a number and handed to the counter
     * when the registry is read (its `collect`), instead of prom-client hashing the label set on
     * every request.
     */
    countCacheLookup(result: CacheLookupResult) {
      if (result === 'hit') pendingHits++;
      else cacheLookups.inc({ result });
    },
    /**
     * Sets where `sns_queue_jobs` reads its counts at scrape time. A read slower than
     * {@link QUEUE_SCRAPE_TIMEOUT_MS} keeps the last values, so a slow Redis never blocks a scrape.
     */
    setQueueCountsSource(source: QueueCountsSource | undefined) {
      queueCounts = source;
    },
    /**
     * Sets where `sns_rpc_budget_spent_credits` and `sns_rpc_budget_state` read at scrape time
     * (src/core/rpc/budget.ts). A read slower than {@link QUEUE_SCRAPE_TIMEOUT_MS} keeps the last
     * values.
     */
    setBudgetSource(source: BudgetSource | undefined) {
      budgetSource = source;
    },
    /**
     * Sets what `sns_redis_up` reads at scrape time (the readiness probe's `redis` part). A probe
     * slower than {@link QUEUE_SCRAPE_TIMEOUT_MS} reads as 0: a stalled Redis is not answering.
     */
    setRedisUpSource(source: RedisUpSource | undefined) {
      redisProbe = source;
    },
    registry,
    rpcRequests: new Counter({
      name: METRIC.rpcRequests,
      help: 'Solana JSON-RPC HTTP round trips, by method, endpoint and outcome.',
      labelNames: [...RPC_LABELS, 'outcome'] as const,
      registers,
    }),
    rpcDuration: new Histogram({
      name: METRIC.rpcRequestDurationSeconds,
      help: 'Duration of one Solana JSON-RPC HTTP round trip.',
      labelNames: RPC_LABELS,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    rpcResponseBytes: new Counter({
      name: METRIC.rpcResponseBytes,
      help: 'Bytes received in Solana JSON-RPC response bodies.',
      labelNames: RPC_LABELS,
      registers,
    }),
    rpcCredits: new Counter({
      name: METRIC.rpcCredits,
      help: 'Provider cost units spent, from the configured cost table (RPC_CREDITS).',
      labelNames: RPC_LABELS,
      registers,
    }),
    rpcBudget: new Gauge({
      name: METRIC.rpcBudgetCredits,
      help: 'The daily credit budget of the configured endpoint (RPC_CREDITS_PER_DAY); 0 when unset.',
      registers,
    }),
    rpcBudgetSpent: new Gauge({
      name: METRIC.rpcBudgetSpentCredits,
      help: 'Credits the configured endpoint spent this UTC day, over all replicas (read from Redis).',
      registers,
      async collect() {
        const read = budgetSource ? await readBudget() : undefined;
        if (read) this.set(read.spent);
      },
    }),
    rpcBudgetState: new Gauge({
      name: METRIC.rpcBudgetState,
      help: 'The credit budget state: 0 normal, 1 stretched (freshness stretched, no refresh ahead), 2 exhausted (no new refresh).',
      registers,
      async collect() {
        const read = budgetSource ? await readBudget() : undefined;
        if (read) this.set(read.state);
      },
    }),
    rpcRetries: new Counter({
      name: METRIC.rpcRetries,
      help: 'Solana JSON-RPC calls retried after a transient failure.',
      labelNames: RPC_LABELS,
      registers,
    }),
    refreshJobs: new Counter({
      name: METRIC.refreshJobs,
      help: 'Subdomain refresh job attempts by outcome.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    refreshDuration: new Histogram({
      name: METRIC.refreshDurationSeconds,
      help: 'Duration of one subdomain refresh (RPC calls and derivations).',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    queueJobs: new Gauge({
      name: METRIC.queueJobs,
      help: 'Refresh jobs in the queue by state, read from BullMQ at scrape time.',
      labelNames: ['state'] as const,
      registers,
      async collect() {
        if (!queueCounts) return;
        const counts = await Promise.race([
          queueCounts().catch(() => undefined),
          sleep(QUEUE_SCRAPE_TIMEOUT_MS, undefined, { ref: false }),
        ]);
        if (!counts) return;
        for (const state of QUEUE_STATES) this.set({ state }, counts[state] ?? 0);
      },
    }),
    redisUp: new Gauge({
      name: METRIC.redisUp,
      help: 'Whether Redis answers this process (1) or not (0), probed at scrape time.',
      registers,
      async collect() {
        if (!redisProbe) return;
        const up = await Promise.race([
          redisProbe().catch(() => false),
          sleep(QUEUE_SCRAPE_TIMEOUT_MS, false, { ref: false }),
        ]);
        this.set(up ? 1 : 0);
      },
    }),
    wsConnected: new Gauge({
      name: METRIC.wsConnected,
      help: 'Whether the worker holds an open websocket to the RPC (1) or not (0).',
      registers,
    }),
    wsReconnects: new Counter({
      name: METRIC.wsReconnects,
      help: 'Websocket connections opened again after a drop, a silent socket or a refusal.',
      registers,
    }),
    wsSubscriptions: new Gauge({
      name: METRIC.wsSubscriptions,
      help: 'programSubscribe subscriptions open, one per watched parent.',
      registers,
    }),
    wsReceivedBytes: new Counter({
      name: METRIC.wsReceivedBytes,
      help: 'Bytes of websocket messages received from the RPC (what providers bill).',
      registers,
    }),
    wsNotifications: new Counter({
      name: METRIC.wsNotifications,
      help: 'programSubscribe notifications by outcome: patched, reread, ignored, refused or coalesced.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    refreshEventsLost: new Counter({
      name: METRIC.refreshEventsLost,
      help: 'Refresh events lost: a publish that failed after its retries (publish), or a loss an API process noticed and made good by dropping its in-process copy (receive).',
      labelNames: ['stage'] as const,
      registers,
    }),
    deletionChecks: new Counter({
      name: METRIC.deletionChecks,
      help: 'Watched parents checked for closed accounts and owners, by outcome: unchanged, dropped, owner (an owner put right) or scanned.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    followHealthy: new Gauge({
      name: METRIC.followHealthy,
      help: 'Whether this worker owns the follow stream and it vouches for cached entries (1) or not (0).',
      registers,
    }),
    followLastEvent: new Gauge({
      name: METRIC.followLastEventTimestampSeconds,
      help: 'Unix time of the last notification the follow stream delivered to this worker.',
      registers,
    }),
    registryState: new Gauge({
      name: METRIC.registryState,
      help: 'The registry index as this process sees it: 0 off or none, 1 building, 2 complete and served, 3 complete but not served (stream not followed whole), 4 behind (a rebuild is due).',
      registers,
    }),
    registryShardsDone: new Gauge({
      name: METRIC.registryShardsDone,
      help: 'Bootstrap pieces of the registry index build under way that are done.',
      registers,
    }),
    registryAuditMismatches: new Counter({
      name: METRIC.registryAuditMismatches,
      help: 'Subdomains the registry audit found differing from getProgramAccounts (each repaired).',
      registers,
    }),
    registryAudits: new Counter({
      name: METRIC.registryAuditedParents,
      help: 'Parents the registry audit read with getProgramAccounts and compared with the index.',
      registers,
    }),
    watchedParents: new Gauge({
      name: METRIC.watchedParents,
      help: 'Parents this worker holds the watch lease of.',
      registers,
    }),
    httpRefusals: new Counter({
      name: METRIC.httpRefusals,
      help: 'Requests refused with 429 or 503 by reason: cold_miss_limit, client_share, stream_limit, budget, overloaded, unavailable, shutting_down.',
      labelNames: ['reason'] as const,
      registers,
    }),
    httpDuration: new Histogram({
      name: METRIC.httpRequestDurationSeconds,
      help: 'HTTP request duration by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers,
    }),
  };
  // Every outcome from the start, at 0: a series appears before its first event, so the
  // dashboard's rates and Prometheus' alerts see the 0 rather than nothing.
  const { patched, reread, ignored } = WS_NOTIFICATION_OUTCOME;
  for (const outcome of [patched, reread, ignored]) metrics.wsNotifications.inc({ outcome }, 0);
  for (const outcome of Object.values(DELETION_CHECK_OUTCOME)) {
    metrics.deletionChecks.inc({ outcome }, 0);
  }
  for (const reason of REFUSAL_REASONS) metrics.httpRefusals.inc({ reason }, 0);
  for (const stage of Object.values(REFRESH_EVENT_LOSS))
    metrics.refreshEventsLost.inc({ stage }, 0);
  return metrics;
}
