import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { Config } from '../config.js';
import { InternalError, InvalidInputError } from '../errors.js';
import type { EndpointLabel } from '../metrics/metrics.js';

/**
 * A selected JSON-RPC endpoint. `id` names it in cache keys: a hash of the full URL, because a URL
 * may carry an API key that must never be stored or logged in clear (DESIGN.md, "The subdomain
 * cache").
 */
export type RpcEndpoint = {
  readonly kind: EndpointLabel;
  readonly url: string;
  readonly id: string;
};

/** The first 16 bytes of SHA-256 over the full URL, hex: stable across processes and restarts. */
export function endpointId(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 32);
}

const FORBIDDEN_HOST_SUFFIXES = ['.localhost', '.local', '.internal'];

/**
 * The `detail` of each `?rpc=` refusal: the rule broken, never the URL (it may hold an API key).
 */
const RPC_DETAIL = {
  disabled: 'rpc overrides are turned off on this gateway (RPC_OVERRIDE=off)',
  notUrl: 'rpc must be an absolute URL, e.g. https://rpc.example.com/',
  notListed: "rpc must be one of the origins on this gateway's RPC_OVERRIDE_ALLOWLIST",
  notHttps: 'rpc must be an https: URL',
  ipLiteral: 'rpc host must be a DNS name, not an IP address',
  localName:
    'rpc host must be a public DNS name (not localhost, a single label, .local, .localhost or .internal)',
  noAddress: 'rpc host must resolve (A or AAAA) within the DNS time-out',
  nonPublic:
    'rpc host must resolve only to public unicast addresses (not private, loopback, link-local or reserved)',
} as const;

/** Resolves a host name to every address it has; injectable so tests can stub DNS. */
export type HostResolver = (host: string) => Promise<string[]>;

const systemResolver: HostResolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * Applies DESIGN.md's `?rpc=` policy ("The `?rpc=` override (SSRF)") and selects the endpoint of
 * a request. The connect-time check (rebinding) happens again in the RPC transport.
 */
export class EndpointSelector {
  /** The configured `RPC_URL`, or undefined when unset. */
  readonly defaultEndpoint: RpcEndpoint | undefined;
  private readonly allowlist: ReadonlySet<string>;

  constructor(
    private readonly config: Pick<Config, 'RPC_URL' | 'RPC_OVERRIDE' | 'RPC_OVERRIDE_ALLOWLIST'>,
    private readonly resolveHost: HostResolver = systemResolver,
  ) {
    const url = config.RPC_URL;
    this.defaultEndpoint = url ? { kind: 'default', url, id: endpointId(url) } : undefined;
    this.allowlist = new Set(config.RPC_OVERRIDE_ALLOWLIST);
  }

  /** True when `url`'s origin was listed in `RPC_OVERRIDE_ALLOWLIST` (http and loopback allowed). */
  isAllowlisted(url: URL): boolean {
    return this.allowlist.has(url.origin);
  }

  /**
   * The configured `RPC_URL`, synchronously (a request without `?rpc=`).
   *
   * @throws InternalError when `RPC_URL` is unset (spec §7: 500).
   */
  selectDefault(): RpcEndpoint {
    if (!this.defaultEndpoint) throw new InternalError('RPC_URL is not configured');
    return this.defaultEndpoint;
  }

  /**
   * @param rpcParam the raw `?rpc=` value, or undefined when absent.
   * @returns the endpoint to use for this request.
   * @throws InvalidInputError when the override is refused by policy.
   * @throws InternalError when no override is given and `RPC_URL` is unset (spec §7: 500).
   */
  async select(rpcParam: string | undefined): Promise<RpcEndpoint> {
    if (rpcParam === undefined) return this.selectDefault();
    if (this.config.RPC_OVERRIDE === 'off')
      throw new InvalidInputError('rpc override disabled', { detail: RPC_DETAIL.disabled });
    let url: URL;
    try {
      url = new URL(rpcParam);
    } catch {
      throw new InvalidInputError('rpc is not a URL', { detail: RPC_DETAIL.notUrl });
    }
    if (this.allowlist.size > 0) {
      if (!this.isAllowlisted(url))
        throw new InvalidInputError('rpc origin not allowed', { detail: RPC_DETAIL.notListed });
    } else {
      await this.checkPublicHttps(url);
    }
    return { kind: 'override', url: url.href, id: endpointId(url.href) };
  }

  private async checkPublicHttps(url: URL): Promise<void> {
    if (url.protocol !== 'https:')
      throw new InvalidInputError('rpc must be https', { detail: RPC_DETAIL.notHttps });
    const host = url.hostname.toLowerCase();
    // An IPv6 literal keeps its brackets in `hostname`; ipaddr.isValid catches IPv4 in any form
    // the WHATWG parser normalised (e.g. `0x7f.1` became `127.0.0.1`).
    if (host.startsWith('[') || ipaddr.isValid(host)) {
      throw new InvalidInputError('rpc host must be a DNS name', { detail: RPC_DETAIL.ipLiteral });
    }
    const bare = host.endsWith('.') ? host.slice(0, -1) : host;
    if (
      !bare.includes('.') ||
      bare === 'localhost' ||
      FORBIDDEN_HOST_SUFFIXES.some((suffix) => bare.endsWith(suffix))
    ) {
      throw new InvalidInputError('rpc host not allowed', { detail: RPC_DETAIL.localName });
    }
    let addresses: string[];
    try {
      addresses = await this.resolveHost(bare);
    } catch {
      throw new InvalidInputError('rpc host does not resolve', { detail: RPC_DETAIL.noAddress });
    }
    if (addresses.length === 0 || !addresses.every(isPublicUnicast)) {
      throw new InvalidInputError('rpc host resolves to a non-public address', {
        detail: RPC_DETAIL.nonPublic,
      });
    }
  }
}

/**
 * True for a public unicast address. ipaddr.js classifies the special-purpose ranges (RFC 6890:
 * private, loopback, link-local and metadata, CGNAT, ...); IPv4-mapped IPv6 is checked as IPv4.
 */
export function isPublicUnicast(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}
