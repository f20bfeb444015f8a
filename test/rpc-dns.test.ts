import { lookup } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidInputError, OverloadedError } from '../src/core/errors.js';
import {
  dnsResolver,
  EndpointSelector,
  type HostCheckLimits,
  type HostResolver,
} from '../src/core/rpc/endpoint.js';
import { startDnsServer, type DnsServer } from './support/dns-server.js';
import { startGateway } from './support/gateway.js';
import { until, waitFor } from './support/wait.js';

const PUBLIC = '93.184.216.34';

const selector = (resolveHost: HostResolver, limits: Partial<HostCheckLimits> = {}) =>
  new EndpointSelector(
    { RPC_URL: undefined, RPC_OVERRIDE: 'on', RPC_OVERRIDE_ALLOWLIST: [] },
    resolveHost,
    limits,
  );

/** How long `promise` takes to settle, in milliseconds, and how. */
async function timed<T>(promise: Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const start = performance.now();
  try {
    const value = await promise;
    return { ms: performance.now() - start, value };
  } catch (error) {
    return { ms: performance.now() - start, error };
  }
}

describe('the ?rpc= host check resolves with c-ares, bounded', () => {
  let silent: DnsServer;
  let answering: DnsServer;
  beforeAll(async () => {
    silent = await startDnsServer('silent');
    answering = await startDnsServer({
      'rpc.example.com': PUBLIC,
      'private.example.com': '10.0.0.7',
    });
  });
  afterAll(async () => {
    await silent.close();
    await answering.close();
  });

  it('asks A and AAAA of the given servers, and accepts a name with IPv4 only', async () => {
    const resolve = dnsResolver({ servers: [answering.address] });
    expect(await resolve('rpc.example.com')).toEqual([PUBLIC]);
    expect(answering.queries).toEqual(
      expect.arrayContaining([
        { name: 'rpc.example.com', type: 'A' },
        { name: 'rpc.example.com', type: 'AAAA' },
      ]),
    );
    await expect(resolve('nowhere.example.com')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    const endpoint = await selector(resolve).select('https://rpc.example.com/');
    expect(endpoint.kind).toBe('override');
    await expect(selector(resolve).select('https://private.example.com/')).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });

  it('gives up on a server that never answers within its time-out', async () => {
    const resolve = dnsResolver({ servers: [silent.address], timeoutMs: 100, tries: 1 });
    const { ms, error } = await timed(resolve('hang.example.com'));
    expect(error).toMatchObject({ code: 'ETIMEOUT' });
    expect(ms).toBeLessThan(1_500);
    expect(silent.queries.some((q) => q.name === 'hang.example.com')).toBe(true);
  });

  it('keeps libuv threads and other overrides free while sixteen names never answer', async () => {
    // Default time-outs (about 4 s): the hostile names are still pending during the checks below.
    const hostile = dnsResolver({ servers: [silent.address] });
    const legit = dnsResolver({ servers: [answering.address] });
    const s = selector((host) => (host.endsWith('.hostile.example') ? hostile(host) : legit(host)));
    let ended = 0;
    const pending = Array.from({ length: 16 }, (_, i) =>
      timed(s.select(`https://n${i}.hostile.example/`)).finally(() => ended++),
    );
    // Every hostile name has reached the server that never answers: all sixteen are pending.
    await waitFor(
      () =>
        new Set(silent.queries.map((q) => q.name).filter((n) => n.endsWith('.hostile.example')))
          .size === 16,
      10_000,
      'the sixteen hostile names asked',
    );
    // getaddrinfo runs on libuv's pool: dns.lookup held all four threads, so this waited until
    // the hostile names timed out. Both are answered while all sixteen still wait.
    await new Promise((resolve) => lookup('localhost', resolve));
    const other = await timed(s.select('https://rpc.example.com/'));
    expect(other.error).toBeUndefined();
    expect(ended).toBe(0);
    for (const { ms, error } of await Promise.all(pending)) {
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).detail).toContain('within the DNS time-out');
      expect(ms).toBeLessThan(6_000);
    }
  }, 15_000);

  it('refuses past the bound of lookups in flight with 503, and ends each at its deadline', async () => {
    // A DNS slower than the deadline: its queries end (c-ares always ends one) only when the
    // test says, so the requests can only be answered by their deadline.
    const queries: Array<() => void> = [];
    const slow: HostResolver = () =>
      new Promise<string[]>((_resolve, reject) => {
        queries.push(() => reject(new Error('ETIMEOUT')));
      });
    const endQueries = () => {
      for (const end of queries.splice(0)) end();
    };
    const s = selector(slow, { maxInFlight: 4, deadlineMs: 300 });
    let ended = 0;
    const pending = Array.from({ length: 4 }, (_, i) =>
      timed(s.select(`https://h${i}.example.com/`)).finally(() => ended++),
    );
    const refused = await timed(s.select('https://h4.example.com/'));
    expect(refused.error).toBeInstanceOf(OverloadedError);
    expect((refused.error as OverloadedError).statusCode).toBe(503);
    expect((refused.error as OverloadedError).headers['retry-after']).toBe('1');
    // Refused at once: before the deadline ended any of the four in flight.
    expect(ended).toBe(0);
    for (const { ms, error } of await Promise.all(pending)) {
      expect(error).toBeInstanceOf(InvalidInputError);
      expect(ms).toBeGreaterThanOrEqual(250);
      // Far below the default deadline: this one was the 300 ms asked for.
      expect(ms).toBeLessThan(4_000);
    }
    // The requests have their answer, but the queries go on: their slots are still taken.
    expect(queries).toHaveLength(4);
    expect((await timed(s.select('https://h5.example.com/'))).error).toBeInstanceOf(
      OverloadedError,
    );
    // Once the queries have ended, the slots are free again.
    endQueries();
    const again = await until(async () => {
      const attempt = await timed(s.select('https://h6.example.com/'));
      return attempt.error instanceof OverloadedError ? undefined : attempt;
    }, 'a free lookup slot');
    expect(again.error).toBeInstanceOf(InvalidInputError);
    endQueries();
  });

  it('resolves a host once for concurrent and later requests, and charges only the first', async () => {
    const asked: string[] = [];
    let answer: () => void = () => undefined;
    const counting: HostResolver = async (host) => {
      asked.push(host);
      // The first lookup answers only when the test says: the other requests arrive meanwhile.
      if (host === 'rpc.example.com') await new Promise<void>((resolve) => (answer = resolve));
      if (host === 'gone.example.com') throw new Error('ENOTFOUND');
      return [PUBLIC];
    };
    const s = selector(counting, { cacheMs: 60_000 });
    let charges = 0;
    const charge = async () => {
      charges++;
    };
    // Requests arriving together share one resolution.
    const arriving = Promise.all(
      Array.from({ length: 10 }, () => s.select('https://rpc.example.com/', charge)),
    );
    await waitFor(() => asked.length === 1, 5_000, 'the lookup under way');
    answer();
    const together = await arriving;
    expect(together.every((e) => e.kind === 'override')).toBe(true);
    expect(asked).toEqual(['rpc.example.com']);
    // Later requests reuse it, and spend nothing of their client's limit.
    const spent = charges;
    for (let i = 0; i < 5; i++) await s.select('https://RPC.example.com./?another=path', charge);
    expect(asked).toEqual(['rpc.example.com']);
    expect(charges).toBe(spent);
    // A failure is kept too (a shorter while): a name that never resolves costs one lookup.
    for (let i = 0; i < 3; i++) {
      await expect(s.select('https://gone.example.com/', charge)).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    }
    expect(asked).toEqual(['rpc.example.com', 'gone.example.com']);
    expect(charges).toBe(spent + 1);
  });
});

describe('host lookups count under the per-client limit', () => {
  it('answers 429 once a client has resolved COLD_MISS_LIMIT new hosts in the window', async () => {
    const gw = await startGateway({
      worker: false,
      env: { COLD_MISS_LIMIT: '2' },
      // Every name resolves to a private address: each is refused, after its resolution.
      resolveHost: async () => ['10.0.0.1'],
    });
    try {
      const via = (host: string) =>
        gw.get(`/subdomains/67679?rpc=${encodeURIComponent(`https://${host}/`)}`);
      expect((await via('a.example.com')).status).toBe(400);
      expect((await via('b.example.com')).status).toBe(400);
      const limited = await via('c.example.com');
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // A host already resolved spends nothing: refused on policy, not limited.
      expect((await via('a.example.com')).status).toBe(400);
    } finally {
      await gw.close();
    }
  });
});
