import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasBinary } from './support/programs.js';
import { startLocalCluster, type LocalCluster } from './support/redis-cluster.js';
import { seedDemo, startGateway, type Gateway } from './support/gateway.js';
import { startRpcSimulator, SimChain, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { sdkSubdomains } from './support/sdk.js';
import { indexServing, REGISTRY, untilStale } from './support/freshness.js';
import { waitFor } from './support/wait.js';

const available = hasBinary('redis-server') && hasBinary('redis-cli');
if (!available) console.warn('cluster tests skipped: redis-server or redis-cli is not installed');

/** The end-to-end behaviours of the gateway, on a 3-master Redis Cluster (REDIS_CLUSTER_NODES). */
describe.skipIf(!available)('on a Redis Cluster', () => {
  let cluster: LocalCluster;
  let gw: Gateway;
  let other: RpcSimulator;

  beforeAll(async () => {
    cluster = await startLocalCluster(3);
    const chain = new SimChain();
    chain.addSubdomain('67679', 'elsewhere');
    other = await startRpcSimulator({ chain });
    const seeded = seedDemo();
    for (let i = 0; i < 200; i++) seeded.addSubdomain('wide', `w${i}`);
    gw = await startGateway({
      chain: seeded,
      env: {
        REDIS_CLUSTER_NODES: cluster.nodes,
        RPC_OVERRIDE_ALLOWLIST: other.url,
        // Long enough that a warm request right after a cold one is a hit on a loaded machine;
        // the stale-while-revalidate case waits for the entry's own age (untilStale).
        CACHE_FRESH_SECONDS: '5',
        HOT_KEYS_TOP_N: '0',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await other?.close();
    await cluster?.stop();
  });

  it('uses a hash-tag key prefix', () => {
    expect(gw.config.QUEUE_PREFIX).toMatch(/^\{.+\}$/);
  });

  it('answers cold and warm requests with the SDK labels', async () => {
    const cold = await gw.get('/subdomains/67679');
    expect(cold.body).toEqual({ s: 'ok', result: ['bullish', 'hollaaa', 'testing'] });
    expect(cold.headers.get('x-cache')).toBe('MISS');
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('HIT');
    expect((await gw.get('/subdomains/wide')).body.result).toEqual(
      await sdkSubdomains(gw.sim.url, 'wide'),
    );
  });

  it('makes one refresh for 100 concurrent cold requests', async () => {
    gw.sim.resetCalls();
    const replies = await Promise.all(
      Array.from({ length: 100 }, () => gw.get('/subdomains/demo')),
    );
    for (const r of replies) expect(r.status).toBe(200);
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
  });

  it('serves stale while revalidating', async () => {
    await gw.get('/subdomains/67679');
    await untilStale(gw, '67679');
    gw.sim.setFaults([{ kind: 'delay', ms: 300, times: 1 }]);
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('STALE');
    await expect
      .poll(async () => (await gw.get('/subdomains/67679')).headers.get('x-cache'), {
        timeout: 5000,
      })
      .toBe('HIT');
  });

  it('keeps override entries apart, and answers RPC failures with 502', async () => {
    const viaOther = await gw.get(`/subdomains/67679?rpc=${encodeURIComponent(other.url)}`);
    expect(viaOther.body.result).toEqual(['elsewhere']);
    gw.sim.setFaults([{ kind: 'rpc-error', code: -32602 }]);
    expect(await gw.get('/subdomains/never-cached')).toMatchObject({
      status: 502,
      body: { result: 'RPC unavailable' },
    });
    gw.sim.setFaults([]);
  });

  it('is ready, and reads the queue counts from the cluster', async () => {
    expect((await gw.get('/readyz')).status).toBe(200);
    const metrics = await (await fetch(gw.metricsUrl)).text();
    expect(metrics).toMatch(/sns_queue_jobs\{state="waiting"\} \d+/);
  });
});

/**
 * The registry index (the default `SUBDOMAIN_INDEX`) on a cluster: its scripts reach the parents'
 * hashes and account buckets they name from the prefix, which a cluster allows only because the
 * prefix is one hash tag, so every key of the deployment is in one slot.
 */
describe.skipIf(!available)('the registry index on a Redis Cluster', () => {
  let cluster: LocalCluster;
  let gw: Gateway;

  beforeAll(async () => {
    cluster = await startLocalCluster(3);
    const seeded = seedDemo();
    for (let i = 0; i < 50; i++) seeded.addSubdomain('wide', `w${i}`);
    gw = await startGateway({
      chain: seeded,
      env: { ...REGISTRY, REDIS_CLUSTER_NODES: cluster.nodes },
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await cluster?.stop();
  });

  it('builds, serves every parent without getProgramAccounts, and follows a new subdomain', async () => {
    await indexServing(gw);
    // The SDK's own findSubdomains reads getProgramAccounts: counted before the gateway's calls.
    const sdk = await sdkSubdomains(gw.sim.url, 'wide');
    gw.sim.resetCalls();
    expect((await gw.get('/subdomains/wide')).body.result).toEqual(sdk);
    expect((await gw.get('/subdomains/made-up-parent')).body).toEqual({ s: 'ok', result: [] });
    gw.sim.chain.addSubdomain('wide', 'zz-late');
    await waitFor(async () =>
      ((await gw.get('/subdomains/wide')).body.result as string[]).includes('zz-late'),
    );
    expect(gw.sim.callCount('getProgramAccounts')).toBe(0);
  });
});
