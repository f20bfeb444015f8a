import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';

/** Where a request keeps its client key once read. */
const CLIENT_KEY = Symbol('client key');

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The client this request counts as (cold-miss limit, hot-parent ranking, stream bound,
     * credit shares): {@link clientKeyOf} of `req.ip` as `TRUST_PROXY` makes it, read once.
     * Never holds a space. Given by {@link clientIdentity}.
     */
    readonly client: string;
    /** {@link FastifyRequest.client} once read; null before. */
    [CLIENT_KEY]: string | null;
  }
}

/** IPv6 addresses whose key an app keeps: bounded, and a miss only costs a parse. */
export const IPV6_KEYS_MAX = 10_000;

/**
 * An address's client key: IPv4 as is; IPv6 by its /64, since one subscriber gets a whole /64
 * (RFC 6177) and would otherwise be 2^64 clients; IPv4-mapped as IPv4; unparsable as is.
 */
export function clientKeyOf(ip: string): string {
  if (!ip.includes(':')) return ip;
  let parsed: ipaddr.IPv6;
  try {
    parsed = ipaddr.IPv6.parse(ip);
  } catch {
    return ip;
  }
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString();
  const prefix = new ipaddr.IPv6([...parsed.parts.slice(0, 4), 0, 0, 0, 0]);
  return `${prefix.toString()}/64`;
}

/**
 * Gives every request of the app its client key, `req.client` ({@link clientKeyOf} of `req.ip`),
 * computed on its first read and kept for the request; the keys of IPv6 addresses are kept in
 * this app's LRU of `maxIpv6` ({@link IPV6_KEYS_MAX} by default). fastify-plugin: applies
 * server-wide, so register it before the routes that read `req.client`.
 */
export const clientIdentity = fp(
  (app: FastifyInstance, opts: { maxIpv6?: number }, done: (err?: Error) => void) => {
    const ipv6Keys = new LRUCache<string, string>({ max: opts.maxIpv6 ?? IPV6_KEYS_MAX });
    const keyOf = (ip: string): string => {
      if (!ip.includes(':')) return ip;
      let key = ipv6Keys.get(ip);
      if (key === undefined) {
        key = clientKeyOf(ip);
        ipv6Keys.set(ip, key);
      }
      return key;
    };
    app.decorateRequest(CLIENT_KEY, null);
    app.decorateRequest('client', {
      getter(this: FastifyRequest): string {
        return (this[CLIENT_KEY] ??= keyOf(this.ip));
      },
    });
    done();
  },
  { name: 'client-identity' },
);
