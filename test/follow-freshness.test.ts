import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFollowStatus } from '../src/core/cache/follow-status.js';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { elapse } from './support/wait.js';
import { withReverses } from './support/entry-accounts.js';

/**
 * The API's freshness rule with the chain followed (docs/design.md, "Freshness"): an entry older
 * than the window is fresh while the whole program is followed, the stream is healthy, and
 * nothing was missed since the entry was fetched.
 */
describe('freshness while the chain is followed', () => {
  let gw: Gateway;
  let cache: SubdomainCache;
  let id: string;
  beforeAll(async () => {
    gw = await startGateway({ chain: seedDemo() });
    const { config } = gw;
    cache = new SubdomainCache(
      gw.redis,
      config.QUEUE_PREFIX,
      config.CACHE_FRESH_MS,
      config.CACHE_STALE_MS,
    );
    id = endpointId(gw.sim.url);
  });
  afterAll(() => gw.close());

  const prefix = () => gw.config.QUEUE_PREFIX;
  /** An entry of `parent` fetched `ago` ms before now (past the window), used then too. */
  const putOld = async (parent: string, fetchedAt: number) => {
    const entry = { labels: [], fetchedAt, slot: 5, scanSlot: 5, scannedAt: fetchedAt };
    expect(
      await cache.put(
        id,
        parent,
        ...withReverses(parent, entry, { [`${parent}Acc`]: ['kept', 'owner'] }),
        undefined,
        fetchedAt,
      ),
    ).toBe('written');
  };

  it('serves an entry older than the window as a hit while a healthy status with an older epoch holds, stale once the epoch passes its fetch', async () => {
    const now = Date.now();
    const old = now - 3 * gw.config.CACHE_FRESH_MS;
    await putOld('followed', old);
    await writeFollowStatus(gw.redis, prefix(), {
      epoch: old - 1_000,
      healthyUntil: now + 120_000,
      mode: 'program',
    });
    for (let i = 0; i < 5; i++) {
      const res = await gw.get('/subdomains/followed');
      expect(res.status).toBe(200);
      expect(res.body.result).toEqual(['kept']);
      expect(res.headers.get('x-cache')).toBe('HIT');
      // Current now, as far as any cache in between is concerned.
      expect(res.headers.get('age')).toBe('0');
    }
    const details = await gw.get('/subdomains/followed/details');
    expect(details.headers.get('x-cache')).toBe('HIT');
    // The use slid the entry's registry score (it was registered when it was fetched).
    const used = (await cache.followedParents(id)).find((p) => p.parent === 'followed');
    expect(used?.usedAt).toBeGreaterThanOrEqual(now);

    // A gap that could not be healed: the epoch moves past the entry's fetch.
    await writeFollowStatus(gw.redis, prefix(), {
      epoch: old + 1,
      healthyUntil: Date.now() + 120_000,
      mode: 'program',
    });
    let stale: Awaited<ReturnType<Gateway['get']>> | undefined;
    await waitFor(async () => {
      stale = await gw.get('/subdomains/followed');
      return stale.headers.get('x-cache') === 'STALE';
    });
    expect(stale?.body.result).toEqual(['kept']);
  });

  it('serves it stale once healthyUntil passes, or when only hot parents are followed', async () => {
    const now = Date.now();
    // Fetched after the epoch the first test left, and past the window.
    const fetchedAt = now - 2 * gw.config.CACHE_FRESH_MS;
    const status = await writeFollowStatus(gw.redis, prefix(), {
      epoch: 0,
      healthyUntil: now + 120_000,
      mode: 'program',
    });
    expect(status.epoch).toBeLessThan(fetchedAt);
    await putOld('lapsing', fetchedAt);
    await putOld('hotonly', fetchedAt);
    expect((await gw.get('/subdomains/lapsing')).headers.get('x-cache')).toBe('HIT');
    await writeFollowStatus(gw.redis, prefix(), { ...status, healthyUntil: Date.now() - 1 });
    await waitFor(
      async () => (await gw.get('/subdomains/lapsing')).headers.get('x-cache') === 'STALE',
    );
    await writeFollowStatus(gw.redis, prefix(), {
      ...status,
      healthyUntil: Date.now() + 120_000,
      mode: 'parents',
    });
    // Past the interval at which the API reads the status again (FollowStatusReader's).
    await elapse(600);
    const res = await gw.get('/subdomains/hotonly');
    expect(res.headers.get('x-cache')).toBe('STALE');
    expect(Number(res.headers.get('age'))).toBeGreaterThanOrEqual(
      2 * gw.config.CACHE_FRESH_SECONDS,
    );
  });
});
