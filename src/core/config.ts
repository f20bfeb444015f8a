import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/** Turns an empty string into `undefined`, so `FOO=` in a .env file means "unset". */
const unsetIfEmpty = (value: unknown) => (value === '' ? undefined : value);

const int = (min: number, max: number, fallback: number) =>
  z.preprocess(unsetIfEmpty, z.coerce.number().int().min(min).max(max).default(fallback));

/** `true` or `false`, as the environment spells booleans. */
const bool = (fallback: boolean) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .enum(['true', 'false'])
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true'),
  );

const MiB = 1024 * 1024;

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
const wsUrl = z.url({ protocol: /^wss?$/, error: 'must be a ws(s) URL' });

/**
 * The websocket endpoint of an RPC URL, as @solana/web3.js's `Connection` derives it
 * (`makeWebsocketUrl`): http -> ws, https -> wss, an explicit port plus one (8899 -> 8900, the
 * validator's layout), path and query kept.
 */
export function deriveWebsocketUrl(rpcUrl: string): string {
  const ws = new URL(rpcUrl);
  ws.protocol = rpcUrl.startsWith('https:') ? 'wss:' : 'ws:';
  // The port as written: the URL parser drops a default one (`:80`), web3.js does not.
  const port = /^[a-z]+:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/?#]*):(\d+)/i.exec(rpcUrl)?.[1];
  if (port !== undefined) ws.port = String(Number(port) + 1);
  return ws.href;
}

/**
 * How a configuration message shows a value it refuses: as given, but never a credential (a
 * `user:password@` in it is blanked), since the message goes to the process's output.
 */
function shown(value: string): string {
  const at = value.lastIndexOf('@');
  if (at === -1) return value;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  return `${scheme}[redacted]${value.slice(at)}`;
}

/**
 * Parses `RPC_OVERRIDE_ALLOWLIST`: comma-separated origins (`scheme://host[:port]`). Each entry is
 * reduced to its WHATWG origin so `https://a.example/` and `https://a.example` compare equal.
 */
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
        // An origin has no credentials: an entry with some would be matched without them, and
        // the secret would sit in the configuration for nothing.
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

/** One seed of a Redis Cluster, as ioredis's `Cluster` takes it. */
export type ClusterSeed = Readonly<{ host: string; port: number }>;

/**
 * Parses `REDIS_CLUSTER_NODES`: comma-separated `host:port` seeds, an IPv6 address in brackets
 * (`[::1]:7000`). Unset stays `undefined` (a single Redis at `REDIS_URL`); otherwise a frozen,
 * non-empty list of seeds, the one form the rest of the code takes.
 */
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
 * The largest database a deployment may use: the follow lease's library
 * (@sesamecare-oss/redlock) selects 0 to 15 only, and falls back to 0 for any other, which would
 * put the leases outside the deployment's database. It is also the last one of Redis's default
 * `databases 16`.
 */
export const MAX_REDIS_DB = 15;

/**
 * The database `url` names, as ioredis reads it (its path `/N`, else its `db` query parameter,
 * else 0), or why it names none that the gateway can use.
 */
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

/** The names proxy-addr (Fastify's `trustProxy`) accepts for whole ranges. */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

const TRUST_PROXY_HELP =
  'set the number of proxies in front of the gateway (e.g. 1), or their addresses or CIDRs, comma-separated (e.g. 10.0.0.0/8,127.0.0.1); false (the default) when clients connect directly';

/**
 * Parses `TRUST_PROXY` into Fastify's `trustProxy` (Fastify docs, "Server: trustProxy"): `false`
 * (or `0`) trusts no proxy; a hop count `n` takes the client address `n` entries from the right of
 * `X-Forwarded-For`; a list of addresses, CIDRs or proxy-addr's range names (`loopback`,
 * `linklocal`, `uniquelocal`) trusts those proxies only. `true` is refused: it takes the left-most
 * entry, which the client writes itself, so any client could pick its own address (and escape the
 * per-client limit).
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
 * The environment schema. Names, defaults and meanings are listed in the README, "Configuration".
 * Every value is validated here once; the rest of the code receives the frozen result.
 */
/**
 * The one cost table of the RPC methods (`RPC_CREDITS` unset), as Helius bills: provider cost
 * units per JSON-RPC method, `*` for the rest; `wsConnection` per websocket opened, `wsMegabyte`
 * per 10^6 bytes it received. A new method with a cost of its own is one entry here.
 */
export const DEFAULT_RPC_CREDITS = 'getProgramAccounts=10,wsConnection=1,wsMegabyte=20,*=1';

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
    /** Follow the chain over the RPC's websocket (`programSubscribe`); off: refresh by the clock. */
    RPC_WS: z.preprocess(unsetIfEmpty, z.enum(['on', 'off']).default('on')),
    /** The websocket endpoint; unset: derived from `RPC_URL` (see `deriveWebsocketUrl`). */
    RPC_WS_URL: z.preprocess(unsetIfEmpty, wsUrl.optional()),
    /** Keep-alive ping interval on the websocket; a socket silent for two of them is dropped. */
    RPC_WS_PING_MS: int(100, 600_000, 10_000),
    /** How long the follow stream's lease lasts unrenewed: the takeover time. */
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
            const match = /^([A-Za-z*]+)=(\d+(?:\.\d+)?)$/.exec(item);
            if (!match) {
              ctx.addIssue({ code: 'custom', message: `"${item}" is not method=cost` });
              continue;
            }
            table[match[1] as string] = Number(match[2]);
          }
          return Object.freeze(table);
        }),
    ),
    /**
     * Provider credits (as `RPC_CREDITS` counts them) the configured endpoint may spend per UTC
     * day, over all replicas; unset: no budget (docs/design.md, "Budget").
     */
    RPC_CREDITS_PER_DAY: z.preprocess(
      unsetIfEmpty,
      z.coerce.number().positive().max(1e15).optional(),
    ),
    /** Largest reply body read from the configured RPC, in bytes. */
    RPC_MAX_RESPONSE_BYTES: int(1024, 2 ** 31 - 1, 64 * MiB),
    /** Longest decode of one reply from the configured RPC, in milliseconds. */
    RPC_DECODE_MS: int(100, 600_000, 60_000),
    // `?rpc=` overrides: anyone can point them at a server of their own, so they run in a lane
    // of their own (queue, worker slots, decode thread) with much smaller bounds.
    RPC_OVERRIDE_MAX_RESPONSE_BYTES: int(1024, 2 ** 31 - 1, 8 * MiB),
    RPC_OVERRIDE_DECODE_MS: int(100, 600_000, 2_000),
    RPC_OVERRIDE_CONCURRENCY: int(1, 1000, 2),
    RPC_OVERRIDE_MAX_PER_SECOND: int(1, 100_000, 2),
    RPC_OVERRIDE_MAX_LABEL_BYTES: int(1, 1_048_576, 256),
    RPC_OVERRIDE_MAX_ANSWER_BYTES: int(1024, 2 ** 31 - 1, 1 * MiB),
    /** How long an override's entry lives in Redis, in seconds (its stale window). */
    RPC_OVERRIDE_CACHE_SECONDS: int(1, 86_400, 300),
    /** Bytes of Redis all override entries together may take; the oldest go first. */
    RPC_OVERRIDE_CACHE_BYTES: int(1024, 2 ** 31 - 1, 32 * MiB),
    WORKER_CONCURRENCY: int(1, 1000, 4),
    /** BullMQ `lockDuration`: a job whose worker stops renewing its lock this long is stalled. */
    WORKER_LOCK_MS: int(100, 3_600_000, 30_000),
    /** BullMQ `stalledInterval`: how often a worker moves stalled jobs back to the wait list. */
    WORKER_STALLED_INTERVAL_MS: int(100, 3_600_000, 30_000),
    JOB_ATTEMPTS: int(1, 100, 5),
    JOB_BACKOFF_MS: int(0, 3_600_000, 2_000),
    /**
     * Prefix of every Redis key and channel of the gateway, not only the queue's: cache entries,
     * BullMQ's keys, hot-parent counts, leases, the cold-miss limit (src/core/redis-keys.ts). The name
     * is historical and kept so deployments keep working; a hash tag on Redis Cluster (below).
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
     * Distinct clients a parent needs in a window before it is refreshed ahead or followed on the
     * chain: that work is charged to no client, so one client alone must not get it. At most
     * HOT_PARENT_CLIENT_CAP (src/core/cache/hot-parents.ts): no parent counts more clients.
     */
    HOT_KEYS_MIN_CLIENTS: int(1, 16, 2),
    COLD_MISS_LIMIT: int(1, 1_000_000, 30),
    COLD_MISS_WINDOW_SECONDS: int(1, 86_400, 60),
    TRUST_PROXY: trustProxy,
    /** Event streams (`/subdomains/:parent/events`) one client address may hold open. */
    SSE_MAX_PER_CLIENT: int(1, 100_000, 8),
    /** Event streams one API process holds open. */
    SSE_MAX_STREAMS: int(1, 10_000_000, 10_000),
    WORKER_METRICS_PORT: int(0, 65535, 9101),
    LOCAL_CACHE_BYTES: int(0, 2 ** 31 - 1, 64 * 1024 * 1024),
    /** Bytes of rendered `/details` answers each API process keeps (src/api/subdomains/details-views.ts). */
    DETAILS_CACHE_BYTES: int(0, 2 ** 31 - 1, 64 * 1024 * 1024),
    DERIVATION_CACHE_SIZE: int(0, 10_000_000, 100_000),
    SHUTDOWN_TIMEOUT_MS: int(100, 600_000, 10_000),
    ADMIN_TOKEN: z.preprocess(
      unsetIfEmpty,
      z.string().min(16, 'must be at least 16 characters').optional(),
    ),
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
  // The database is half of a deployment's space in Redis (docs/design.md, "Redis isolation").
  .superRefine((c, ctx) => {
    // A URL that does not parse has its own issue already.
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
    // The seconds settings in the milliseconds the code counts in, converted here only. Derived,
    // not variables: the environment sets the `_SECONDS` forms.
    CACHE_FRESH_MS: c.CACHE_FRESH_SECONDS * 1000,
    CACHE_STALE_MS: c.CACHE_STALE_SECONDS * 1000,
    RPC_OVERRIDE_CACHE_MS: c.RPC_OVERRIDE_CACHE_SECONDS * 1000,
    COLD_MISS_WINDOW_MS: c.COLD_MISS_WINDOW_SECONDS * 1000,
    // One websocket endpoint for the rest of the code: the configured one, else RPC_URL's.
    RPC_WS_URL:
      c.RPC_WS === 'off'
        ? undefined
        : (c.RPC_WS_URL ?? (c.RPC_URL ? deriveWebsocketUrl(c.RPC_URL) : undefined)),
    // On Redis Cluster every key of the gateway must hash to one slot, as BullMQ's multi-key
    // scripts require: the prefix becomes a hash tag (`sns` -> `{sns}`, docs/design.md, "Shape").
    QUEUE_PREFIX:
      c.REDIS_CLUSTER_NODES && !/\{.+\}/.test(c.QUEUE_PREFIX)
        ? `{${c.QUEUE_PREFIX}}`
        : c.QUEUE_PREFIX,
  }));

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
