import { endpointId } from '../../src/core/rpc/endpoint.js';
import { redisKeys } from '../../src/core/redis-keys.js';
import { waitFor, type Gateway } from './gateway.js';
import type { RpcSimulator } from '../../tools/rpc-sim/index.js';

/** The parent the freshness tests watch: bullish, hollaaa, testing on the demo chain. */
export const PARENT = '67679';

/**
 * Following the chain, quickly: short leases and pings, a few hot parents watched, and one client
 * (the test) enough to make a parent hot.
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
 * Asks for `parent` until a worker watches it: subscribed on the simulator, and the entry written
 * again after the first answer (the read that follows each subscription), so the chain is
 * followed from then on.
 */
export async function watched(g: Gateway, sim: RpcSimulator, parent = PARENT): Promise<void> {
  await waitFor(async () => {
    await g.get(`/subdomains/${parent}`);
    return sim.wsStats().subscriptions >= 1;
  }, 15_000);
  const key = redisKeys(g.config.QUEUE_PREFIX).entryMeta(endpointId(sim.url), parent);
  await waitFor(async () => {
    const raw = await g.redis.get(key);
    return raw !== null && ((JSON.parse(raw) as { rev?: number }).rev ?? 0) >= 2;
  }, 10_000);
}

/** Keeps asking for `parent` (so it stays hot) for `ms` milliseconds; the answers' X-Cache. */
export async function keepAsking(g: Gateway, ms: number, parent = PARENT): Promise<string[]> {
  const states: string[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    states.push((await g.get(`/subdomains/${parent}`)).headers.get('x-cache') ?? '');
    await new Promise((r) => setTimeout(r, 100));
  }
  return states;
}
