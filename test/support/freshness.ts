import { endpointId } from '../../src/core/rpc/endpoint.js';
import { redisKeys } from '../../src/core/redis-keys.js';
import { readFollowStatus } from '../../src/core/cache/follow-status.js';
import { SubdomainCache } from '../../src/core/cache/subdomain-cache.js';
import { OPS_ROUTE, type Readiness, type ReadinessParts } from '../../src/core/http/ops-routes.js';
import { waitFor, type Gateway } from './gateway.js';
import type { RpcSimulator } from '../../tools/rpc-sim/index.js';
import { elapse } from './wait.js';
import { JOIN_EVERY_MS } from '../../worker/follow/followed-parents.js';

/** The parent the freshness tests watch: bullish, hollaaa, testing on the demo chain. */
export const PARENT = '67679';

/**
 * Following the chain, quickly: short leases and pings, a few hot parents for the per-parent
 * fallback, and one client (the test) enough to make a parent hot.
 */
export const FOLLOW = {
  RPC_WS: 'on',
  HOT_KEYS_TOP_N: '5',
  HOT_KEYS_MIN_CLIENTS: '1',
  WATCH_LEASE_MS: '1500',
  RPC_WS_PING_MS: '500',
  CACHE_FRESH_SECONDS: '15',
  CACHE_STALE_SECONDS: '600',
} as const;

/** {@link FOLLOW} with `/subdomains` answered from the registry index (`SUBDOMAIN_INDEX=registry`). */
export const REGISTRY = { ...FOLLOW, SUBDOMAIN_INDEX: 'registry' } as const;

/**
 * The registry index's state as the gateway's `/readyz` says it (`parts.index`: `building`,
 * `serving`, ...; ReadinessParts in src/core/http/ops-routes.ts), undefined without one.
 */
export async function readyzIndex(g: Gateway): Promise<ReadinessParts['index']> {
  const { parts } = (await g.get(OPS_ROUTE.readyz)).body as Partial<Readiness>;
  return parts?.index;
}

/** Waits, bounded by `timeoutMs`, until `/readyz` says the registry index is `serving`. */
export async function indexServing(g: Gateway, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => (await readyzIndex(g)) === 'serving',
    timeoutMs,
    'the registry index serving',
  );
}

/** The labels the gateway answers for `parent` now. */
export const labels = async (g: Gateway, parent = PARENT) =>
  (await g.get(`/subdomains/${parent}`)).body.result as string[];

/** The sum of a metric's values whose labels include `labels`. */
export async function metric(g: Gateway, name: string, labels: Record<string, string> = {}) {
  const found = (await g.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  return found
    .filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))
    .reduce((n, v) => n + v.value, 0);
}

/**
 * Asks for `parent` once the follow stream vouches for entries (the worker owns it, both
 * subscriptions confirmed, its gap healed), and waits until the worker follows the parent: in the
 * registry, and then in the worker's own set (its `sns_watched_parents`; with the worker in a process
 * of its own, past the second within which it reads the registry's recent writes).
 */
export async function watched(g: Gateway, sim: RpcSimulator, parent = PARENT): Promise<void> {
  // The status, not this process's gauge: the worker may run in a process of its own.
  await waitFor(async () => {
    const status = await readFollowStatus(g.redis, g.config.QUEUE_PREFIX);
    return status?.mode === 'program' && status.healthyUntil > Date.now();
  }, 15_000);
  await g.get(`/subdomains/${parent}`);
  const registry = redisKeys(g.config.QUEUE_PREFIX).followedParents(endpointId(sim.url));
  await waitFor(async () => (await g.redis.zscore(registry, parent)) !== null, 10_000);
  if (g.worker) {
    // The worker follows every parent of the registry once it has read its recent writes (every
    // JOIN_EVERY_MS): its gauge of watched parents counts them all by then.
    await waitFor(
      async () => (await metric(g, 'sns_watched_parents')) >= (await g.redis.zcard(registry)),
      10_000,
      `the worker following ${parent}`,
    );
  } else {
    // A worker in a process of its own: its gauge is not this one's. Its next read of the
    // registry, with room for a late tick.
    await elapse(JOIN_EVERY_MS + 500);
  }
}

/** Keeps asking for `parent` (so it stays hot) for `ms` milliseconds; the answers' X-Cache. */
export async function keepAsking(g: Gateway, ms: number, parent = PARENT): Promise<string[]> {
  const states: string[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    states.push((await g.get(`/subdomains/${parent}`)).headers.get('x-cache') ?? '');
    await elapse(100);
  }
  return states;
}

/**
 * Waits, bounded, until the configured endpoint's entry of `parent` is older than the gateway's
 * fresh window (`CACHE_FRESH_MS`), so the next ask finds it stale: the entry's own `fetchedAt`, not
 * a guess of when its refresh ended. Asks nothing of the gateway meanwhile, so queues no refresh.
 */
export async function untilStale(g: Gateway, parent: string, timeoutMs = 10_000): Promise<void> {
  const cache = new SubdomainCache(g.redis, g.config.QUEUE_PREFIX, 1, 1);
  const endpoint = endpointId(g.config.RPC_URL ?? g.sim.url);
  await waitFor(
    async () => {
      const head = await cache.head(endpoint, parent);
      return head !== null && Date.now() - head.fetchedAt > g.config.CACHE_FRESH_MS;
    },
    timeoutMs,
    `the entry of ${parent} stale`,
  );
}
