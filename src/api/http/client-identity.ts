import type { FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';

/**
 * The client a request counts as (cold-miss limit, hot-parent ranking, stream bound), from
 * `req.ip` as `TRUST_PROXY` makes it. Never holds a space.
 */
export const clientKey = (req: FastifyRequest): string => clientKeyOf(req.ip);

/** Bounded: a miss only costs a parse. */
const ipv6Keys = new LRUCache<string, string>({ max: 10_000 });

/**
 * An address's client key: IPv4 as is; IPv6 by its /64, since one subscriber gets a whole /64
 * (RFC 6177) and would otherwise be 2^64 clients; IPv4-mapped as IPv4; unparsable as is.
 */
export function clientKeyOf(ip: string): string {
  if (!ip.includes(':')) return ip;
  let key = ipv6Keys.get(ip);
  if (key === undefined) {
    key = ipv6Key(ip);
    ipv6Keys.set(ip, key);
  }
  return key;
}

function ipv6Key(ip: string): string {
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
