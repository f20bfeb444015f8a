import { afterEach, describe, expect, it } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { elapse } from './support/wait.js';

/**
 * Every RPC credit spent for a request is charged to a client (docs/design.md, "Admission" and
 * "The refresh queue", hot parents): against the real API, worker, Redis and simulator, with
 * requests from several loopback addresses (inject's `remoteAddress`: the address Fastify reports,
 * so the cold-miss limit's key).
 */

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

type Answer = { status: number; cache: string | undefined };

/** GET `path` as the client at `address` (with `headers`): its status and X-Cache. */
async function ask(
  g: Gateway,
  path: string,
  address: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await g.api.app.inject({ method: 'GET', url: path, remoteAddress: address, headers });
  const cache = res.headers['x-cache'];
  return { status: res.statusCode, cache: typeof cache === 'string' ? cache : undefined };
}

const FLOODER = '127.0.0.9';

describe('refreshes charged to the client that asks', () => {
  it('spends at most COLD_MISS_LIMIT scans per window on one address flooding made-up parents, and never answers a refused parent from a refresh nobody paid for', async () => {
    const limit = 5;
    const windowMs = 2_000;
    gw = await startGateway({
      env: {
        COLD_MISS_LIMIT: String(limit),
        COLD_MISS_WINDOW_SECONDS: String(windowMs / 1000),
        // Entries go stale within a second: stale hits would refresh them, the clock would
        // refresh hot ones every half second, and the watcher would follow them.
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '60',
        RPC_MAX_PER_SECOND: '50',
        WORKER_CONCURRENCY: '8',
        RPC_WS: 'on',
        WATCH_LEASE_MS: '1500',
        RPC_WS_PING_MS: '500',
      },
    });
    const parents = Array.from({ length: 30 }, (_, i) => `madeup${i}`);
    const answers = new Map<string, Answer[]>(parents.map((p) => [p, []]));
    gw.sim.resetCalls();
    const started = Date.now();
    const floodMs = 7_000;
    for (let i = 0; Date.now() - started < floodMs; i++) {
      const parent = parents[i % parents.length] as string;
      answers.get(parent)?.push(await ask(gw, `/subdomains/${parent}`, FLOODER));
      // The flood's pace: its windows are what the limit counts.
      await elapse(10);
    }
    // Whatever the flood queued has had time to run.
    await elapse(2_000);
    const elapsed = Date.now() - started;
    const scans = gw.sim.callCount('getProgramAccounts');
    // The limit's windows begin at the address's first charge: the flood touched at most this
    // many of them.
    const windows = Math.ceil(elapsed / windowMs) + 1;
    expect(scans).toBeGreaterThan(0);
    expect(scans).toBeLessThanOrEqual(limit * windows);

    const all = [...answers.values()].flat();
    expect(all.filter((a) => a.status === 429).length).toBeGreaterThan(all.length / 2);
    for (const [parent, got] of answers) {
      const first200 = got.findIndex((a) => a.status === 200);
      if (first200 === -1) continue;
      // The entry was made by a refresh this client waited for and paid: a parent it was refused
      // is not answered later from a refresh charged to nobody.
      expect({ parent, first: got[first200] }).toEqual({
        parent,
        first: { status: 200, cache: 'MISS' },
      });
      // Once the entry exists, every answer is 200 (a stale hit past the limit is served, unrefreshed).
      expect({ parent, later: got.slice(first200).filter((a) => a.status !== 200) }).toEqual({
        parent,
        later: [],
      });
    }
  });

  it('serves a stale hit past the limit without refreshing it, and refreshes it for a client under its limit', async () => {
    gw = await startGateway({
      env: {
        COLD_MISS_LIMIT: '1',
        COLD_MISS_WINDOW_SECONDS: '60',
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '60',
        // Only the stale hits may refresh the entry here.
        HOT_KEYS_TOP_N: '0',
      },
    });
    const parent = '67679';
    expect(await ask(gw, `/subdomains/${parent}`, '127.0.0.2')).toEqual({
      status: 200,
      cache: 'MISS',
    });
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
    // Past CACHE_FRESH_SECONDS: the entry is stale.
    await elapse(1_200);
    // Stale, and the client's one refresh of the window is spent: served, not refreshed.
    for (let i = 0; i < 5; i++) {
      expect(await ask(gw, `/subdomains/${parent}`, '127.0.0.2')).toEqual({
        status: 200,
        cache: 'STALE',
      });
      await elapse(300);
    }
    // Time is the subject: none of those stale hits starts a refresh meanwhile.
    await elapse(1_000);
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 1, 1);
    const fetchedAt = async () =>
      (await cache.head(endpointId(gw!.sim.url), parent))?.fetchedAt ?? 0;
    const before = await fetchedAt();
    // Another client's stale hit starts the refresh, charged to it.
    expect(await ask(gw, `/subdomains/${parent}`, '127.0.0.3')).toEqual({
      status: 200,
      cache: 'STALE',
    });
    // The refresh is over once its entry is stored, not once its scan reached the chain; and on a
    // loaded machine the next ask may come past the one-second fresh window, so the stored entry,
    // not a HIT, says the entry was refreshed.
    await waitFor(async () => (await fetchedAt()) > before, 15_000, 'the entry refreshed');
    expect(gw.sim.callCount('getProgramAccounts')).toBe(2);
  });

  it('keeps following a parent two clients ask for while one address floods made-up parents', async () => {
    gw = await startGateway({
      env: {
        RPC_WS: 'on',
        HOT_KEYS_TOP_N: '3',
        // Longer than the test may run: the clock never refreshes the entry, so a new subdomain
        // shows only if the stream follows the parent, however slow the machine.
        CACHE_FRESH_SECONDS: '3600',
        CACHE_STALE_SECONDS: '3600',
        COLD_MISS_LIMIT: '10',
        COLD_MISS_WINDOW_SECONDS: '2',
      },
    });
    const g = gw;
    const parent = '67679';
    const lease = redisKeys(g.config.QUEUE_PREFIX).followLease;
    const madeUp = Array.from({ length: 12 }, (_, i) => `flood${i}`);
    // What the users got, checked once they stop: a throw inside the loop would go unhandled.
    const usersGot: number[] = [];
    const floodAnswered = new Map(madeUp.map((p) => [p, 0]));
    let asking = true;
    const users = (async () => {
      while (asking) {
        for (const address of ['127.0.0.2', '127.0.0.3']) {
          usersGot.push((await ask(g, `/subdomains/${parent}`, address)).status);
        }
        // The users' pace: they ask now and then, the flood all the time.
        await elapse(500);
      }
    })();
    let flood: Promise<void> | undefined;
    try {
      await waitFor(async () => (await g.redis.exists(lease)) === 1, 15_000, 'the stream owned');
      flood = (async () => {
        for (let i = 0; asking; i++) {
          const made = madeUp[i % madeUp.length] as string;
          const { status } = await ask(g, `/subdomains/${made}`, FLOODER);
          if (status === 200) floodAnswered.set(made, (floodAnswered.get(made) ?? 0) + 1);
          // The flood's pace: as fast as the loop goes, leaving the event loop to the others.
          await elapse(5);
        }
      })();
      // Flooded: every made-up parent has its entry, so it is followed as the real one is, and the
      // one address has asked for each again and again.
      await waitFor(
        () => [...floodAnswered.values()].every((n) => n >= 25),
        30_000,
        'each made-up parent answered 25 times',
      );
      // Still followed while the flood goes on: a new subdomain shows.
      g.sim.chain.addSubdomain(parent, 'duringflood');
      await waitFor(
        async () => {
          const res = await g.api.app.inject({
            method: 'GET',
            url: `/subdomains/${parent}`,
            remoteAddress: '127.0.0.2',
          });
          return (res.json<{ result: string[] }>().result ?? []).includes('duringflood');
        },
        30_000,
        'duringflood shown',
        100,
      );
    } finally {
      asking = false;
      await Promise.all([users, flood]);
    }
    expect(usersGot.length).toBeGreaterThan(0);
    expect(usersGot.filter((status) => status !== 200)).toEqual([]);
  }, 120_000);

  it('answers clients under their limit who join the refresh of a client over its limit: each retries with its own charge, the refused one spends nothing', async () => {
    gw = await startGateway({ env: { COLD_MISS_LIMIT: '2', COLD_MISS_WINDOW_SECONDS: '60' } });
    const g = gw;
    expect((await ask(g, '/subdomains/burn1', FLOODER)).status).toBe(200);
    expect((await ask(g, '/subdomains/burn2', FLOODER)).status).toBe(200);
    expect((await ask(g, '/subdomains/burn3', FLOODER)).status).toBe(429);
    g.sim.resetCalls();
    const joiners: number[] = [];
    for (let round = 0; round < 5; round++) {
      const parent = `joined${round}`;
      // The over-limit client's request comes first and starts the single flight of the parent.
      const [first, ...rest] = await Promise.all([
        ask(g, `/subdomains/${parent}`, FLOODER),
        ask(g, `/subdomains/${parent}`, `127.0.1.${round * 2 + 1}`),
        ask(g, `/subdomains/${parent}`, `127.0.1.${round * 2 + 2}`),
      ]);
      expect(first.status).toBe(429);
      joiners.push(...rest.map((a) => a.status));
    }
    // Fresh addresses, never limited: each may start a refresh, charged to itself.
    expect(joiners).toEqual(Array.from({ length: 10 }, () => 200));
    // One scan per parent, charged to one of the joiners; none to the refused client.
    expect(g.sim.callCount('getProgramAccounts')).toBe(5);
  });

  it('counts one IPv6 /64 as one client, and an IPv4-mapped address as its IPv4 address', async () => {
    gw = await startGateway({
      env: { COLD_MISS_LIMIT: '2', COLD_MISS_WINDOW_SECONDS: '60', TRUST_PROXY: '127.0.0.1' },
    });
    const g = gw;
    g.sim.resetCalls();
    const statuses: number[] = [];
    for (let i = 1; i <= 10; i++) {
      const xff = { 'x-forwarded-for': `2001:db8:1:2::${i.toString(16)}` };
      statuses.push((await ask(g, `/subdomains/v6made${i}`, '127.0.0.1', xff)).status);
    }
    // One /64 is one host: COLD_MISS_LIMIT new refreshes in the window, then 429.
    expect(g.sim.callCount('getProgramAccounts')).toBe(2);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8);
    // Another /64 is another client.
    const other = { 'x-forwarded-for': '2001:db8:1:3::1' };
    expect((await ask(g, '/subdomains/v6other', '127.0.0.1', other)).status).toBe(200);
    // A dual-stack socket's ::ffff:192.0.2.7 and 192.0.2.7 share one limit.
    const v4 = { 'x-forwarded-for': '192.0.2.7' };
    const mapped = { 'x-forwarded-for': '::ffff:192.0.2.7' };
    expect((await ask(g, '/subdomains/v4made1', '127.0.0.1', v4)).status).toBe(200);
    expect((await ask(g, '/subdomains/v4made2', '127.0.0.1', mapped)).status).toBe(200);
    expect((await ask(g, '/subdomains/v4made3', '127.0.0.1', v4)).status).toBe(429);
  });

  it('spends on two colluding addresses at most their limits plus HOT_KEYS_TOP_N parents refreshed ahead per scan (the documented bound of uncharged refreshes)', async () => {
    const limit = 3;
    const topN = 2;
    gw = await startGateway({
      env: {
        COLD_MISS_LIMIT: String(limit),
        COLD_MISS_WINDOW_SECONDS: '60',
        CACHE_FRESH_SECONDS: '1',
        CACHE_STALE_SECONDS: '60',
        HOT_KEYS_TOP_N: String(topN),
      },
    });
    const g = gw;
    const clients = ['127.0.5.1', '127.0.5.2'];
    const parents = Array.from({ length: 6 }, (_, i) => `pair${i}`);
    g.sim.resetCalls();
    const started = Date.now();
    for (const [i, p] of parents.entries()) {
      expect((await ask(g, `/subdomains/${p}`, clients[i % 2] as string)).status).toBe(200);
    }
    // Each asks for the other's parents too: every parent has two clients, so it is hot.
    while (Date.now() - started < 8_000) {
      for (const p of parents) for (const c of clients) await ask(g, `/subdomains/${p}`, c);
      await elapse(250);
    }
    const elapsed = Date.now() - started;
    // Charged: both limits. Uncharged: at most HOT_KEYS_TOP_N parents per window, each at most
    // once a scan (a scan every 500 ms at this freshness). Not both limits alone: by design.
    const scans = g.sim.callCount('getProgramAccounts');
    expect(scans).toBeGreaterThan(2 * limit);
    expect(scans).toBeLessThanOrEqual(2 * limit + topN * (Math.floor(elapsed / 500) + 2));
  });
});
