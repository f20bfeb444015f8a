import { createHash } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.js';
import { InvalidInputError, NotConfiguredError, OverloadedError } from '../errors.js';
import type { EndpointLabel } from '../metrics.js';

/**
 * A selected JSON-RPC endpoint. `id` names it in cache keys: a hash of the full URL, because a URL
 * may carry an API key that must never be stored or logged in clear (docs/design.md, "The
 * subdomain cache").
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

/**
 * The endpoint of a `?rpc=` URL. Its id hashes the class with the URL, so an override naming the
 * very URL of `RPC_URL` still gets entries of its own: they live under the override budget and
 * expiry, and must never replace or evict the configured endpoint's.
 */
export function overrideEndpoint(url: string): RpcEndpoint {
  return { kind: 'override', url, id: endpointId(`override ${url}`) };
}

const FORBIDDEN_HOST_SUFFIXES = ['.localhost', '.local', '.internal'];

/**
 * The `detail` of the 500 a request without `?rpc=` gets when `RPC_URL` is unset: the answer is the
 * contract's `Internal error`, but whoever runs the gateway sees from it what to set.
 */
export const NO_RPC_URL_DETAIL =
  'this gateway has no RPC_URL: set RPC_URL to a Solana JSON-RPC endpoint (npm run rpc:sim serves a demo one at http://127.0.0.1:8899), or pass ?rpc=';

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

/** Options of {@link dnsResolver}. */
export type DnsResolverOptions = {
  /** Name servers (`ip` or `ip:port`); the system's (`/etc/resolv.conf`) when absent. */
  servers?: readonly string[];
  /** Time-out of a query's first try, in milliseconds; c-ares waits longer on each retry. */
  timeoutMs?: number;
  /** Tries per name server before giving up. */
  tries?: number;
};

// About 4 s in all for a server that never answers (two tries, the second waited longer).
const DNS_TIMEOUT_MS = 1_000;
const DNS_TRIES = 2;

// A family with no address: not a failure when the other family has some.
const NO_RECORDS = new Set(['ENODATA', 'ENOTFOUND']);

/**
 * A {@link HostResolver} on c-ares (`dns.promises.Resolver`, Node docs, "DNS: Implementation
 * considerations"): A and AAAA queries sent from the event loop with a time-out, not
 * `dns.lookup`'s getaddrinfo, which runs on libuv's four-thread pool with no time-out of its own,
 * so names whose DNS never answers held every thread (and every other override) for a minute.
 * `/etc/hosts` is not read: the policy sees what public DNS says.
 *
 * @returns the A and AAAA addresses; rejects (ETIMEOUT, ENOTFOUND, ...) when the name has none,
 *   or when either query fails other than "no such record", so no family goes unchecked.
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

/** Bounds of the `?rpc=` host check (see {@link EndpointSelector}); tests shorten them. */
export type HostCheckLimits = {
  /** Lookups under way at once in this process; past it an override is refused (503). */
  maxInFlight: number;
  /** A lookup not settled by then fails (refused 400), in milliseconds, whatever the resolver. */
  deadlineMs: number;
  /** How long a resolution is reused, in milliseconds (a failure: a fifth of it). */
  cacheMs: number;
  /** Hosts whose resolution is kept. */
  cacheSize: number;
};

const DEFAULT_LIMITS: HostCheckLimits = {
  maxInFlight: 64,
  deadlineMs: 5_000,
  cacheMs: 30_000,
  cacheSize: 1_000,
};

/**
 * Called before a request makes a DNS resolution (not when it reuses one): the route charges the
 * client's per-client limit there, and throws to refuse.
 */
export type BeforeLookup = () => Promise<void>;

/**
 * Applies the `?rpc=` policy (docs/design.md, "Replies from an RPC") and selects the endpoint of a
 * request; the transport checks again at connect time (rebinding). Host resolutions are bounded
 * in number (`maxInFlight`, past it 503), in time (`deadlineMs`), one per host at a time, and
 * reused for `cacheMs`; a request needing a new resolution runs {@link BeforeLookup} first.
 */
export class EndpointSelector {
  /** The configured `RPC_URL`, or undefined when unset. */
  readonly defaultEndpoint: RpcEndpoint | undefined;
  private readonly allowlist: ReadonlySet<string>;
  private readonly resolveHost: HostResolver;
  private readonly limits: HostCheckLimits;
  /** Resolutions settled or under way, by host. */
  private readonly resolutions: LRUCache<string, Promise<string[]>>;
  private inFlight = 0;

  /**
   * @param resolveHost DNS for the host check; {@link dnsResolver} with the system's servers when
   *   absent.
   */
  constructor(
    private readonly config: Pick<Config, 'RPC_URL' | 'RPC_OVERRIDE' | 'RPC_OVERRIDE_ALLOWLIST'>,
    resolveHost?: HostResolver,
    limits: Partial<HostCheckLimits> = {},
  ) {
    const url = config.RPC_URL;
    this.defaultEndpoint = url ? { kind: 'default', url, id: endpointId(url) } : undefined;
    this.allowlist = new Set(config.RPC_OVERRIDE_ALLOWLIST);
    this.resolveHost = resolveHost ?? dnsResolver();
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.resolutions = new LRUCache({ max: this.limits.cacheSize, ttl: this.limits.cacheMs });
  }

  /** True when `url`'s origin was listed in `RPC_OVERRIDE_ALLOWLIST` (http and loopback allowed). */
  isAllowlisted(url: URL): boolean {
    return this.allowlist.has(url.origin);
  }

  /**
   * The configured `RPC_URL`, synchronously (a request without `?rpc=`).
   *
   * @throws NotConfiguredError (500) when `RPC_URL` is unset (the contract's 500; docs/design.md,
   *   "Endpoints and the error contract").
   */
  selectDefault(): RpcEndpoint {
    if (!this.defaultEndpoint) {
      throw new NotConfiguredError('RPC_URL is not configured', { detail: NO_RPC_URL_DETAIL });
    }
    return this.defaultEndpoint;
  }

  /**
   * @param rpcParam the raw `?rpc=` value, or undefined when absent.
   * @param beforeLookup run before this request starts a DNS resolution of the override's host.
   * @returns the endpoint to use for this request.
   * @throws InvalidInputError when the override is refused by policy.
   * @throws OverloadedError (503) when `maxInFlight` resolutions are under way.
   * @throws NotConfiguredError when no override is given and `RPC_URL` is unset (the contract's 500).
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

  /** Starts a bounded resolution of `host` and keeps it for the requests that follow. */
  private async startResolution(
    host: string,
    beforeLookup: BeforeLookup | undefined,
  ): Promise<string[]> {
    this.refuseWhenFull();
    await beforeLookup?.();
    // Another request may have started the same resolution, or filled the slots, meanwhile.
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
    // The slot is held until the query itself ends, not until the deadline: c-ares goes on past
    // it (its time-out and tries apply to each name server in turn), and the bound is on queries.
    void query
      .catch(() => undefined)
      .finally(() => {
        this.inFlight--;
      });
    const resolution = Promise.race([query, deadline])
      .catch((err: unknown) => {
        // Failures are kept a short while: a name whose DNS never answers costs one slot, not one
        // per request.
        this.resolutions.set(host, resolution, { ttl: Math.max(1, Math.floor(cacheMs / 5)) });
        throw new DnsFailure(host, { cause: err });
      })
      .finally(() => clearTimeout(timer));
    // Settled failures are read by later requests; none may count as unhandled meanwhile.
    resolution.catch(() => undefined);
    this.resolutions.set(host, resolution);
    return resolution;
  }

  /** @throws OverloadedError when `maxInFlight` resolutions are under way. */
  private refuseWhenFull(): void {
    if (this.inFlight >= this.limits.maxInFlight) {
      throw new OverloadedError('too many rpc host lookups in flight', 1, {
        detail: 'too many ?rpc= host lookups are under way on this gateway; retry shortly',
      });
    }
  }
}

/** A resolution of the host check that failed or timed out (refused as input, 400). */
class DnsFailure extends Error {
  override readonly name = 'DnsFailure';
  constructor(host: string, options: ErrorOptions) {
    super(`${host} did not resolve`, options);
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
