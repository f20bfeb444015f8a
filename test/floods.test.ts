import { afterEach, describe, expect, it } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { withAccounts } from './support/entry-accounts.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';

/** Headers that make a request come from `ip`, as a proxy in front (TRUST_PROXY=1) writes them. */
const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });

describe('load shedding and per-client limits', () => {
  let gw: Gateway | undefined;
  let sim: RpcSimulator | undefined;
  afterEach(async () => {
    await gw?.close();
    await sim?.close();
    gw = sim = undefined;
  });

  it('answers a cold miss 503 with Retry-After once QUEUE_MAX_WAITING refreshes wait, and keeps serving hits', async () => {
    gw = await startGateway({
      worker: false,
      env: { QUEUE_MAX_WAITING: '2', SUBDOMAINS_WAIT_MS: '200' },
    });
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 60_000, 86_400_000);
    await cache.put(
      endpointId(gw.config.RPC_URL ?? ''),
      'hot',
      ...withAccounts('hot', { labels: ['a'], fetchedAt: Date.now() }),
    );
    expect((await gw.get('/subdomains/cold1')).status).toBe(502); // queued, nobody works on it
    expect((await gw.get('/subdomains/cold2')).status).toBe(502);
    const shed = await gw.get('/subdomains/cold3');
    expect(shed.status).toBe(503);
    expect(shed.body).toEqual({ s: 'error', result: 'Service overloaded' });
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThan(0);
    // Joining a refresh already queued is not shed, and hits are untouched.
    expect((await gw.get('/subdomains/cold1')).status).toBe(502);
    expect(await gw.get('/subdomains/hot')).toMatchObject({ status: 200, body: { result: ['a'] } });
  });

  it('limits new refreshes per client (429 with Retry-After) but never hits or joined refreshes', async () => {
    gw = await startGateway({ env: { COLD_MISS_LIMIT: '3', TRUST_PROXY: '1' } });
    for (const parent of ['p1', 'p2', 'p3']) {
      expect((await gw.get(`/subdomains/${parent}`, from('203.0.113.7'))).status).toBe(200);
    }
    const limited = await gw.get('/subdomains/p4', from('203.0.113.7'));
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      s: 'error',
      result: 'Too many requests',
      detail:
        'this client started too many new refreshes or ?rpc= host lookups in the window; cached answers are not limited (see Retry-After)',
    });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another client is not limited; the limited one still gets every hit.
    expect((await gw.get('/subdomains/p4', from('198.51.100.9'))).status).toBe(200);
    for (let i = 0; i < 20; i++) {
      expect((await gw.get('/subdomains/p1', from('203.0.113.7'))).status).toBe(200);
    }
    expect((await gw.get('/subdomains/p4', from('203.0.113.7'))).status).toBe(200); // now a hit
  });

  it.each([
    ['a hop count', '1'],
    ['the proxy address', '127.0.0.1'],
  ])(
    'keeps a client that writes its own X-Forwarded-For entries under its limit (TRUST_PROXY as %s)',
    async (_how, trust) => {
      gw = await startGateway({ env: { COLD_MISS_LIMIT: '3', TRUST_PROXY: trust } });
      // The client sends a made-up address; the proxy in front (this test) appends the real one.
      const spoofed = (i: number) => ({
        headers: { 'x-forwarded-for': `198.51.100.${i}, 10.9.8.${i}, 203.0.113.7` },
      });
      const statuses: number[] = [];
      for (let i = 1; i <= 8; i++) {
        statuses.push((await gw.get(`/subdomains/spoof${i}`, spoofed(i))).status);
      }
      // With TRUST_PROXY=true, each request came from its left-most entry: eight 200s.
      expect(statuses).toEqual([200, 200, 200, 429, 429, 429, 429, 429]);
    },
  );

  it('counts a burst for one cold parent from one client as one new refresh', async () => {
    gw = await startGateway({ env: { COLD_MISS_LIMIT: '1', TRUST_PROXY: '1' } });
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => gw!.get('/subdomains/67679', from('203.0.113.8'))),
    );
    for (const r of replies) expect(r.status).toBe(200);
  });

  it('starts at most RPC_MAX_PER_SECOND refreshes per second during a flood of cold parents', async () => {
    const arrivals: number[] = [];
    sim = await startRpcSimulator({ chain: seedDemo(), onCall: () => arrivals.push(Date.now()) });
    gw = await startGateway({
      sim,
      env: { RPC_MAX_PER_SECOND: '4', WORKER_CONCURRENCY: '8', COLD_MISS_LIMIT: '1000' },
    });
    const parents = Array.from({ length: 12 }, (_, i) => `flood${i}`);
    const replies = await Promise.all(parents.map((p) => gw!.get(`/subdomains/${p}`)));
    for (const r of replies) expect(r.status).toBe(200);
    expect(arrivals).toHaveLength(12);
    arrivals.sort((a, b) => a - b);
    // BullMQ's limiter counts in fixed one-second windows: 12 jobs at 4 per window take three
    // windows, and no sliding second holds more than two windows' worth.
    for (let i = 0; i < arrivals.length; i++) {
      const inWindow = arrivals.filter((t) => t >= arrivals[i]! && t < arrivals[i]! + 1000).length;
      expect(inWindow).toBeLessThanOrEqual(8);
    }
    expect(arrivals[arrivals.length - 1]! - arrivals[0]!).toBeGreaterThanOrEqual(1900);
  });
});

describe('a flood of cold parents', () => {
  it('keeps answering warm keys from the cache while thousands of cold parents queue up', async () => {
    const gw = await startGateway({
      env: {
        QUEUE_MAX_WAITING: '500',
        SUBDOMAINS_WAIT_MS: '300',
        RPC_MAX_PER_SECOND: '20',
        COLD_MISS_LIMIT: '100000',
      },
    });
    try {
      // Warm the key first. The wait bound is short for the flood, and this process's first
      // refresh also boots the discovery thread; a 502 here still leaves the refresh to finish.
      await waitFor(async () => (await gw.get('/subdomains/67679')).status === 200);
      gw.sim.setFaults([{ kind: 'delay', ms: 200 }]); // a slow provider
      let flooding = true;
      const flood = (async () => {
        const statuses = new Map<number, number>();
        for (let batch = 0; batch < 30; batch++) {
          const replies = await Promise.all(
            Array.from({ length: 50 }, (_, i) => gw.get(`/subdomains/cold-${batch}-${i}`)),
          );
          for (const r of replies) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        }
        flooding = false;
        return statuses;
      })();
      const warm: number[] = [];
      while (flooding || warm.length < 100) {
        const started = performance.now();
        const res = await gw.get('/subdomains/67679');
        warm.push(performance.now() - started);
        expect(res.status).toBe(200);
        expect(res.headers.get('x-cache')).toBe('HIT');
      }
      const statuses = await flood;
      // Cold parents got 502 (no refresh within the wait) or 503 (queue full): never a hang or a crash.
      for (const status of statuses.keys()) expect([200, 502, 503]).toContain(status);
      expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
      warm.sort((a, b) => a - b);
      console.info(
        `warm p50 ${warm[49]!.toFixed(1)} ms, p99 ${warm[98]!.toFixed(1)} ms during the flood`,
      );
    } finally {
      gw.sim.setFaults([]);
      await gw.close();
    }
  }, 60_000);
});
