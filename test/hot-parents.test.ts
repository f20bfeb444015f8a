import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from './support/gateway.js';

describe('hot parents refreshed ahead of expiry', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      env: { CACHE_FRESH_SECONDS: '2', CACHE_STALE_SECONDS: '4', HOT_KEYS_TOP_N: '1' },
    });
  });
  afterAll(() => gw.close());

  it('keeps a key under steady traffic fresh for several windows while an unrequested one expires', async () => {
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('MISS'); // asked once, then never
    expect((await gw.get('/subdomains/demo')).headers.get('x-cache')).toBe('MISS');
    const states: string[] = [];
    const until = Date.now() + 7_000; // three and a half freshness windows, past the stale window
    while (Date.now() < until) {
      const res = await gw.get('/subdomains/demo');
      expect(res.status).toBe(200);
      states.push(res.headers.get('x-cache') ?? '?');
      await new Promise((r) => setTimeout(r, 150));
    }
    expect(states.length).toBeGreaterThan(30);
    expect(states.filter((s) => s !== 'HIT')).toEqual([]);
    // More than one refresh happened in the background, none of them waited for.
    expect(gw.sim.callCount('getProgramAccounts')).toBeGreaterThanOrEqual(4);
    // The key asked for once was not kept fresh: it expired with its stale window.
    expect((await gw.get('/subdomains/67679')).headers.get('x-cache')).toBe('MISS');
  });
});
