import { createHash } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.js';
import { InvalidInputError, NotConfiguredError, OverloadedError } from '../errors.js';
import type { EndpointLabel } from '../metrics.js';

/** A JSON-RPC endpoint; `id` (a hash: the URL may hold an API key) names it in cache keys. */
export type RpcEndpoint = {
  readonly kind: EndpointLabel;
  readonly url: string;
  readonly id: string;
};

/** SHA-256 of the URL, first 16 bytes, hex. */
export function endpointId(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 32);
}

/**
 * A `?rpc=` endpoint; its id differs from the same URL's as `RPC_URL`, so override entries (own
 * budget and expiry) never replace or evict the configured endpoint's.
 */
export function overrideEndpoint(url: string): RpcEndpoint {
  return { kind: 'override', url, id: endpointId(`override ${url}`) };
}

const FORBIDDEN_HOST_SUFFIXES = ['.localhost', '.local', '.internal'];

/** `detail` of the 500 when `RPC_URL` is unset: tells the operator what to set. */
export const NO_RPC_URL_DETAIL =
  'this gateway has no RPC_URL: set RPC_URL to a Solana JSON-RPC endpoint (npm run rpc:sim serves a demo one at http://127.0.0.1:8899), or pass ?rpc=';

/** `detail` of each `?rpc=` refusal: the rule broken, never the URL (it may hold an API key). */
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

/** A host's addresses; injectable so tests can stub DNS. */
export type HostResolver = (host: string) => Promise<string[]>;

/** Options of {@link dnsResolver}. */
export type DnsResolverOptions = {
  /** `ip` or `ip:port`; default `/etc/resolv.conf`'s. */
  servers?: readonly string[];
  /** First try's time-out, ms; c-ares waits longer on each retry. */
  timeoutMs?: number;
  /** Tries per name server. */
  tries?: number;
};

// About 4 s in all for a server that never answers.
const DNS_TIMEOUT_MS = 1_000;
const DNS_TRIES = 2;

// No address in one family is fine when the other has some.
const NO_RECORDS = new Set(['ENODATA', 'ENOTFOUND']);

/**
 * A {@link HostResolver} on c-ares (A and AAAA with a time-out), not `dns.lookup`: getaddrinfo
 * has no time-out and runs on libuv's four threads, so silent DNS held every override for a
 * minute. `/etc/hosts` is not read: the policy sees public DNS.
 *
 * @returns both families' addresses; rejects when there are none or a query fails otherwise
 *   than "no such record" (no family goes unchecked).
 */
export function dnsResolver(opts: DnsResolverOptions = {}): HostResolver {
  const resolver = new Resolver({
    timeout: opts.timeoutMs ?? DNS_TIMEOUT_MS,
    tries: opts.tries ?? DNS_TRIES,
  });
  if (opts.servers) resolver.setServers([...opts.servers]);
  return async (host) => {
    const answers = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses: string[] = [];
    let firstError: unknown;
    for (const answer of answers) {
      if (answer.status === 'fulfilled') addresses.push(...answer.value);
      else if (!NO_RECORDS.has((answer.reason as NodeJS.ErrnoException).code ?? ''))
        throw answer.reason;
      else firstError ??= answer.reason;
    }
    if (addresses.length === 0) throw firstError;
    return addresses;
  };
}

/** Bounds of the `?rpc=` host check; tests shorten them. */
export type HostCheckLimits = {
  /** Lookups at once per process; past it 503. */
  maxInFlight: number;
  /** Ms until an unsettled lookup fails (400), whatever the resolver. */
  deadlineMs: number;
  /** Ms a resolution is reused (a failure: a fifth). */
  cacheMs: number;
  cacheSize: number;
};

/** The limits of `?rpc=` host lookups unless a caller gives others (tests do). */
export const DEFAULT_HOST_CHECK_LIMITS: HostCheckLimits = {
  maxInFlight: 64,
  deadlineMs: 5_000,
  cacheMs: 30_000,
  cacheSize: 1_000,
};

/** Run before a request starts a DNS lookup: charges the per-client limit (throws to refuse). */
export type BeforeLookup = () => Promise<void>;

/**
 * Selects a request's endpoint under the `?rpc=` policy (docs/design.md, "Replies from an RPC");
 * the transport rechecks at connect (rebinding). Resolutions are bounded, one per host, reused.
 */
export class EndpointSelector {
  /** `RPC_URL`'s endpoint, if set. */
  readonly defaultEndpoint: RpcEndpoint | undefined;
  private readonly allowlist: ReadonlySet<string>;
  private readonly resolveHost: HostResolver;
  private readonly limits: HostCheckLimits;
  private readonly resolutions: LRUCache<string, Promise<string[]>>;
  private inFlight = 0;

  /** @param resolveHost default {@link dnsResolver} on the system's servers. */
  constructor(
    private readonly config: Pick<Config, 'RPC_URL' | 'RPC_OVERRIDE' | 'RPC_OVERRIDE_ALLOWLIST'>,
    resolveHost?: HostResolver,
    limits: Partial<HostCheckLimits> = {},
  ) {
    const url = config.RPC_URL;
    this.defaultEndpoint = url ? { kind: 'default', url, id: endpointId(url) } : undefined;
    this.allowlist = new Set(config.RPC_OVERRIDE_ALLOWLIST);
    this.resolveHost = resolveHost ?? dnsResolver();
    this.limits = { ...DEFAULT_HOST_CHECK_LIMITS, ...limits };
    this.resolutions = new LRUCache({ max: this.limits.cacheSize, ttl: this.limits.cacheMs });
  }

  /** `url`'s origin is in `RPC_OVERRIDE_ALLOWLIST` (http and loopback then allowed). */
  isAllowlisted(url: URL): boolean {
    return this.allowlist.has(url.origin);
  }

  /**
   * `RPC_URL`'s endpoint.
   *
   * @throws NotConfiguredError (the contract's 500) when unset.
   */
  selectDefault(): RpcEndpoint {
    if (!this.defaultEndpoint) {
      throw new NotConfiguredError('RPC_URL is not configured', { detail: NO_RPC_URL_DETAIL });
    }
    return this.defaultEndpoint;
  }

  /**
   * @param rpcParam the raw `?rpc=` value, if any.
   * @throws InvalidInputError when policy refuses the override.
   * @throws OverloadedError (503) when `maxInFlight` resolutions are under way.
   * @throws NotConfiguredError without override and `RPC_URL`.
   * @throws whatever `beforeLookup` throws.
   */
  async select(rpcParam: string | undefined, beforeLookup?: BeforeLookup): Promise<RpcEndpoint> {
    if (rpcParam === undefined) return this.selectDefault();
    if (this.config.RPC_OVERRIDE === 'off') {
      throw new InvalidInputError('rpc override disabled', { detail: RPC_DETAIL.disabled });
    }
    let url: URL;
    try {
      url = new URL(rpcParam);
    } catch {
      throw new InvalidInputError('rpc is not a URL', { detail: RPC_DETAIL.notUrl });
    }
    if (this.allowlist.size > 0) {
      if (!this.isAllowlisted(url)) {
        throw new InvalidInputError('rpc origin not allowed', { detail: RPC_DETAIL.notListed });
      }
    } else {
      await this.checkPublicHttps(url, beforeLookup);
    }
    return overrideEndpoint(url.href);
  }

  private async checkPublicHttps(url: URL, beforeLookup: BeforeLookup | undefined): Promise<void> {
    if (url.protocol !== 'https:') {
      throw new InvalidInputError('rpc must be https', { detail: RPC_DETAIL.notHttps });
    }
    const host = url.hostname.toLowerCase();
    // IPv6 literals keep brackets; ipaddr.isValid catches IPv4 the parser normalised (`0x7f.1`).
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
      addresses = await (this.resolutions.get(bare) ?? this.startResolution(bare, beforeLookup));
    } catch (err) {
      if (!(err instanceof DnsFailure)) throw err;
      throw new InvalidInputError('rpc host does not resolve', { detail: RPC_DETAIL.noAddress });
    }
    if (addresses.length === 0 || !addresses.every(isPublicUnicast)) {
      throw new InvalidInputError('rpc host resolves to a non-public address', {
        detail: RPC_DETAIL.nonPublic,
      });
    }
  }

  private async startResolution(
    host: string,
    beforeLookup: BeforeLookup | undefined,
  ): Promise<string[]> {
    this.refuseWhenFull();
    await beforeLookup?.();
    // Another request may have started it, or filled the slots, meanwhile.
    const started = this.resolutions.get(host);
    if (started) return started;
    this.refuseWhenFull();
    this.inFlight++;
    const { deadlineMs, cacheMs } = this.limits;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${deadlineMs} ms`)), deadlineMs);
    });
    const query = (async () => this.resolveHost(host))();
    // The slot is held until the query ends, not the deadline: c-ares goes on past it.
    void query
      .catch(() => undefined)
      .finally(() => {
        this.inFlight--;
      });
    const resolution = Promise.race([query, deadline])
      .catch((err: unknown) => {
        // Kept briefly: a name whose DNS never answers costs one slot, not one per request.
        this.resolutions.set(host, resolution, { ttl: Math.max(1, Math.floor(cacheMs / 5)) });
        throw new DnsFailure(host, { cause: err });
      })
      .finally(() => clearTimeout(timer));
    // Later requests read settled failures; none may count as unhandled meanwhile.
    resolution.catch(() => undefined);
    this.resolutions.set(host, resolution);
    return resolution;
  }

  private refuseWhenFull(): void {
    if (this.inFlight >= this.limits.maxInFlight) {
      throw new OverloadedError('too many rpc host lookups in flight', 1, {
        detail: 'too many ?rpc= host lookups are under way on this gateway; retry shortly',
      });
    }
  }
}

/** A host-check resolution that failed or timed out (400). */
class DnsFailure extends Error {
  override readonly name = 'DnsFailure';
  constructor(host: string, options: ErrorOptions) {
    super(`${host} did not resolve`, options);
  }
}

/** A public unicast address per ipaddr.js's ranges (RFC 6890); IPv4-mapped IPv6 as IPv4. */
export function isPublicUnicast(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}
