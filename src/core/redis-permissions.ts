import type { Logger } from 'pino';
import type { Config } from './config.js';
import { refreshChannel } from './queue/refresh-events.js';
import {
  closeRedis,
  createRedis,
  databaseOf,
  waitReady,
  type RedisAccess,
  type RedisClient,
  type RedisErrorLog,
} from './redis.js';
import { loadLua } from './lua-script.js';
import { redisKeys } from './redis-keys.js';

/**
 * Redis commands the gateway needs, by sender (docs/operations.md, "Redis permissions"); calls inside Lua
 * scripts count. BullMQ's list is what its scripts call (test/redis-permissions.test.ts).
 */
export const REDIS_NEEDS: readonly { by: string; commands: readonly string[] }[] = [
  {
    by: 'the gateway: cache, follow stream, hot-parent counts, credit counter, readiness probe, refresh events',
    commands: [
      ...['get', 'mget', 'set', 'del', 'exists', 'incr', 'incrby', 'decrby', 'incrbyfloat'],
      'pexpire',
      ...['pttl', 'hget', 'hmget', 'hset', 'hdel', 'hkeys', 'hgetall', 'hscan', 'hincrbyfloat'],
      ...['sadd', 'scard', 'sismember', 'zadd', 'zrem', 'zincrby', 'zscore', 'zcard', 'zrange'],
      ...['zrevrange', 'zrangebyscore', 'zremrangebyrank', 'evalsha', 'eval', 'publish'],
      ...['subscribe', 'unsubscribe', 'exists', 'pttl', 'hkeys', 'hgetall', 'time', 'multi'],
      'exec',
    ],
  },
  {
    by: 'BullMQ: queues and workers (most run inside its Lua scripts)',
    commands: [
      ...['evalsha', 'eval', 'bzpopmin', 'multi', 'exec', 'time', 'type', 'exists', 'get', 'set'],
      ...['del', 'unlink', 'rename', 'incr', 'incrby', 'pexpire', 'pexpireat', 'pttl', 'persist'],
      ...['hget', 'hset', 'hmset', 'hmget', 'hgetall', 'hdel', 'hexists', 'hincrby', 'hlen'],
      ...['hscan', 'lpush', 'rpush', 'lpop', 'rpop', 'rpoplpush', 'lrange', 'llen', 'lindex'],
      ...['lpos', 'lrem', 'lset', 'ltrim', 'sadd', 'srem', 'scard', 'smembers', 'sismember'],
      ...['sscan', 'zadd', 'zrem', 'zscore', 'zcard', 'zcount', 'zlexcount', 'zrange'],
      ...['zrevrange', 'zrangebyscore', 'zrevrangebyscore', 'zrangebylex', 'zremrangebyscore'],
      ...['zremrangebyrank', 'zpopmin', 'xadd', 'xtrim', 'xlen', 'xrange', 'xread', 'xdel'],
    ],
  },
  {
    by: '@fastify/rate-limit: the per-client cold-miss limit (a Lua script)',
    commands: ['evalsha', 'eval', 'incr', 'pexpire', 'pttl'],
  },
  {
    by: 'redlock: the lease of the follow stream (Lua scripts)',
    // Its scripts SELECT the connection's database first (a refusal is ignored, harmless in 0).
    commands: ['evalsha', 'eval', 'exists', 'get', 'set', 'del', 'select'],
  },
  {
    by: 'ioredis: every connection, when REDIS_URL names a database other than 0',
    // Checked only then (see neededCommands), redlock's too.
    commands: ['select'],
  },
];

/**
 * Used when allowed: `INFO` (BullMQ's version check; ioredis's loading wait), `CLIENT SETNAME`,
 * `COMMAND INFO` (categories in the start-up message).
 */
export const REDIS_OPTIONAL: readonly { command: string; for: string }[] = [
  { command: 'info', for: "BullMQ's version check and ioredis's ready check" },
  { command: 'client|setname', for: 'connection names in CLIENT LIST' },
  { command: 'command|info', for: 'the ACL categories in the start-up error message' },
];

/**
 * Arguments each command is checked with, `{k}` a key under the prefix, `{c}` the event channel
 * (Redis checks key and channel patterns too); absent: one key.
 */
const CHECK_ARGS: Readonly<Record<string, string>> = {
  mget: '{k} {k}',
  set: '{k} 1 PX 1000',
  incrby: '{k} 1',
  decrby: '{k} 1',
  incrbyfloat: '{k} 1',
  pexpire: '{k} 1000',
  pexpireat: '{k} 1',
  rename: '{k} {k}',
  hget: '{k} f',
  hset: '{k} f 1',
  hmset: '{k} f 1',
  hmget: '{k} f',
  hdel: '{k} f',
  hexists: '{k} f',
  hkeys: '{k}',
  hincrby: '{k} f 1',
  hincrbyfloat: '{k} f 1',
  hscan: '{k} 0',
  sscan: '{k} 0',
  lpush: '{k} 1',
  rpush: '{k} 1',
  rpoplpush: '{k} {k}',
  lrange: '{k} 0 1',
  lindex: '{k} 0',
  lpos: '{k} 1',
  lrem: '{k} 0 1',
  lset: '{k} 0 1',
  ltrim: '{k} 0 1',
  sadd: '{k} m',
  srem: '{k} m',
  sismember: '{k} m',
  zadd: '{k} 1 m',
  zrem: '{k} m',
  zincrby: '{k} 1 m',
  zscore: '{k} m',
  zcount: '{k} 0 1',
  zlexcount: '{k} - +',
  zrange: '{k} 0 1',
  zrevrange: '{k} 0 1',
  zrangebyscore: '{k} 0 1',
  zrevrangebyscore: '{k} 1 0',
  zrangebylex: '{k} - +',
  zremrangebyscore: '{k} 0 1',
  zremrangebyrank: '{k} 0 1',
  bzpopmin: '{k} 1',
  xadd: '{k} * f 1',
  xtrim: '{k} MAXLEN 1',
  xrange: '{k} - +',
  xread: 'COUNT 1 STREAMS {k} 0',
  xdel: '{k} 0-1',
  evalsha: '0000000000000000000000000000000000000000 1 {k}',
  eval: "'return 1' 1 {k}",
  publish: '{c} m',
  subscribe: '{c}',
  unsubscribe: '{c}',
  multi: '',
  exec: '',
  time: '',
  select: '{db}',
  info: '',
  'client|setname': 'sns-gateway',
  'command|info': 'get',
};

/**
 * Checks argument vectors without running them (the file says how). Sent with `EVAL`, never
 * `EVALSHA`: the check is also of `EVAL` itself.
 */
const ACL_CHECK = new URL('./lua/acl-check.lua', import.meta.url);

/** A command the user may not run, and why (`command`, or the key or channel it needs). */
export type RefusedCommand = { command: string; reason: 'command' | 'key-or-channel' };

/** What {@link checkRedisPermissions} found. */
export type PermissionReport =
  | {
      checked: true;
      /** Needed commands refused, once each. */
      refused: RefusedCommand[];
      /** Optional commands refused. */
      optionalRefused: string[];
    }
  | { checked: false; reason: string; optionalRefused: string[] };

/** A command's checked argument vector, key and channel filled in. */
function checkArgv(command: string, key: string, channel: string, db: number): string[] {
  const fill: Record<string, string> = { '{k}': key, '{c}': channel, '{db}': String(db) };
  // A quoted script text is one argument; the rest splits on spaces.
  const parts = (CHECK_ARGS[command] ?? '{k}').match(/'[^']*'|\S+/g) ?? [];
  const args = parts.map((p) => fill[p] ?? (p.startsWith("'") ? p.slice(1, -1) : p));
  return [...command.split('|'), ...args];
}

/** The needed commands, each once; `select` only for a database other than 0. */
export function neededCommands(db: number): string[] {
  const all = new Set(REDIS_NEEDS.flatMap((n) => n.commands));
  if (db === 0) all.delete('select');
  return [...all];
}

/**
 * Which needed and optional commands the user may not run on `prefix`'s keys and channel, in one
 * `EVAL` running none of them. `checked: false` before Redis 7.0. `INFO` is also tried for real,
 * so a renamed one counts as refused.
 *
 * @param db the connection's database (`select` is needed for any but 0).
 * @throws what the connection throws for reasons other than a refusal.
 */
export async function checkRedisPermissions(
  redis: RedisClient,
  prefix: string,
  db: number,
): Promise<PermissionReport> {
  const key = redisKeys(prefix).readinessProbe;
  const channel = refreshChannel(redis, prefix);
  const optionalRefused: string[] = [];
  try {
    await redis.info('server');
  } catch (err) {
    if (!(err instanceof Error) || err.name !== 'ReplyError') throw err;
    optionalRefused.push('info');
  }
  const commands = [...neededCommands(db), ...REDIS_OPTIONAL.map((o) => o.command)];
  const argv = commands.flatMap((c) => [...checkArgv(c, key, channel, db), '']);
  const script = loadLua(ACL_CHECK);
  let flat: unknown;
  try {
    flat = await redis.eval(script, 1, key, ...argv);
  } catch (err) {
    if (!(err instanceof Error) || err.name !== 'ReplyError') throw err;
    if (err.message.startsWith('NOPERM')) {
      // EVAL or its key is refused; every script needs both. EVALSHA is tried instead (NOSCRIPT
      // when allowed).
      const reason = /key/i.test(err.message) ? 'key-or-channel' : 'command';
      const refused: RefusedCommand[] = [{ command: 'eval', reason }];
      const evalsha = await redis.evalsha('0'.repeat(40), 1, key).then(
        () => '',
        (e: unknown) => (e instanceof Error ? e.message : ''),
      );
      if (reason === 'command' && evalsha.startsWith('NOPERM')) {
        refused.unshift({ command: 'evalsha', reason });
      }
      return { checked: true, refused, optionalRefused };
    }
    // No `redis.acl_check_cmd` before Redis 7.0; or Redis is still loading its data.
    return { checked: false, reason: err.message, optionalRefused };
  }
  const refused: RefusedCommand[] = [];
  const list = Array.isArray(flat) ? flat.map(String) : [];
  for (let i = 0; i + 1 < list.length; i += 2) {
    const command = list[i] as string;
    const reason = list[i + 1] === 'key-or-channel' ? 'key-or-channel' : 'command';
    if (REDIS_OPTIONAL.some((o) => o.command === command)) {
      if (!optionalRefused.includes(command)) optionalRefused.push(command);
    } else if (!refused.some((r) => r.command === command)) {
      refused.push({ command, reason });
    }
  }
  return { checked: true, refused, optionalRefused };
}

/** The ACL categories of each command (`COMMAND INFO`), or none when Redis does not say. */
async function categoriesOf(redis: RedisClient, commands: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  try {
    const infos = (await redis.call('COMMAND', 'INFO', ...commands)) as unknown[];
    for (const [i, info] of infos.entries()) {
      const cats = Array.isArray(info) && Array.isArray(info[6]) ? (info[6] as unknown[]) : [];
      const useful = cats.map(String).filter((c) => c !== '@fast' && c !== '@slow');
      if (useful.length > 0) out.set(commands[i] as string, useful.join(' '));
    }
  } catch {
    // The categories are a hint; the commands' names are the message.
  }
  return out;
}

/** Start-up refused: the Redis user lacks commands, keys or channels the gateway needs. */
export class RedisPermissionError extends Error {
  override readonly name = 'RedisPermissionError';
}

/** The start-up message: what is refused, what to grant (commands, categories, patterns). */
async function permissionErrorMessage(
  redis: RedisClient,
  user: string,
  prefix: string,
  refused: RefusedCommand[],
): Promise<string> {
  const commands = refused.filter((r) => r.reason === 'command').map((r) => r.command);
  const patterns = refused.filter((r) => r.reason === 'key-or-channel').map((r) => r.command);
  const categories = await categoriesOf(
    redis,
    commands.map((c) => c.split('|')[0] as string),
  );
  const lines = [`the Redis user "${user}" may not run what the gateway needs.`];
  if (refused.some((r) => r.command === 'eval')) {
    lines.push('(The check runs as a script: with EVAL refused, it could not look further.)');
  }
  if (commands.length > 0) {
    const named = commands.map((c) => {
      const cats = categories.get(c.split('|')[0] as string);
      return `${c.toUpperCase()}${cats ? ` (${cats})` : ''}`;
    });
    lines.push(
      `Commands refused: ${named.join(', ')}.`,
      `Grant them: ACL SETUSER ${user} ${commands.map((c) => `+${c}`).join(' ')}`,
    );
  }
  if (patterns.length > 0) {
    const p = redisKeys(prefix).prefix;
    lines.push(
      `Refused on the gateway's keys or channel: ${patterns.map((c) => c.toUpperCase()).join(', ')}.`,
      `Grant them: ACL SETUSER ${user} ~${p}:* &${p}:*`,
    );
  }
  lines.push('The commands and an example user: docs/operations.md, "Redis permissions".');
  return lines.join('\n  ');
}

/**
 * The start-up check of the Redis user: waits at most `waitMs`, checks, closes. Unreachable or
 * uncheckable: logged, start anyway, `INFO` taken as refused.
 *
 * @returns what every connection of the process may use.
 * @throws RedisPermissionError naming what is refused.
 */
export async function checkRedisAtStart(
  config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'QUEUE_PREFIX'>,
  logger: Logger,
  redisErrors: RedisErrorLog,
  waitMs: number,
): Promise<RedisAccess> {
  const redis = createRedis(config, 'command', 'start-check');
  redisErrors.watch(redis, 'start-up check connection');
  try {
    try {
      await waitReady(redis, AbortSignal.timeout(waitMs));
    } catch {
      // The Redis error is logged once, above (the process's Redis error log).
      logger.warn('Redis permissions not checked: Redis is not ready at start');
      return { info: false };
    }
    let report: PermissionReport;
    try {
      report = await checkRedisPermissions(redis, config.QUEUE_PREFIX, databaseOf(redis));
    } catch (err) {
      logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'Redis permissions not checked: the check failed',
      );
      return { info: false };
    }
    if (!report.checked) {
      logger.warn({ reason: report.reason }, 'Redis permissions not checked');
    } else if (report.refused.length > 0) {
      const user = decodeURIComponent(new URL(config.REDIS_URL).username) || 'default';
      throw new RedisPermissionError(
        await permissionErrorMessage(redis, user, config.QUEUE_PREFIX, report.refused),
      );
    }
    const info = !report.optionalRefused.includes('info');
    if (!info) {
      logger.warn(
        "Redis refuses INFO: BullMQ's Redis version check is skipped (and ioredis warns that it skips its ready check)",
      );
    }
    return { info };
  } finally {
    await closeRedis(redis);
  }
}
