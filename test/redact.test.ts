import { describe, expect, it } from 'vitest';
import { redactUrl } from '../src/redact.js';

describe('redactUrl', () => {
  it.each([
    ['/subdomains/x?rpc=https://k.example/?api-key=1', '/subdomains/x?rpc=[redacted]'],
    ['/subdomains/x?r%70c=https%3A%2F%2Fk.example', '/subdomains/x?rpc=[redacted]'],
    ['/subdomains/x?%72%70%63=a&b=1', '/subdomains/x?rpc=[redacted]&b=1'],
    ['/subdomains/x?a=1&rp%63&RPC=2', '/subdomains/x?a=1&rpc=[redacted]&rpc=[redacted]'],
    ['/subdomains/x?rpc', '/subdomains/x?rpc=[redacted]'],
    // The router also starts the query at a `#`.
    ['/subdomains/x#rpc=https://k.example/?api-key=1', '/subdomains/x#rpc=[redacted]'],
  ])('redacts every parameter the router reads as rpc: %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });

  it.each([
    '/subdomains/x',
    '/subdomains/x?rpcx=1&xrpc=2',
    '/subdomains/x?r%70c%ZZ=1',
    '/subdomains/x?rpc+=1',
    '/record-key-v2/rpc/SOL?x=rpc',
  ])('keeps %s, which holds no rpc parameter', (url) => {
    expect(redactUrl(url)).toBe(url);
  });
});
