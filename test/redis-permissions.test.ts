import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  checkRedisPermissions,
  neededCommands,
  REDIS_NEEDS,
  REDIS_OPTIONAL,
} from '../src/core/redis-permissions.js';
import { createLogger } from '../src/core/logger.js';
import { databaseOf } from '../src/core/redis.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { deletePrefix, getJson, uniquePrefix, waitFor } from './support/gateway.js';
import { runMain, spawnMain, type MainProcess } from './support/main-process.js';
import { freePort } from './support/ports.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { elapse } from './support/wait.js';

/**
 * The Redis users the gateway really meets: managed Redis without `INFO` (`+@all -@dangerous`),
 * users missing a command or the gateway's keys, and a wrong password. Each test makes its own
 * ACL user (a unique name, deleted after) and key prefix on the shared test Redis.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const redisUrl = inject('redisUrl');
const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
const db = databaseOf(admin);
const version = /redis_version:(\d+)/.exec(await admin.info('server'))?.[1];
/** `redis.acl_check_cmd`, the start-up check's means, came with Redis 7.0. */
const aclCheck = Number(version) >= 7;

const users: string[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const user of users) await admin.call('ACL', 'DELUSER', user);
  for (const prefix of prefixes) await deletePrefix(admin, prefix);
  admin.disconnect();
});

type AclUser = { name: string; password: string; url: string };

/** Creates an ACL user with `rules` (after `reset on >password`); deleted after the suite. */
async function aclUser(rules: string[]): Promise<AclUser> {
  const name = `sns-test-${process.pid}-${randomBytes(4).toString('hex')}`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  users.push(name);
  await admin.call('ACL', 'SETUSER', name, 'reset', 'on', `>${password}`, ...rules);
  const url = new URL(redisUrl);
  url.username = name;
  url.password = password;
  return { name, password, url: url.toString() };
}

function newPrefix(): string {
  const prefix = uniquePrefix();
  prefixes.push(prefix);
  return prefix;
}

/**
 * The refusals Redis logged for `user` (`ACL LOG`), less the expected ones: the optional commands
 * (REDIS_OPTIONAL: ioredis's ready check and connection name), and redlock's `SELECT`, which its
 * scripts send with `redis.pcall` and go on without.
 */
async function aclLog(user: string): Promise<{ reason: string; object: string }[]> {
  const entries = (await admin.call('ACL', 'LOG', '128')) as unknown[][];
  return entries
    .map((flat) => {
      const e = new Map<string, string>();
      for (let i = 0; i + 1 < flat.length; i += 2) e.set(String(flat[i]), String(flat[i + 1]));
      return e;
    })
    .filter((e) => e.get('username') === user)
    .filter((e) => !REDIS_OPTIONAL.some((o) => o.command === e.get('object')))
    .filter((e) => !(e.get('object') === 'select' && e.get('context') === 'lua'))
    .map((e) => ({ reason: e.get('reason') ?? '', object: e.get('object') ?? '' }));
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The example user of docs/operations.md ("Redis permissions"), for `prefix`. */
function documentedExampleRules(prefix: string): string[] {
  const readme = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const line = /^ACL SETUSER sns-gateway on >CHANGE-ME (.+)$/m.exec(readme)?.[1];
  if (!line) throw new Error('docs/operations.md: no example ACL SETUSER line');
  return line.split(' ').map((rule) => rule.replace(/^([~&])sns:/, `$1${prefix}:`));
}

const keysAndChannel = (prefix: string) => [`~${prefix}:*`, `&${prefix}:*`];

describe('the list of Redis commands', () => {
  /** The commands a Lua text calls (`redis.call('X'` and BullMQ's `rcall("X"`). */
  const calledIn = (text: string) =>
    [...text.matchAll(/(?:rcall|redis\.call)\(\s*["']([A-Za-z]+)["']/g)].map((m) =>
      (m[1] as string).toLowerCase(),
    );
  const listed = (by: string) => REDIS_NEEDS.find((n) => n.by.startsWith(by))?.commands ?? [];

  it("holds every command BullMQ's Lua scripts call", () => {
    const dir = join(ROOT, 'node_modules/bullmq/dist/esm/commands');
    const files = [
      ...readdirSync(dir).filter((f) => f.endsWith('.lua')),
      ...readdirSync(join(dir, 'includes')).map((f) => join('includes', f)),
    ];
    const called = new Set(files.flatMap((f) => calledIn(readFileSync(join(dir, f), 'utf8'))));
    expect(called.size).toBeGreaterThan(30);
    expect([...called].filter((c) => !listed('BullMQ').includes(c))).toEqual([]);
  });

  it("holds every command the gateway's, the rate limit's and redlock's scripts call", () => {
    const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
    const ours = ['src'].flatMap((dir) =>
      readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => read(join(dir, f))),
    );
    const cases: [string, string][] = [
      ['the gateway', ours.join('\n')],
      ['@fastify/rate-limit', read('node_modules/@fastify/rate-limit/store/RedisStore.js')],
      // Its SELECT is a `redis.pcall`: a refusal is caught in the script.
      ['redlock', read('node_modules/@sesamecare-oss/redlock/build/scripts.js')],
    ];
    for (const [by, text] of cases) {
      const called = calledIn(text);
      expect(called.length).toBeGreaterThan(0);
      const optional = REDIS_OPTIONAL.map((o) => o.command.split('|')[0]);
      expect(called.filter((c) => !listed(by).includes(c) && !optional.includes(c))).toEqual([]);
    }
  });

  it('is the list docs/operations.md gives', () => {
    const readme = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const section = readme.split('## Redis permissions')[1]?.split('\n## ')[0] ?? '';
    for (const need of REDIS_NEEDS) {
      for (const command of need.commands)
        expect(section).toContain(`\`${command.toUpperCase()}\``);
    }
  });
});

describe.skipIf(!aclCheck)('the start-up check of the Redis user', () => {
  const check = async (rules: string[], prefix: string) => {
    const user = await aclUser(rules);
    const redis = new Redis(user.url, { maxRetriesPerRequest: 1 });
    try {
      return await checkRedisPermissions(redis, prefix, db);
    } finally {
      redis.disconnect();
    }
  };

  it('finds nothing missing for a user with every command', async () => {
    const prefix = newPrefix();
    expect(await check(['+@all', ...keysAndChannel(prefix)], prefix)).toEqual({
      checked: true,
      refused: [],
      optionalRefused: [],
    });
  });

  it('finds INFO refused, and only that, for +@all -@dangerous', async () => {
    const prefix = newPrefix();
    const report = await check(['+@all', '-@dangerous', ...keysAndChannel(prefix)], prefix);
    expect(report).toEqual({ checked: true, refused: [], optionalRefused: ['info'] });
  });

  it('tells a refused command from refused keys and channel', async () => {
    const prefix = newPrefix();
    expect(await check(['+@all', '-zadd', '-bzpopmin', ...keysAndChannel(prefix)], prefix)).toEqual(
      {
        checked: true,
        refused: [
          { command: 'zadd', reason: 'command' },
          { command: 'bzpopmin', reason: 'command' },
        ],
        optionalRefused: [],
      },
    );
    const otherChannel = await check(['+@all', `~${prefix}:*`, '&elsewhere:*'], prefix);
    expect(otherChannel.checked && otherChannel.refused).toEqual([
      { command: 'publish', reason: 'key-or-channel' },
      { command: 'subscribe', reason: 'key-or-channel' },
    ]);
    const otherKeys = await check(['+@all', '~elsewhere:*', `&${prefix}:*`], prefix);
    // EVAL names the probe's key: refused with it, the check itself cannot run.
    expect(otherKeys).toMatchObject({
      checked: true,
      refused: [{ command: 'eval', reason: 'key-or-channel' }],
    });
  });

  it('exactly the listed commands are enough: a full run refuses nothing', async () => {
    const prefix = newPrefix();
    const user = await aclUser([
      '-@all',
      ...neededCommands(db).map((c) => `+${c}`),
      ...keysAndChannel(prefix),
    ]);
    const sim = await startRpcSimulator({ chain: seedChain() });
    const port = await freePort();
    let child: MainProcess | undefined;
    try {
      child = await spawnMain({
        REDIS_URL: user.url,
        RPC_URL: sim.url,
        RPC_WS: 'on',
        RPC_WS_URL: sim.wsUrl,
        WATCH_LEASE_MS: '1000',
        HOT_KEYS_MIN_CLIENTS: '1',
        CACHE_FRESH_SECONDS: '2',
        PORT: String(port),
        HOST: '127.0.0.1',
        QUEUE_PREFIX: prefix,
        ROLE: 'all',
      });
      const base = `http://127.0.0.1:${port}`;
      // A cold miss (queue, worker, cache write, event), a hit, then a stale entry's refresh;
      // hot-parent counts, their scans and the watcher's lease (redlock) on the way.
      expect((await getJson(base, '/subdomains/67679')).body.s).toBe('ok');
      expect((await getJson(base, '/subdomains/67679')).body.s).toBe('ok');
      await waitFor(async () => (await admin.exists(redisKeys(prefix).followLease)) === 1);
      // Past the fresh window: the next ask refreshes a stale entry.
      await elapse(2_500);
      expect((await getJson(base, '/subdomains/67679')).body.s).toBe('ok');
      expect((await getJson(base, '/readyz')).status).toBe(200);
      // Time passes with the gateway at work (its timers, the lease renewed), under the ACL.
      await elapse(1_000);
      expect((await child.kill('SIGTERM')).code).toBe(0);
      expect(child.output()).not.toContain('failed to start');
      expect(await aclLog(user.name)).toEqual([]);
    } finally {
      await child?.kill('SIGKILL');
      await sim.close();
    }
  }, 60_000);

  it('stops the start with exit 1 and a message naming what to grant', async () => {
    const prefix = newPrefix();
    const env = { RPC_URL: '', PORT: String(await freePort()), HOST: '127.0.0.1' };
    const noScripts = await aclUser([
      '+@all',
      '-@dangerous',
      '-@scripting',
      ...keysAndChannel(prefix),
    ]);
    const started = Date.now();
    const noScriptsRun = await runMain({
      ...env,
      REDIS_URL: noScripts.url,
      QUEUE_PREFIX: prefix,
      ROLE: 'all',
    });
    expect(noScriptsRun.code).toBe(1);
    // Start-up (tsx) included; no wait for Redis, no retry.
    expect(Date.now() - started).toBeLessThan(20_000);
    const out = noScriptsRun.output;
    expect(out).not.toContain('sns-gateway started');
    expect(out).toContain(`the Redis user "${noScripts.name}" may not run`);
    expect(out).toMatch(/EVAL \([^)]*@scripting/);
    expect(out).toContain(`ACL SETUSER ${noScripts.name} +evalsha +eval\n`);
    expect(out).toContain('docs/operations.md, "Redis permissions"');

    const wrongKeys = await aclUser(['+@all', '-@dangerous', '~elsewhere:*', `&${prefix}:*`]);
    const wrongKeysRun = await runMain({
      ...env,
      REDIS_URL: wrongKeys.url,
      QUEUE_PREFIX: prefix,
      ROLE: 'worker',
    });
    expect(wrongKeysRun.code).toBe(1);
    expect(wrongKeysRun.output).toContain(
      `ACL SETUSER ${wrongKeys.name} ~${prefix}:* &${prefix}:*`,
    );
  }, 60_000);
});

describe.skipIf(!aclCheck)('a Redis user without INFO (+@all -@dangerous)', () => {
  it('the documented example user: ready, refreshes a cold miss, idle, and ends on SIGTERM', async () => {
    const prefix = newPrefix();
    const user = await aclUser(documentedExampleRules(prefix));
    expect(user.name).toBeTruthy();
    const sim = await startRpcSimulator({ chain: seedChain() });
    const port = await freePort();
    let child: MainProcess | undefined;
    try {
      child = await spawnMain({
        REDIS_URL: user.url,
        RPC_URL: sim.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        QUEUE_PREFIX: prefix,
        ROLE: 'all',
        SHUTDOWN_TIMEOUT_MS: '5000',
      });
      const base = `http://127.0.0.1:${port}`;
      expect((await getJson(base, '/readyz')).status).toBe(200);
      expect(await getJson(base, '/subdomains/67679')).toMatchObject({
        status: 200,
        body: { s: 'ok', result: ['bullish', 'hollaaa', 'testing'] },
      });
      expect(child.output()).toContain('Redis refuses INFO');
      // Idle: no loop retrying a refused command (it took a whole core).
      const before = cpuSeconds(child.pid);
      await elapse(2_000);
      expect(cpuSeconds(child.pid) - before).toBeLessThan(0.5);
      const signalled = Date.now();
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(Date.now() - signalled).toBeLessThan(5_000);
      expect(await aclLog(user.name)).toEqual([]);
    } finally {
      await child?.kill('SIGKILL');
      await sim.close();
    }
  }, 60_000);

  it('a worker whose every fetch is refused waits between fetches instead of spinning', async () => {
    const prefix = newPrefix();
    const user = await aclUser(['+@all', '-@dangerous', ...keysAndChannel(prefix)]);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/refused-fetch.ts'], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: user.url, QUEUE_PREFIX: prefix, RUN_MS: '2000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const reap = () => child.kill('SIGKILL');
    process.once('exit', reap);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    try {
      // A spinning loop starves the child's timers: it never prints.
      await waitFor(() => out.includes('"ticks"'), 25_000).catch(() => {
        throw new Error(`the worker's loop starved its timers:\n${out.slice(-2000)}`);
      });
      const line = out.split('\n').find((l) => l.includes('"ticks"')) as string;
      const { errors, ticks } = JSON.parse(line) as { errors: number; ticks: number };
      // 100 ms timer over 2 s; fetches waiting 0.1, 0.2, 0.4, 0.8 s... between failures.
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(errors).toBeGreaterThan(0);
      expect(errors).toBeLessThanOrEqual(10);
    } finally {
      child.kill('SIGKILL');
      process.off('exit', reap);
    }
  }, 40_000);
});

describe('secrets in the log', () => {
  it("the logger drops a Redis error's command arguments (an AUTH's password)", async () => {
    const prefix = newPrefix();
    const user = await aclUser(['+@all', ...keysAndChannel(prefix)]);
    const wrong = `wrong-${randomBytes(12).toString('hex')}`;
    const url = new URL(user.url);
    url.password = wrong;
    // A command queued before the connection is up fails with the AUTH error, as the refresh
    // events' subscription does: that error carries the AUTH command, password included.
    const redis = new Redis(url.toString(), { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    const err = await redis.subscribe(`${prefix}:x`).then(
      () => undefined,
      (e: unknown) => e,
    );
    redis.disconnect();
    expect(err).toMatchObject({ command: { name: 'auth', args: [user.name, wrong] } });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger('info', sink);
    logger.error({ err }, 'could not subscribe to refresh events');
    logger.warn({ err: { cause: err, previous: [err] } }, 'nested');
    logger.info(`connecting to ${url.toString()}`);
    await waitFor(() => lines.length === 3);
    const out = lines.join('');
    expect(out).toContain('"command":{"name":"auth","args":"[redacted]"}');
    expect(out).not.toContain(wrong);
    expect(out).not.toContain(`${user.name}:`);
  });

  it('the entry file with a wrong password logs neither it, nor URL credentials, nor ?rpc=', async () => {
    const prefix = newPrefix();
    const user = await aclUser(['+@all', ...keysAndChannel(prefix)]);
    const wrong = `wrong-${randomBytes(12).toString('hex')}`;
    const url = new URL(user.url);
    url.password = wrong;
    const rpcSecret = `rpc-key-${randomBytes(8).toString('hex')}`;
    const port = await freePort();
    const child = await spawnMain(
      {
        REDIS_URL: url.toString(),
        RPC_URL: `http://127.0.0.1:1/?api-key=${rpcSecret}`,
        PORT: String(port),
        HOST: '127.0.0.1',
        QUEUE_PREFIX: prefix,
        ROLE: 'all',
        LOG_LEVEL: 'debug',
        ACCESS_LOG: 'true',
      },
      30_000,
      'Server listening',
    );
    try {
      const base = `http://127.0.0.1:${port}`;
      await getJson(base, `/subdomains/67679?rpc=https://h.example/?api-key=${rpcSecret}`);
      await getJson(base, `/nowhere?x=1&RPC=https://h.example/${rpcSecret}`);
      // Reconnects fail with the AUTH error meanwhile; the subscription of refresh events often
      // fails with it too (and logs it), when it was queued before a failed AUTH.
      await elapse(3_000);
      await child.kill('SIGTERM');
      const out = child.output();
      expect(out).toContain('WRONGPASS');
      expect(out).not.toContain(wrong);
      expect(out).not.toContain(`${user.name}:`);
      expect(out).not.toContain(rpcSecret);
    } finally {
      await child.kill('SIGKILL');
    }
  }, 60_000);
});

function seedChain(): SimChain {
  const chain = new SimChain();
  seedDemoChain(chain);
  return chain;
}
