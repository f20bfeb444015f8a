import type { LookupFunction } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostResolver } from '../src/core/rpc/endpoint.js';
import { startGateway, type Gateway } from './support/gateway.js';

/**
 * DNS rebinding staged with two stubs: the API's policy check sees a public address, the worker's
 * connection sees loopback (where the simulator listens). The filtering agent must refuse the
 * connection after resolution, so the simulator is never reached.
 */
const PUBLIC = '93.184.216.34';
const policyDns: HostResolver = async (host) => {
  if (host.endsWith('.example.com')) return [PUBLIC];
  throw new Error(`ENOTFOUND ${host}`);
};
const answerWith =
  (table: Record<string, string>): LookupFunction =>
  (hostname, options, callback) => {
    const address = table[hostname];
    const cb = callback as unknown as (
      err: Error | null,
      address: unknown,
      family?: number,
    ) => void;
    if (!address) return cb(new Error(`ENOTFOUND ${hostname}`), undefined);
    const family = address.includes(':') ? 6 : 4;
    if (typeof options === 'object' && options.all) return cb(null, [{ address, family }]);
    return cb(null, address, family);
  };

describe('?rpc= SSRF at connect time', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      env: { RPC_TIMEOUT_MS: '500', JOB_ATTEMPTS: '1' },
      resolveHost: policyDns,
      lookup: answerWith({
        'rebind.example.com': '127.0.0.1',
        'private.example.com': '10.0.0.1',
        'metadata.example.com': '169.254.169.254',
        'v6.example.com': '::1',
      }),
    });
  });
  afterAll(() => gw.close());

  it.each(['rebind', 'private', 'metadata', 'v6'])(
    'refuses %s.example.com when it resolves to a non-public address at connect time',
    async (name) => {
      const port = new URL(gw.sim.url).port;
      const url = `https://${name}.example.com:${port}/?api-key=SEKRET`;
      gw.sim.resetCalls();
      const res = await gw.get(`/subdomains/67679?rpc=${encodeURIComponent(url)}`);
      expect(res.status).toBe(502);
      expect(res.body).toEqual({ s: 'error', result: 'RPC unavailable' });
      expect(gw.sim.callCount()).toBe(0);
      // Refused by the filtering agent after resolution, not by some other failure.
      expect(gw.logs.join('')).toContain(`host:${name}.example.com) is not allowed`);
      expect(gw.logs.join('')).not.toContain('SEKRET');
    },
  );

  it('refuses a name whose policy-time resolution is already private, with 400', async () => {
    const res = await gw.get(
      `/subdomains/67679?rpc=${encodeURIComponent('https://nowhere.invalid/')}`,
    );
    expect(res).toMatchObject({ status: 400, body: { s: 'error', result: 'Invalid input' } });
  });
});
