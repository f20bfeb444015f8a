import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import {
  createRedisErrorLog,
  REDIS_ERROR_REMINDER_MS,
  waitReady,
  type RedisClient,
} from '../src/core/redis.js';
import { uniquePrefix } from './support/gateway.js';
import { spawnMain } from './support/main-process.js';
import { freePort } from './support/ports.js';
import { elapse } from './support/wait.js';

/**
 * The process without a reachable Redis: one readable line about it (not several a second with
 * stack traces), and a SIGTERM, during start-up as after it, ends it cleanly (exit 0).
 */

/** The environment of an entry-file child whose Redis is a loopback port nobody listens on. */
async function deadRedisEnv(): Promise<Record<string, string>> {
  return {
    REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    PORT: String(await freePort()),
    HOST: '127.0.0.1',
    QUEUE_PREFIX: uniquePrefix(),
    ROLE: 'all',
    RPC_URL: '',
  };
}

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');

describe('the entry file without a reachable Redis', () => {
  it('logs the lost Redis once, without a stack, and exits 0 on SIGTERM', async () => {
    const child = await spawnMain(await deadRedisEnv());
    try {
      const before = lines(child.output()).length;
      await elapse(3_000);
      const out = child.output();
      // ioredis reports each of the six connections' reconnect attempts (every 2 s at most);
      // nothing of that may reach the log within 30 s of the first line.
      expect(lines(out).length - before).toBeLessThanOrEqual(1);
      expect(out).not.toContain('stack');
      const redisLines = lines(out).filter((line) => line.includes('ECONNREFUSED'));
      expect(redisLines).toHaveLength(1);
      expect(JSON.parse(redisLines[0] as string)).toMatchObject({
        level: 40,
        code: 'ECONNREFUSED',
        msg: expect.stringContaining('Redis error') as string,
      });
      // No RPC_URL either: said once, with the way to try the gateway without a provider.
      expect(lines(out).filter((line) => line.includes('npm run rpc:sim'))).toHaveLength(1);
      const started = Date.now();
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(child.output()).toContain('shut down cleanly');
    } finally {
      await child.kill('SIGKILL');
    }
  }, 40_000);

  it('exits 0 on a SIGTERM that comes while it still waits for Redis at start-up', async () => {
    // The first Redis error is logged while the API waits (5 s) for Redis, before it listens.
    const child = await spawnMain(await deadRedisEnv(), 20_000, 'ECONNREFUSED');
    try {
      expect(child.output()).not.toContain('sns-gateway started');
      const started = Date.now();
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      await child.kill('SIGKILL');
    }
  }, 40_000);
});

describe('waitReady', () => {
  it('waits through refused connections until its signal aborts, then throws its reason', async () => {
    const redis = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      retryStrategy: () => 20,
      maxRetriesPerRequest: null,
    });
    let errors = 0;
    redis.on('error', () => (errors += 1));
    try {
      const started = Date.now();
      await expect(waitReady(redis, AbortSignal.timeout(500))).rejects.toMatchObject({
        name: 'TimeoutError',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(450);
      // Several attempts failed during the wait: none of them ended it.
      expect(errors).toBeGreaterThan(2);
    } finally {
      redis.disconnect();
    }
  });

  it('resolves on the ready that follows failed attempts, and at once when already ready', async () => {
    const conn = Object.assign(new EventEmitter(), { status: 'connecting' });
    conn.on('error', () => undefined);
    const waiting = waitReady(conn as unknown as RedisClient, AbortSignal.timeout(5_000));
    conn.emit('error', new Error('connect ECONNREFUSED'));
    await elapse(10);
    conn.status = 'ready';
    conn.emit('ready');
    await expect(waiting).resolves.toBeUndefined();

    const redis = new Redis(inject('redisUrl'));
    try {
      await waitReady(redis, AbortSignal.timeout(5_000));
      expect(redis.status).toBe('ready');
      await expect(waitReady(redis, AbortSignal.abort())).resolves.toBeUndefined();
    } finally {
      redis.disconnect();
    }
  });
});

describe('createRedisErrorLog', () => {
  function setUp() {
    const logged: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    let t = 1_000_000;
    const log = createRedisErrorLog(
      pino({ level: 'info' }, sink),
      REDIS_ERROR_REMINDER_MS,
      () => t,
    );
    return {
      log,
      logged,
      advance: (ms: number) => (t += ms),
      flush: () => new Promise((resolve) => setImmediate(resolve)),
    };
  }
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {
    code: 'ECONNREFUSED',
  });

  it('logs the first error, then one reminder per 30 s with the count, then the recovery', async () => {
    const { log, logged, advance, flush } = setUp();
    const conn = new EventEmitter();
    log.watch(conn as never, 'api command connection');
    // Five errors a second for a minute, from a connection and from a BullMQ worker.
    for (let i = 0; i < 300; i++) {
      if (i % 2) conn.emit('error', refused);
      else log.report(refused, 'refresh worker');
      advance(200);
    }
    conn.emit('ready');
    await flush();
    expect(logged.map((l) => l.msg)).toEqual([
      expect.stringContaining('Redis error: retrying'),
      'Redis error goes on: still retrying',
      'Redis is back',
    ]);
    expect(logged[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED', source: 'refresh worker' });
    expect(logged[0]).not.toHaveProperty('stack');
    expect(logged[1]).toMatchObject({ forSeconds: 30, errors: 150 });
    expect(logged[2]).toMatchObject({ level: 30, afterSeconds: 60 });
  });

  it('logs a new fault at once when the last error is older than the reminder period', async () => {
    const { log, logged, advance, flush } = setUp();
    log.report(refused, 'worker refresh queue');
    advance(REDIS_ERROR_REMINDER_MS + 1);
    log.report(new Error('Connection is closed.'), 'worker refresh queue');
    await flush();
    expect(logged).toHaveLength(2);
    expect(logged[1]).toMatchObject({ err: 'Connection is closed.' });
  });
});
