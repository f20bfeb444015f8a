import { describe, expect, it } from 'vitest';
import { InternalError, InvalidInputError } from '../src/core/errors.js';
import { EndpointSelector, isPublicUnicast, type HostResolver } from '../src/core/rpc/endpoint.js';

/** A DNS stub: names map to fixed addresses, anything else fails to resolve. */
const stubDns =
  (table: Record<string, string[]>): HostResolver =>
  async (host) => {
    const found = table[host];
    if (!found) throw new Error(`ENOTFOUND ${host}`);
    return found;
  };

const dns = stubDns({
  'rpc.example.com': ['93.184.216.34'],
  'dual.example.com': ['93.184.216.34', '2606:2800:220:1::1'],
  'private.example.com': ['10.0.0.7'],
  'loopback.example.com': ['127.0.0.1'],
  'metadata.example.com': ['169.254.169.254'],
  'mixed.example.com': ['93.184.216.34', '192.168.1.1'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
  'v6-local.example.com': ['fd00::1'],
});

const selector = (
  env: Partial<{
    RPC_URL: string;
    RPC_OVERRIDE: 'on' | 'off';
    RPC_OVERRIDE_ALLOWLIST: string[];
  }> = {},
) =>
  new EndpointSelector(
    {
      RPC_URL: env.RPC_URL,
      RPC_OVERRIDE: env.RPC_OVERRIDE ?? 'on',
      RPC_OVERRIDE_ALLOWLIST: env.RPC_OVERRIDE_ALLOWLIST ?? [],
    },
    dns,
  );

describe('EndpointSelector', () => {
  it('selects the default endpoint, identified by a hash, never the URL', async () => {
    const endpoint = await selector({ RPC_URL: 'https://rpc.example.com/?api-key=abc' }).select(
      undefined,
    );
    expect(endpoint.kind).toBe('default');
    expect(endpoint.id).toMatch(/^[0-9a-f]{32}$/);
    expect(endpoint.id).not.toContain('abc');
  });

  it('throws InternalError (500) when no endpoint is configured', async () => {
    await expect(selector().select(undefined)).rejects.toBeInstanceOf(InternalError);
  });

  it.each([
    'https://rpc.example.com/',
    'https://dual.example.com/?api-key=1',
    'https://RPC.example.com.:443/x',
  ])('accepts the public https override %s', async (url) => {
    const endpoint = await selector().select(url);
    expect(endpoint.kind).toBe('override');
  });

  it.each([
    'http://rpc.example.com/',
    'https://private.example.com/',
    'https://loopback.example.com/',
    'https://metadata.example.com/',
    'https://mixed.example.com/',
    'https://mapped.example.com/',
    'https://v6-local.example.com/',
    'https://unknown.example.com/',
    'https://93.184.216.34/',
    'https://0x7f000001/',
    'https://[2606:2800:220:1::1]/',
    'https://localhost/',
    'https://foo.localhost/',
    'https://printer.local/',
    'https://metadata.google.internal/',
    'https://intranet/',
    'file:///etc/passwd',
    'not a url',
  ])('refuses %s with InvalidInputError (400)', async (url) => {
    await expect(selector().select(url)).rejects.toBeInstanceOf(InvalidInputError);
  });

  it.each([
    ['https://private.example.com/', 'rpc host must resolve only to public unicast addresses'],
    ['https://unknown.example.com/', 'rpc host must resolve (A or AAAA) within the DNS time-out'],
    ['https://printer.local/?api-key=SEKRET', 'rpc host must be a public DNS name'],
    ['ftp://rpc.example.com/', 'rpc must be an https: URL'],
  ])('says which rule refused %s, without repeating the URL', async (url, rule) => {
    const err = (await selector()
      .select(url)
      .catch((e: unknown) => e)) as InvalidInputError;
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err.detail).toContain(rule);
    expect(err.detail).not.toContain('example');
    expect(err.detail).not.toContain('SEKRET');
  });

  it('says when overrides are off or the origin is not on the allowlist', async () => {
    const off = selector({ RPC_OVERRIDE: 'off' }).select('https://rpc.example.com/');
    await expect(off).rejects.toMatchObject({
      detail: expect.stringContaining('RPC_OVERRIDE=off') as unknown,
    });
    const listed = selector({ RPC_OVERRIDE_ALLOWLIST: ['http://127.0.0.1:8899'] });
    await expect(listed.select('https://rpc.example.com/')).rejects.toMatchObject({
      detail: expect.stringContaining('RPC_OVERRIDE_ALLOWLIST') as unknown,
    });
  });

  it('accepts only allowlisted origins when an allowlist is set, http and loopback included', async () => {
    const s = selector({ RPC_OVERRIDE_ALLOWLIST: ['http://127.0.0.1:8899'] });
    expect((await s.select('http://127.0.0.1:8899/?k=1')).kind).toBe('override');
    await expect(s.select('https://rpc.example.com/')).rejects.toBeInstanceOf(InvalidInputError);
    await expect(s.select('http://127.0.0.1:8900/')).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('gives an override naming the very RPC_URL cache entries of its own', async () => {
    const url = 'http://127.0.0.1:8899/';
    const s = selector({ RPC_URL: url, RPC_OVERRIDE_ALLOWLIST: ['http://127.0.0.1:8899'] });
    const override = await s.select(url);
    expect(override).toMatchObject({ kind: 'override', url });
    expect(override.id).not.toBe(s.selectDefault().id);
  });

  it('refuses every override when RPC_OVERRIDE=off', async () => {
    await expect(
      selector({ RPC_OVERRIDE: 'off' }).select('https://rpc.example.com/'),
    ).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('separates endpoints by their full URL', async () => {
    const s = selector();
    const a = await s.select('https://rpc.example.com/?api-key=1');
    const b = await s.select('https://rpc.example.com/?api-key=2');
    expect(a.id).not.toBe(b.id);
  });
});

describe('isPublicUnicast', () => {
  it.each([
    ['8.8.8.8', true],
    ['2001:4860:4860::8888', true],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['192.168.0.1', false],
    ['127.0.0.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['::1', false],
    ['fe80::1', false],
    ['::ffff:10.0.0.1', false],
    ['garbage', false],
  ])('%s -> %s', (address, expected) => {
    expect(isPublicUnicast(address)).toBe(expected);
  });
});
