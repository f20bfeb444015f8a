import { describe, expect, it } from 'vitest';
import { serializeError } from '../src/core/logger.js';
import { redactLine, redactUrl } from '../src/core/redact.js';

describe('redactUrl', () => {
  it.each([
    ['/subdomains/x?rpc=https://k.example/?api-key=1', '/subdomains/x?rpc=[redacted]'],
    ['/subdomains/x?r%70c=https%3A%2F%2Fk.example', '/subdomains/x?rpc=[redacted]'],
    ['/subdomains/x?%72%70%63=a&b=1', '/subdomains/x?rpc=[redacted]&b=1'],
    ['/subdomains/x?a=1&rp%63&RPC=2', '/subdomains/x?a=1&rpc=[redacted]&rpc=[redacted]'],
    ['/subdomains/x?rpc', '/subdomains/x?rpc=[redacted]'],
    // The router also starts the query at a `#`.
    ['/subdomains/x#rpc=https://k.example/?api-key=1', '/subdomains/x#rpc=[redacted]'],
    // Mistyped names the router does not read as rpc still carry the client's secret.
    ['/subdomains/x?rpc[]=https://k.example/?api-key=1', '/subdomains/x?rpc=[redacted]'],
    [
      '/subdomains/x?rpc.=a&;rpc=b&rpc+=c',
      '/subdomains/x?rpc=[redacted]&rpc=[redacted]&rpc=[redacted]',
    ],
  ])(
    'redacts every parameter the router reads as rpc, or a client meant as rpc: %s',
    (url, expected) => {
      expect(redactUrl(url)).toBe(expected);
    },
  );

  it.each([
    '/subdomains/x',
    '/subdomains/x?rpcx=1&xrpc=2',
    '/subdomains/x?r%70c%ZZ=1',
    '/record-key-v2/rpc/SOL?x=rpc',
  ])('keeps %s, which holds no rpc parameter', (url) => {
    expect(redactUrl(url)).toBe(url);
  });
});

describe('redactLine', () => {
  it.each([
    ['{"msg":"redis://u:p4ss@h:6379/0"}', '{"msg":"redis://[redacted]@h:6379/0"}'],
    // A password holding an `@` (or a JSON escape) is redacted up to the host.
    [
      '{"msg":"rediss://user:p@ss\\"w@h.example:6380"}',
      '{"msg":"rediss://[redacted]@h.example:6380"}',
    ],
    ['connect https://:tok@rpc.example/x then', 'connect https://[redacted]@rpc.example/x then'],
    [
      '{"url":"/subdomains/x?rpc=https://k.example/?api-key=1"}',
      '{"url":"/subdomains/x?rpc=[redacted]"}',
    ],
    [
      'Route GET:/nowhere?x=1&R%50C=abc not found',
      'Route GET:/nowhere?x=1&rpc=[redacted] not found',
    ],
  ])('redacts %s', (line, expected) => {
    expect(redactLine(line)).toBe(expected);
  });

  it.each([
    '{"msg":"requests without ?rpc=. To try"}',
    '{"a":"redis://h:6379","b":"x@y"}',
    '{"msg":"is it ready? yes","email":"a@b.example"}',
  ])('keeps %s, which holds no secret', (line) => {
    expect(redactLine(line)).toBe(line);
  });
});

describe('serializeError', () => {
  const authError = () =>
    Object.assign(new Error('WRONGPASS invalid username-password pair'), {
      command: { name: 'auth', args: ['user', 'hunter2'] },
    });

  it("keeps a Redis error's command name and drops its arguments, nested ones too", () => {
    const err = authError();
    const outer = Object.assign(new Error('queue failed', { cause: err }), {
      previousErrors: [authError()],
      detail: { command: { name: 'evalsha', args: ['sha', '1', '{"url":"https://k/?key=1"}'] } },
    });
    const text = JSON.stringify(serializeError(outer));
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('key=1');
    expect(text).toContain('"command":{"name":"auth","args":"[redacted]"}');
    expect(text).toContain('"command":{"name":"evalsha","args":"[redacted]"}');
    expect(text).toContain('WRONGPASS');
    // The error logged is left as it was.
    expect(err.command.args).toEqual(['user', 'hunter2']);
  });

  it('walks an err that is not an Error, and survives cycles', () => {
    const cyclic: Record<string, unknown> = { command: { name: 'auth', args: ['pw'] } };
    cyclic.self = cyclic;
    const text = JSON.stringify(serializeError({ inner: cyclic, list: [authError()] }));
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('"pw"');
    expect(serializeError('just text')).toBe('just text');
  });
});
