import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistryIndex } from '../src/core/cache/registry-index.js';
import { createRefreshQueue } from '../src/core/queue/refresh-queue.js';
import { SHARDS } from '../worker/registry/build.js';
import { SimChain, startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { REGISTRY } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { sdkSubdomains } from './support/sdk.js';

/** A refresh scan on this simulator: its delay, so a refresh's usual time is known. */
const SCAN_MS = 600;
/** Each build page's delay: the build stays under way for the whole suite. */
const PAGE_MS = 300;
/** What a refresh may take beyond its scan: the loopback, the queue, the event. */
const SLACK_MS = 2_500;

/** Parents with subdomains nobody asks until the test, and the build's own pieces to read. */
function chain(): SimChain {
  const c = new SimChain();
  for (let i = 0; i < 12; i++) {
    c.addDomain(`cold${i}`);
    c.addSubdomain(`cold${i}`, 'child');
  }
  return c;
}

describe('the registry build beside refresh jobs (one refresh at a time)', () => {
  let sim: RpcSimulator;
  let gw: Gateway;
  let index: RegistryIndex;
  let refreshes: Queue;
  beforeAll(async () => {
    sim = await startRpcSimulator({ chain: chain() });
    sim.setFaults([
      { kind: 'delay', ms: PAGE_MS, method: 'getProgramAccountsV2' },
      { kind: 'delay', ms: SCAN_MS, method: 'getProgramAccounts' },
    ]);
    gw = await startGateway({
      sim,
      env: { ...REGISTRY, WORKER_CONCURRENCY: '1' },
    });
    index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
    refreshes = createRefreshQueue(gw.redis, gw.config);
    await waitFor(async () => {
      const state = await index.state();
      return state.status === 'building' && state.done >= 2;
    }, 60_000);
  }, 90_000);
  afterAll(async () => {
    await refreshes.close();
    await gw.close();
    await sim.close();
  });

  const building = async () => {
    const state = await index.state();
    return state.status === 'building' && state.done < SHARDS.length;
  };

  it('finishes a refresh job queued while the build runs within its usual time', async () => {
    expect(await building()).toBe(true);
    for (const parent of ['cold0', 'cold1']) {
      const started = Date.now();
      const res = await gw.get(`/subdomains/${parent}`);
      const took = Date.now() - started;
      expect(res.status).toBe(200);
      expect(res.body.result).toEqual(await sdkSubdomains(sim.url, parent));
      expect(res.headers.get('x-cache')).toBe('MISS');
      expect(took).toBeLessThan(SCAN_MS + SLACK_MS);
    }
    // The build was under way all along, its pieces read beside the refreshes.
    expect(await building()).toBe(true);
  });

  it('reads no build page while refresh jobs wait to be taken', async () => {
    expect(await building()).toBe(true);
    const waiting = () => refreshes.getJobCountByTypes('wait', 'prioritized');
    const pages = () => sim.callCount('getProgramAccountsV2');
    // Four cold misses at once on one refresh slot: three wait, about 3 × SCAN_MS in all.
    const answers = Promise.all(
      ['cold4', 'cold5', 'cold6', 'cold7'].map((p) => gw.get(`/subdomains/${p}`)),
    );
    await waitFor(async () => (await waiting()) >= 2, 10_000);
    const atFirst = pages();
    let atLast = atFirst;
    let seen = 0;
    // Sampled while jobs still wait: at most the page already in flight was sent.
    await waitFor(async () => {
      if ((await waiting()) === 0) return true;
      atLast = pages();
      seen++;
      return false;
    }, 15_000);
    const results = await answers;
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(seen).toBeGreaterThan(5);
    expect(atLast - atFirst).toBeLessThanOrEqual(1);
    // And the build goes on once none wait.
    const after = pages();
    await waitFor(() => pages() > after + 1, 10_000);
  });
});
