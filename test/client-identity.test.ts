import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { clientIdentity, clientKeyOf } from '../src/api/http/plugins/client-identity.js';

/**
 * The client a request counts as (src/api/http/plugins/client-identity.ts): the rules of the key,
 * and the plugin that gives each request its key, on a Fastify app of its own.
 */
describe('clientKeyOf', () => {
  it('keys an IPv6 address by its /64, an IPv4-mapped one as IPv4, and keeps the rest', () => {
    expect(clientKeyOf('2001:db8:1:2::a')).toBe('2001:db8:1:2::/64');
    expect(clientKeyOf('2001:db8:1:2:ffff:1:2:3')).toBe('2001:db8:1:2::/64');
    expect(clientKeyOf('2001:db8:1:3::a')).toBe('2001:db8:1:3::/64');
    expect(clientKeyOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(clientKeyOf('192.0.2.1')).toBe('192.0.2.1');
    expect(clientKeyOf('not:an:address')).toBe('not:an:address');
  });
});

describe('clientIdentity', () => {
  /** An app whose one route answers the request's key, read twice, behind one trusted proxy. */
  const app = async () => {
    const server = Fastify({ trustProxy: true });
    await server.register(clientIdentity, { maxIpv6: 2 });
    server.get('/', async (req) => ({ first: req.client, again: req.client }));
    await server.ready();
    return server;
  };
  const keyOf = async (server: Awaited<ReturnType<typeof app>>, forwarded: string) =>
    (await server.inject({ url: '/', headers: { 'x-forwarded-for': forwarded } })).json<{
      first: string;
      again: string;
    }>();

  it("gives each request its client's key, from the address TRUST_PROXY makes", async () => {
    const server = await app();
    expect(await keyOf(server, '192.0.2.7')).toEqual({ first: '192.0.2.7', again: '192.0.2.7' });
    expect(await keyOf(server, '2001:db8:9:1::5')).toEqual({
      first: '2001:db8:9:1::/64',
      again: '2001:db8:9:1::/64',
    });
    expect(await keyOf(server, '::ffff:198.51.100.3')).toMatchObject({ first: '198.51.100.3' });
    expect(await keyOf(server, 'not:an:address')).toMatchObject({ first: 'not:an:address' });
    await server.close();
  });

  it('keys the same past its bounded memory of IPv6 addresses', async () => {
    const server = await app();
    for (let i = 1; i <= 5; i++) {
      expect((await keyOf(server, `2001:db8:a:${i}::1`)).first).toBe(`2001:db8:a:${i}::/64`);
    }
    expect((await keyOf(server, '2001:db8:a:1::2')).first).toBe('2001:db8:a:1::/64');
    await server.close();
  });

  it('keeps one memory per app: two apps key alike and apart', async () => {
    const [one, two] = await Promise.all([app(), app()]);
    expect((await keyOf(one, '2001:db8:b::1')).first).toBe('2001:db8:b::/64');
    expect((await keyOf(two, '2001:db8:b::1')).first).toBe('2001:db8:b::/64');
    await Promise.all([one.close(), two.close()]);
  });
});
