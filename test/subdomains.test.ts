import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishRefreshEvent } from '../src/core/queue/refresh-events.js';
import { endpointId, NO_RPC_URL_DETAIL, overrideEndpoint } from '../src/core/rpc/endpoint.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { startRpcSimulator, SimChain, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { sdkSubdomains } from './support/sdk.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { untilStale } from './support/freshness.js';

/** A chain with every shape of parent the SDK distinguishes. */
function richChain(): SimChain {
  const chain = seedDemo();
  chain.addDomain('lonely'); // a parent with no subdomains
  for (let i = 0; i < 1000; i++) chain.addSubdomain('big', `sub${i.toString().padStart(4, '0')}`);
  chain.addSubdomain('mixed', 'listed');
  chain.addSubdomain('mixed', 'noreverse', { reverse: false });
  chain.addOrphanReverse('mixed', 'orphan');
  chain.addSubdomain('mixed', 'ünïcödé-中文-🦀');
  chain.addSubdomain('mixed', 'a-label-much-longer-than-the-inline-slice-of-reverse-text-bytes');
  chain.addSubdomain('mixed', 'x'.repeat(200));
  return chain;
}

describe('GET /subdomains/:parent', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ chain: richChain() });
  });
  afterAll(() => gw.close());

  it('answers 67679 with the mainnet truth', async () => {
    const res = await gw.get('/subdomains/67679');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ s: 'ok', result: ['bullish', 'hollaaa', 'testing'] });
  });

  it.each(['67679', 'demo', 'lonely', 'never-registered', 'big', 'mixed'])(
    'equals the SDK findSubdomains on the same chain for %s',
    async (parent) => {
      const expected = await sdkSubdomains(gw.sim.url, parent);
      const res = await gw.get(`/subdomains/${encodeURIComponent(parent)}`);
      expect(res.status).toBe(200);
      expect(res.body.result).toEqual(expected);
    },
  );

  it('lists 1000 subdomains, skips those without reverse records and orphan reverses', async () => {
    const big = (await gw.get('/subdomains/big')).body.result as string[];
    expect(big).toHaveLength(1000);
    const mixed = (await gw.get('/subdomains/mixed')).body.result as string[];
    expect(mixed).toContain('listed');
    expect(mixed).toContain('ünïcödé-中文-🦀');
    expect(mixed).toContain('x'.repeat(200));
    expect(mixed).not.toContain('noreverse');
    expect(mixed).not.toContain('orphan');
    expect((await gw.get('/subdomains/lonely')).body.result).toEqual([]);
  });

  it('normalizes the parent (trim, lower-case) onto the same cache entry', async () => {
    await gw.get('/subdomains/demo');
    const expected = await sdkSubdomains(gw.sim.url, 'demo');
    gw.sim.resetCalls();
    const res = await gw.get('/subdomains/%20DeMo%20');
    expect(res.body.result).toEqual(expected);
    expect(res.headers.get('x-cache')).toBe('HIT');
    expect(gw.sim.callCount()).toBe(0);
  });

  it('serves warm hits without any RPC call', async () => {
    await gw.get('/subdomains/67679');
    gw.sim.resetCalls();
    for (let i = 0; i < 20; i++) {
      const res = await gw.get('/subdomains/67679');
      expect(res.headers.get('x-cache')).toBe('HIT');
    }
    expect(gw.sim.callCount()).toBe(0);
  });

  it('makes one refresh, with one getProgramAccounts call, for 100 concurrent cold requests', async () => {
    gw.sim.chain.addSubdomain('burst', 'one');
    gw.sim.resetCalls();
    const replies = await Promise.all(
      Array.from({ length: 100 }, () => gw.get('/subdomains/burst')),
    );
    for (const r of replies) expect(r.body).toEqual({ s: 'ok', result: ['one'] });
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
    expect(gw.sim.callCount()).toBe(1);
  });

  it('sends Cache-Control, Age and X-Cache so HTTP caches keep it for the freshness left', async () => {
    const res = await gw.get('/subdomains/67679');
    expect(res.headers.get('cache-control')).toBe(
      'public, max-age=60, stale-while-revalidate=86340, stale-if-error=86340',
    );
    expect(Number(res.headers.get('age'))).toBeGreaterThanOrEqual(0);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('sends a strong ETag and answers 304 to If-None-Match', async () => {
    const first = await fetch(`${gw.baseUrl}/subdomains/67679`);
    const tag = first.headers.get('etag');
    expect(tag).toMatch(/^"[^"]+"$/);
    expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const again = await fetch(`${gw.baseUrl}/subdomains/67679`, {
      headers: { 'if-none-match': tag! },
    });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    // Another answer has another validator.
    const other = await fetch(`${gw.baseUrl}/subdomains/demo`, {
      headers: { 'if-none-match': tag! },
    });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).not.toBe(tag);
  });

  it('keeps fresh entries in process: warm hits skip Redis, and a refresh anywhere replaces them', async () => {
    const expected = (await gw.get('/subdomains/67679')).body.result;
    const key = redisKeys(gw.config.QUEUE_PREFIX).entryMeta(endpointId(gw.sim.url), '67679');
    // Gone from Redis behind the API's back (no refresh event): a Redis read would now miss.
    await gw.redis.del(key);
    for (let i = 0; i < 20; i++) {
      const res = await gw.get('/subdomains/67679');
      expect(res.headers.get('x-cache')).toBe('HIT');
      expect(res.body.result).toEqual(expected);
    }
    // A worker's refresh event (any worker, in any process) drops the copy.
    gw.sim.chain.addSubdomain('67679', 'fresh-label');
    await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
      endpointId: endpointId(gw.sim.url),
      parent: '67679',
      ok: true,
    });
    await waitFor(
      async () => (await gw.get('/subdomains/67679')).headers.get('x-cache') === 'MISS',
    );
    expect((await gw.get('/subdomains/67679')).body.result).toContain('fresh-label');
  });

  const PARENT_RULE = 'parent must be one label without the registry suffix';
  it.each([
    ['an empty parent', '/subdomains/%20', `${PARENT_RULE} (got " ")`],
    ['two labels', '/subdomains/sub.parent', `${PARENT_RULE} (got "sub.parent")`],
    ['the registry suffix', '/subdomains/bonfida.sol', `${PARENT_RULE} (got "bonfida.sol")`],
    ['an empty label', '/subdomains/.parent', `${PARENT_RULE} (got ".parent")`],
    [
      'an empty rpc',
      '/subdomains/demo?rpc=',
      'querystring/rpc must NOT have fewer than 1 characters: rpc must be given once, as a non-empty absolute URL',
    ],
    [
      'a non-URL rpc',
      '/subdomains/demo?rpc=not%20a%20url',
      'rpc must be an absolute URL, e.g. https://rpc.example.com/',
    ],
    ['an http rpc', '/subdomains/demo?rpc=http://rpc.example.com/', 'rpc must be an https: URL'],
    [
      'a loopback rpc',
      '/subdomains/demo?rpc=https://127.0.0.1:8899/',
      'rpc host must be a DNS name, not an IP address',
    ],
    [
      'an IPv6 rpc',
      '/subdomains/demo?rpc=https://[::1]/',
      'rpc host must be a DNS name, not an IP address',
    ],
    ...['localhost', 'metadata.google.internal', 'intranet'].map((host) => [
      `the rpc host ${host}`,
      `/subdomains/demo?rpc=https://${host}/`,
      'rpc host must be a public DNS name (not localhost, a single label, .local, .localhost or .internal)',
    ]),
    [
      'two rpc values',
      '/subdomains/demo?rpc=https://a.example.com&rpc=https://b.example.com',
      'querystring/rpc must be string: rpc must be given once, as a non-empty absolute URL',
    ],
  ])('answers 400 Invalid input for %s, saying which rule', async (_why, path, detail) => {
    const res = await gw.get(path);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ s: 'error', result: 'Invalid input', detail });
  });

  it('answers oversize URLs with the envelope, not a bare status line', async () => {
    const res = await gw.get(`/subdomains/${'a'.repeat(20_000)}`);
    expect(res.status).toBe(431);
    expect(res.body).toEqual({
      s: 'error',
      result: 'Request Header Fields Too Large',
      detail: 'the URL or the headers are over the 16 KiB limit',
    });
  });
});

describe('stale-while-revalidate and stale-if-error', () => {
  let gw: Gateway;
  beforeAll(async () => {
    // Hot-parent refresh off: it exists to keep entries like these from ever going stale.
    gw = await startGateway({
      env: { CACHE_FRESH_SECONDS: '1', JOB_ATTEMPTS: '1', HOT_KEYS_TOP_N: '0' },
    });
  });
  afterAll(() => gw.close());

  it('serves a stale entry at once and refreshes it once in the background', async () => {
    expect((await gw.get('/subdomains/demo')).headers.get('x-cache')).toBe('MISS');
    const first = (await gw.get('/subdomains/demo')).body.result;
    gw.sim.chain.addSubdomain('demo', 'delta');
    await untilStale(gw, 'demo');
    gw.sim.resetCalls();
    // The refresh takes a while, so every request of the burst finds the entry still stale.
    gw.sim.setFaults([{ kind: 'delay', ms: 400, times: 1 }]);
    const stale = await Promise.all(Array.from({ length: 10 }, () => gw.get('/subdomains/demo')));
    for (const r of stale) {
      expect(r.headers.get('x-cache')).toBe('STALE');
      expect(r.body.result).toEqual(first);
    }
    await waitFor(async () => (await gw.get('/subdomains/demo')).headers.get('x-cache') === 'HIT');
    expect((await gw.get('/subdomains/demo')).body.result).toContain('delta');
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
  });

  it('keeps serving the stale entry when its refresh fails', async () => {
    const before = (await gw.get('/subdomains/67679')).body.result;
    await untilStale(gw, '67679');
    gw.sim.setFaults([{ kind: 'rpc-error', code: -32602, message: 'boom' }]);
    gw.sim.resetCalls();
    const stale = await gw.get('/subdomains/67679');
    expect(stale.headers.get('x-cache')).toBe('STALE');
    expect(stale.body.result).toEqual(before);
    await waitFor(() => gw.sim.callCount('getProgramAccounts') >= 1);
    await waitFor(async () =>
      (await gw.metrics.refreshJobs.get()).values.some((v) => v.labels.outcome === 'failed'),
    );
    const after = await gw.get('/subdomains/67679');
    expect(after.status).toBe(200);
    expect(after.headers.get('x-cache')).toBe('STALE');
    expect(after.body.result).toEqual(before);
    gw.sim.setFaults([]);
  });
});

describe('RPC failures on a cold miss', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      env: { RPC_TIMEOUT_MS: '300', JOB_ATTEMPTS: '2', JOB_BACKOFF_MS: '100' },
    });
  });
  afterAll(() => gw.close());

  it.each([
    ['a JSON-RPC error', { kind: 'rpc-error', code: -32602 }],
    ['HTTP 429 after retries', { kind: 'http', status: 429, retryAfterSeconds: 0 }],
    ['HTTP 503 after retries', { kind: 'http', status: 503 }],
    ['a garbage body', { kind: 'garbage' }],
    ['a time-out', { kind: 'hang' }],
    ['a reset connection', { kind: 'reset' }],
  ] as const)('answers 502 RPC unavailable for %s', async (_why, fault) => {
    const parent = `cold-${fault.kind}-${'status' in fault ? fault.status : ''}`;
    gw.sim.chain.addSubdomain(parent, 'later');
    gw.sim.setFaults([{ ...fault }]);
    const started = Date.now();
    const res = await gw.get(`/subdomains/${parent}`);
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ s: 'error', result: 'RPC unavailable' });
    expect(Date.now() - started).toBeLessThan(5_000);
    gw.sim.setFaults([]);
    // The job's next attempt fills the cache for the next request.
    await waitFor(async () => (await gw.get(`/subdomains/${parent}`)).status === 200);
    expect((await gw.get(`/subdomains/${parent}`)).body.result).toEqual(['later']);
  });

  it('answers 502 when the refresh outlasts SUBDOMAINS_WAIT_MS, and the refresh still fills the cache', async () => {
    const slow = await startGateway({ env: { SUBDOMAINS_WAIT_MS: '200', RPC_TIMEOUT_MS: '5000' } });
    try {
      slow.sim.setFaults([{ kind: 'delay', ms: 800 }]);
      const res = await slow.get('/subdomains/67679');
      expect(res).toMatchObject({ status: 502, body: { s: 'error', result: 'RPC unavailable' } });
      await waitFor(async () => (await slow.get('/subdomains/67679')).status === 200);
      expect((await slow.get('/subdomains/67679')).headers.get('x-cache')).toBe('HIT');
    } finally {
      await slow.close();
    }
  });
});

describe('configuration edges', () => {
  it('answers 500 Internal error naming RPC_URL when no RPC endpoint is configured', async () => {
    const gw = await startGateway({ env: { RPC_URL: '' } });
    try {
      for (const path of [
        '/subdomains/67679',
        '/subdomains/67679/details',
        '/subdomains/67679/events',
      ]) {
        expect(await gw.get(path), path).toMatchObject({
          status: 500,
          body: { s: 'error', result: 'Internal error', detail: NO_RPC_URL_DETAIL },
        });
      }
      expect(NO_RPC_URL_DETAIL).toMatch(/^this gateway has no RPC_URL: set RPC_URL to /);
    } finally {
      await gw.close();
    }
  });

  it('refuses every override when RPC_OVERRIDE=off', async () => {
    const gw = await startGateway({ env: { RPC_OVERRIDE: 'off' } });
    try {
      const res = await gw.get(
        `/subdomains/67679?rpc=${encodeURIComponent('https://rpc.example.com/')}`,
      );
      expect(res).toMatchObject({ status: 400, body: { s: 'error', result: 'Invalid input' } });
    } finally {
      await gw.close();
    }
  });
});

describe('?rpc= override', () => {
  let other: RpcSimulator;
  let gw: Gateway;
  beforeAll(async () => {
    const chain = new SimChain();
    chain.addSubdomain('67679', 'elsewhere');
    other = await startRpcSimulator({ chain });
    gw = await startGateway({ env: { RPC_OVERRIDE_ALLOWLIST: other.url } });
  });
  afterAll(async () => {
    await gw.close();
    await other.close();
  });

  it('uses the other endpoint and never mixes its entries with the default one', async () => {
    const viaDefault = await gw.get('/subdomains/67679');
    expect(viaDefault.body.result).toEqual(['bullish', 'hollaaa', 'testing']);
    const url = `${other.url}/?api-key=sekret`;
    const viaOverride = await gw.get(`/subdomains/67679?rpc=${encodeURIComponent(url)}`);
    expect(viaOverride.status).toBe(200);
    expect(viaOverride.headers.get('x-cache')).toBe('MISS');
    expect(viaOverride.headers.get('cache-control')).toBe('no-store');
    expect(viaOverride.body.result).toEqual(['elsewhere']);
    expect(other.callCount('getProgramAccounts')).toBe(1);
    // The default endpoint's entry is untouched, and the override's is its own.
    expect((await gw.get('/subdomains/67679')).body.result).toEqual([
      'bullish',
      'hollaaa',
      'testing',
    ]);
    expect((await gw.get(`/subdomains/67679?rpc=${encodeURIComponent(url)}`)).body.result).toEqual([
      'elsewhere',
    ]);
    // Two entries, each under its endpoint's id (a hash: the URL and its key stay out of Redis).
    // Computed, not listed: a listing of a shared Redis is slow, and a SCAN page can miss them.
    const keys = redisKeys(gw.config.QUEUE_PREFIX);
    const entries = [
      keys.entryMeta(endpointId(gw.config.RPC_URL ?? ''), '67679'),
      keys.subdomainEntry(overrideEndpoint(new URL(url).href).id, '67679'),
    ];
    expect(await gw.redis.exists(...entries)).toBe(2);
    for (const key of entries) expect(key).not.toContain('sekret');
    // The key never reaches a log line.
    expect(gw.logs.join('')).not.toContain('sekret');
  });

  it('refuses an origin that is not on the allowlist, even a public https one', async () => {
    const res = await gw.get(
      `/subdomains/67679?rpc=${encodeURIComponent('https://api.mainnet-beta.solana.com/')}`,
    );
    expect(res).toMatchObject({ status: 400, body: { s: 'error', result: 'Invalid input' } });
  });
});
