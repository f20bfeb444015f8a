import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/** `FOO=` in a .env file means unset. */
const unsetIfEmpty = (value: unknown) => (value === '' ? undefined : value);

const int = (min: number, max: number, fallback: number) =>
  z.preprocess(unsetIfEmpty, z.coerce.number().int().min(min).max(max).default(fallback));

const bool = (fallback: boolean) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .enum(['true', 'false'])
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true'),
  );

/** A share of the day's credit budget: above 0, at most 1. */
const share = (fallback: number) =>
  z.preprocess(unsetIfEmpty, z.coerce.number().gt(0).max(1).default(fallback));

const MiB = 1024 * 1024;

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
const wsUrl = z.url({ protocol: /^wss?$/, error: 'must be a ws(s) URL' });

/**
 * The websocket URL of an RPC URL, as web3.js's `makeWebsocketUrl` derives it: http -> ws,
 * https -> wss, an explicit port plus one (8899 -> 8900).
 */
function deriveWebsocketUrl(rpcUrl: string): string {
  const ws = new URL(rpcUrl);
  ws.protocol = rpcUrl.startsWith('https:') ? 'wss:' : 'ws:';
  // The port as written: the URL parser drops a default one (`:80`), web3.js does not.
  const port = /^[a-z]+:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/?#]*):(\d+)/i.exec(rpcUrl)?.[1];
  if (port !== undefined) ws.port = String(Number(port) + 1);
  return ws.href;
}

/** A refused value as a message shows it: `user:password@` blanked (messages reach the output). */
function shown(value: string): string {
  const at = value.lastIndexOf('@');
  if (at === -1) return value;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  return `${scheme}[redacted]${value.slice(at)}`;
}

/** `RPC_OVERRIDE_ALLOWLIST`: comma-separated origins, each reduced to its WHATWG origin. */
const originList = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .default('')
    .transform((raw, ctx) => {
      const origins: string[] = [];
      for (const item of raw.split(',').map((s) => s.trim())) {
        if (item === '') continue;
        let origin: string;
        try {
          origin = new URL(item).origin;
        } catch {
          origin = 'null';
        }
        if (origin === 'null' || !/^https?:/.test(origin)) {
          ctx.addIssue({ code: 'custom', message: `"${shown(item)}" is not an http(s) origin` });
          continue;
        }
        // A credential in an origin would never match and would sit in config for nothing.
        const url = new URL(item);
        if (url.username !== '' || url.password !== '') {
          ctx.addIssue({
            code: 'custom',
            message: `"${shown(item)}" carries credentials: list origins only (scheme://host[:port])`,
          });
          continue;
        }
        origins.push(origin);
      }
      return Object.freeze(origins);
    }),
);

/** One Redis Cluster seed, as ioredis's `Cluster` takes it. */
export type ClusterSeed = Readonly<{ host: string; port: number }>;

/** `REDIS_CLUSTER_NODES`: comma-separated `host:port` (IPv6 bracketed); unset: single Redis. */
const clusterNodes = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .optional()
    .transform((raw, ctx): readonly ClusterSeed[] | undefined => {
      if (raw === undefined) return undefined;
      const seeds: ClusterSeed[] = [];
      for (const entry of raw.split(',').map((s) => s.trim())) {
        const match = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(entry);
        if (!match) {
          ctx.addIssue({
            code: 'custom',
            message: `"${shown(entry)}" is not host:port (host:port[,host:port...]; credentials go in REDIS_URL)`,
          });
          continue;
        }
        const host = (match[1] as string).replace(/^\[|\]$/g, '');
        seeds.push(Object.freeze({ host, port: Number(match[2]) }));
      }
      return Object.freeze(seeds);
    }),
);

/**
 * Largest usable database: the lease library (@sesamecare-oss/redlock) selects 0..15 only and
 * silently falls back to 0 otherwise.
 */
const MAX_REDIS_DB = 15;

/** `url`'s database as ioredis reads it (path `/N`, else `?db=`, else 0), or why unusable. */
export function redisUrlDatabase(url: string): number | string {
  const parsed = new URL(url);
  const path = parsed.pathname === '/' ? '' : parsed.pathname;
  const raw = path !== '' ? path.slice(1) : (parsed.searchParams.get('db') ?? '0');
  if (!/^\d{1,9}$/.test(raw)) return `"${raw}" is not a database number (redis://host:port/N)`;
  const db = Number(raw);
  if (db > MAX_REDIS_DB) {
    return `database ${db}: 0 to ${MAX_REDIS_DB} only (the follow lease's library selects no other)`;
  }
  return db;
}

/** proxy-addr's range names (Fastify `trustProxy`). */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

const TRUST_PROXY_HELP =
  'set the number of proxies in front of the gateway (e.g. 1), or their addresses or CIDRs, comma-separated (e.g. 10.0.0.0/8,127.0.0.1); false (the default) when clients connect directly';

/**
 * `TRUST_PROXY` as Fastify's `trustProxy`: false/0, a hop count, or addresses/CIDRs/range names.
 * `true` is refused: it trusts the left-most X-Forwarded-For, which the client writes, so any
 * client could escape the per-client limit.
 */
const trustProxy = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .default('false')
    .transform((raw, ctx): false | number | readonly string[] => {
      const value = raw.trim();
      if (value === 'false' || value === '0') return false;
      if (value === 'true') {
        ctx.addIssue({
          code: 'custom',
          message: `true would trust the left-most X-Forwarded-For, which the client writes: ${TRUST_PROXY_HELP}`,
        });
        return z.NEVER;
      }
      if (/^\d+$/.test(value)) {
        const hops = Number(value);
        if (hops <= 100) return hops;
        ctx.addIssue({ code: 'custom', message: `${value} hops: ${TRUST_PROXY_HELP}` });
        return z.NEVER;
      }
      const entries = value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const entry of entries) {
        if (PROXY_RANGE_NAMES.has(entry) || ipaddr.isValid(entry) || ipaddr.isValidCIDR(entry)) {
          continue;
        }
        ctx.addIssue({
          code: 'custom',
          message: `"${entry}" is not an address, a CIDR or a hop count: ${TRUST_PROXY_HELP}`,
        });
      }
      return Object.freeze(entries);
    }),
);

/**
 * Cost table of RPC methods (`RPC_CREDITS` unset) in Helius credits; `*` for the rest,
 * `wsConnection` per socket opened, `wsMegabyte` per 10^6 bytes received. Helius bills a
 * `getProgramAccountsV2` page as it bills a `getProgramAccounts`.
 */
export const DEFAULT_RPC_CREDITS =
  'getProgramAccounts=10,getProgramAccountsV2=10,wsConnection=1,wsMegabyte=20,*=1';

/** The environment schema (names and meanings: docs/configuration.md); validated once, frozen. */
export const configSchema = z
  .object({
    ROLE: z.preprocess(unsetIfEmpty, z.enum(['api', 'worker', 'all']).default('all')),
    PORT: int(0, 65535, 3000),
    HOST: z.preprocess(unsetIfEmpty, z.string().default('0.0.0.0')),
    REDIS_URL: z.preprocess(
      unsetIfEmpty,
      z
        .url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' })
        .default('redis://127.0.0.1:6379'),
    ),
    REDIS_CLUSTER_NODES: clusterNodes,
    RPC_URL: z.preprocess(unsetIfEmpty, httpUrl.optional()),
    RPC_OVERRIDE: z.preprocess(unsetIfEmpty, z.enum(['on', 'off']).default('on')),
    /**
     * `registry`: every parent answered from an index of the whole name program, once built and
     * followed; `parents`: each parent scanned at first sight (docs/design.md, "The registry index").
     */
    SUBDOMAIN_INDEX: z.preprocess(
      unsetIfEmpty,
      z.enum(['registry', 'parents']).default('registry'),
    ),
    /** `programSubscribe` over the websocket; off: refresh by the clock. */
    RPC_WS: z.preprocess(unsetIfEmpty, z.enum(['on', 'off']).default('on')),
    RPC_WS_URL: z.preprocess(unsetIfEmpty, wsUrl.optional()),
    /** A socket silent for two pings is dropped. */
    RPC_WS_PING_MS: int(100, 600_000, 10_000),
    /** Unrenewed lease lifetime: the takeover time. */
    WATCH_LEASE_MS: int(500, 600_000, 5_000),
    RPC_OVERRIDE_ALLOWLIST: originList,
    CACHE_FRESH_SECONDS: int(1, 365 * 86400, 60),
    CACHE_STALE_SECONDS: int(1, 365 * 86400, 86400),
    SUBDOMAINS_WAIT_MS: int(1, 600_000, 15_000),
    RPC_TIMEOUT_MS: int(1, 600_000, 10_000),
    RPC_RETRIES: int(0, 10, 3),
    RPC_MAX_PER_SECOND: int(1, 100_000, 5),
    RPC_CREDITS: z.preprocess(
      unsetIfEmpty,
      z
        .string()
        .default(DEFAULT_RPC_CREDITS)
        .transform((raw, ctx) => {
          const table: Record<string, number> = {};
          for (const item of raw
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)) {
            // A JSON-RPC method name (letters, then digits too: getProgramAccountsV2) or `*`.
            const match = /^([A-Za-z][A-Za-z0-9]*|\*)=(\d+(?:\.\d+)?)$/.exec(item);
            if (!match) {
              ctx.addIssue({ code: 'custom', message: `"${item}" is not method=cost` });
              continue;
            }
            table[match[1] as string] = Number(match[2]);
          }
          return Object.freeze(table);
        }),
    ),
    /** Credits per UTC day over all replicas; unset: no budget. */
    RPC_CREDITS_PER_DAY: z.preprocess(
      unsetIfEmpty,
      z.coerce.number().positive().max(1e15).optional(),
    ),
    /** Most of the day's budget one client (IPv4 address, IPv6 /64) may spend. */
    RPC_CREDITS_CLIENT_SHARE: share(0.02),
    /** Most of the day's budget the /64s of one IPv6 /48 may spend together. */
    RPC_CREDITS_NETWORK_SHARE: share(0.05),
    /** The share of the day's budget for work no request asks for (refresh ahead, following). */
    RPC_CREDITS_PROACTIVE_SHARE: share(0.3),
    /** The share kept for cold misses of parents known to exist, once clients spent the rest. */
    RPC_CREDITS_RESERVE_SHARE: share(0.2),
    RPC_MAX_RESPONSE_BYTES: int(1024, 2 ** 31 - 1, 64 * MiB),
    RPC_DECODE_MS: int(100, 600_000, 60_000),
    // `?rpc=` servers may be anyone's, so overrides run in a lane of their own with smaller bounds.
    RPC_OVERRIDE_MAX_RESPONSE_BYTES: int(1024, 2 ** 31 - 1, 8 * MiB),
    RPC_OVERRIDE_DECODE_MS: int(100, 600_000, 2_000),
    RPC_OVERRIDE_CONCURRENCY: int(1, 1000, 2),
    RPC_OVERRIDE_MAX_PER_SECOND: int(1, 100_000, 2),
    RPC_OVERRIDE_MAX_LABEL_BYTES: int(1, 1_048_576, 256),
    RPC_OVERRIDE_MAX_ANSWER_BYTES: int(1024, 2 ** 31 - 1, 1 * MiB),
    /** Seconds (the override's stale window). */
    RPC_OVERRIDE_CACHE_SECONDS: int(1, 86_400, 300),
    /** Oldest override entries go first past this. */
    RPC_OVERRIDE_CACHE_BYTES: int(1024, 2 ** 31 - 1, 32 * MiB),
    WORKER_CONCURRENCY: int(1, 1000, 4),
    /** BullMQ `lockDuration`. */
    WORKER_LOCK_MS: int(100, 3_600_000, 30_000),
    /** BullMQ `stalledInterval`. */
    WORKER_STALLED_INTERVAL_MS: int(100, 3_600_000, 30_000),
    JOB_ATTEMPTS: int(1, 100, 5),
    JOB_BACKOFF_MS: int(0, 3_600_000, 2_000),
    /**
     * Prefix of every Redis key and channel, not only the queue's; the name is historical, kept for
     * deployments.
     */
    QUEUE_PREFIX: z.preprocess(
      unsetIfEmpty,
      z
        .string()
        .regex(/^[^\s:]+$/, 'must be non-empty with no spaces or colons')
        .default('sns'),
    ),
    QUEUE_MAX_WAITING: int(1, 10_000_000, 1000),
    HOT_KEYS_TOP_N: int(0, 100_000, 100),
    HOT_KEYS_MAX_TRACKED: int(1, 10_000_000, 10_000),
    /**
     * Distinct clients a parent needs before unbilled work (refresh ahead, follow) is done for
     * it; at most HOT_PARENT_CLIENT_CAP.
     */
    HOT_KEYS_MIN_CLIENTS: int(1, 16, 2),
    COLD_MISS_LIMIT: int(1, 1_000_000, 30),
    COLD_MISS_WINDOW_SECONDS: int(1, 86_400, 60),
    TRUST_PROXY: trustProxy,
    /** Per client address. */
    SSE_MAX_PER_CLIENT: int(1, 100_000, 8),
    /** Per API process. */
    SSE_MAX_STREAMS: int(1, 10_000_000, 10_000),
    WORKER_METRICS_PORT: int(0, 65535, 9101),
    /** The API's `/metrics` (never on `PORT`, the public one); with `ROLE=all` the worker's port serves them. */
    API_METRICS_PORT: int(0, 65535, 9100),
    LOCAL_CACHE_BYTES: int(0, 2 ** 31 - 1, 64 * 1024 * 1024),
    /** Rendered `/details` answers per API process. */
    DETAILS_CACHE_BYTES: int(0, 2 ** 31 - 1, 64 * 1024 * 1024),
    DERIVATION_CACHE_SIZE: int(0, 10_000_000, 100_000),
    SHUTDOWN_TIMEOUT_MS: int(100, 600_000, 10_000),
    ADMIN_TOKEN: z.preprocess(
      unsetIfEmpty,
      z.string().min(16, 'must be at least 16 characters').optional(),
    ),
    /** The queue UI may pause, retry, clean and add jobs; read-only unless `true`. */
    ADMIN_QUEUES_WRITE: bool(false),
    ACCESS_LOG: bool(false),
    LOG_LEVEL: z.preprocess(
      unsetIfEmpty,
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    ),
  })
  .refine((c) => c.CACHE_STALE_SECONDS >= c.CACHE_FRESH_SECONDS, {
    path: ['CACHE_STALE_SECONDS'],
    message: 'must be at least CACHE_FRESH_SECONDS',
  })
  // The client pool is what the proactive share and the reserve leave (docs/design.md, "Budget").
  .refine((c) => c.RPC_CREDITS_PROACTIVE_SHARE + c.RPC_CREDITS_RESERVE_SHARE < 1, {
    path: ['RPC_CREDITS_RESERVE_SHARE'],
    message: 'RPC_CREDITS_PROACTIVE_SHARE + RPC_CREDITS_RESERVE_SHARE must stay under 1',
  })
  // Why: docs/design.md, "Redis isolation".
  .superRefine((c, ctx) => {
    // A URL that does not parse has its own issue.
    if (!URL.canParse(c.REDIS_URL)) return;
    const db = redisUrlDatabase(c.REDIS_URL);
    if (typeof db === 'string') {
      ctx.addIssue({ code: 'custom', path: ['REDIS_URL'], message: db });
    } else if (db !== 0 && c.REDIS_CLUSTER_NODES) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_URL'],
        message: `database ${db}: a Redis Cluster has database 0 only (share it by QUEUE_PREFIX)`,
      });
    }
  })
  .transform((c) => ({
    ...c,
    // The code counts milliseconds; the environment sets seconds.
    CACHE_FRESH_MS: c.CACHE_FRESH_SECONDS * 1000,
    CACHE_STALE_MS: c.CACHE_STALE_SECONDS * 1000,
    RPC_OVERRIDE_CACHE_MS: c.RPC_OVERRIDE_CACHE_SECONDS * 1000,
    COLD_MISS_WINDOW_MS: c.COLD_MISS_WINDOW_SECONDS * 1000,
    RPC_WS_URL:
      c.RPC_WS === 'off'
        ? undefined
        : (c.RPC_WS_URL ?? (c.RPC_URL ? deriveWebsocketUrl(c.RPC_URL) : undefined)),
    // BullMQ's multi-key scripts need one slot on a Cluster: the prefix becomes a hash tag.
    QUEUE_PREFIX:
      c.REDIS_CLUSTER_NODES && !/\{.+\}/.test(c.QUEUE_PREFIX)
        ? `{${c.QUEUE_PREFIX}}`
        : c.QUEUE_PREFIX,
  }));

/** The validated, frozen configuration. */
export type Config = Readonly<z.infer<typeof configSchema>>;

/** Thrown by {@link loadConfig}; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Parses the environment into the frozen {@link Config}.
 *
 * @param env a map of variable names to values, usually `process.env`; unknown names are ignored.
 * @throws ConfigError naming each variable that fails validation (`PORT: must be <= 65535`).
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  return Object.freeze(parsed.data);
}
