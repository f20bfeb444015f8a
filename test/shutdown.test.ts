import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { closeSteps, SAME_SIGNAL_MS } from '../src/core/runtime/shutdown.js';
import { deletePrefix, startGateway, uniquePrefix, waitFor } from './support/gateway.js';
import { spawnMain } from './support/main-process.js';
import { freePort } from './support/ports.js';
import { startPrivateRedis } from './support/private-redis.js';
import { elapse } from './support/wait.js';

const silent = pino({ level: 'silent' });

describe('closeSteps', () => {
  it('runs every step in order even when one before it fails, and says so', async () => {
    const ran: string[] = [];
    const ok = await closeSteps(
      [
        {
          name: 'api',
          close: () => Promise.reject(new Error('api close failed')).finally(() => ran.push('api')),
        },
        {
          name: 'throws',
          close: () => {
            ran.push('throws');
            throw new Error('sync');
          },
        },
        { name: 'worker', close: async () => void ran.push('worker') },
      ],
      silent,
    );
    expect(ran).toEqual(['api', 'throws', 'worker']);
    expect(ok).toBe(false);
    expect(await closeSteps([{ name: 'api', close: async () => undefined }], silent)).toBe(true);
  });
});

describe("the API's close", () => {
  it('closes its Redis connections even when the HTTP server fails to close', async () => {
    // A private redis-server, so CLIENT LIST shows this API's connections only.
    const server = await startPrivateRedis();
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const gw = await startGateway({ worker: false, env: { REDIS_URL: server.url } });
    const apiConnections = async () =>
      ((await admin.client('LIST')) as string)
        .split('\n')
        .filter((line) => / name=sns-gateway:api:/.test(line)).length;
    const realClose = gw.api.app.close.bind(gw.api.app);
    try {
      expect(await apiConnections()).toBe(3);
      gw.api.app.close = (() =>
        Promise.reject(new Error('server close failed'))) as unknown as typeof gw.api.app.close;
      await expect(gw.api.close()).rejects.toThrow();
      // The steps after the failed one ran: command, queue and subscriber connections are gone.
      await waitFor(async () => (await apiConnections()) === 0, 5_000);
    } finally {
      await realClose();
      gw.redis.disconnect();
      admin.disconnect();
      await gw.sim.close();
      await server.destroy();
    }
  });
});

/** Starts test/support/stuck-shutdown.ts; resolves once its thread is stuck. */
async function startStuck(timeoutMs: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/stuck-shutdown.ts'], {
    env: { ...process.env, SHUTDOWN_TIMEOUT_MS: String(timeoutMs), STUCK_SECONDS: '20' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', reap);
      resolve({ code, signal });
    }),
  );
  await waitFor(() => out.includes('"stuck"'), 20_000);
  return { child, exited, output: () => out };
}

describe('a shutdown that cannot finish', () => {
  // process.exit() waits for a worker thread stuck in a synchronous call (here 20 s): the
  // forced exit must not.
  it('ends the process SHUTDOWN_TIMEOUT_MS after the signal, logging why', async () => {
    const stuck = await startStuck(1_000);
    try {
      const started = Date.now();
      stuck.child.kill('SIGTERM');
      expect((await stuck.exited).signal).toBe('SIGKILL');
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(stuck.output()).toContain('shutdown timed out: exiting');
    } finally {
      stuck.child.kill('SIGKILL');
    }
  }, 40_000);

  it('ends the process at once on a second signal', async () => {
    const stuck = await startStuck(60_000);
    try {
      stuck.child.kill('SIGTERM');
      await waitFor(() => stuck.output().includes('shutting down'));
      const started = Date.now();
      stuck.child.kill('SIGINT');
      expect((await stuck.exited).signal).toBe('SIGKILL');
      expect(Date.now() - started).toBeLessThan(1_500);
      expect(stuck.output()).toContain('second signal: exiting now');
    } finally {
      stuck.child.kill('SIGKILL');
    }
  }, 40_000);

  it('takes the first signal repeated at once (npm forwarding Ctrl-C) for one, not a second', async () => {
    const stuck = await startStuck(60_000);
    try {
      stuck.child.kill('SIGINT');
      // Within SAME_SIGNAL_MS: the one signal twice, as npm forwards a terminal's Ctrl-C.
      await elapse(20);
      stuck.child.kill('SIGINT');
      // Past SAME_SIGNAL_MS: time is the subject, and the process is still in its first shutdown.
      await elapse(SAME_SIGNAL_MS + 200);
      expect(stuck.child.exitCode === null && stuck.child.signalCode === null).toBe(true);
      expect(stuck.output()).not.toContain('second signal');
      stuck.child.kill('SIGINT');
      expect((await stuck.exited).signal).toBe('SIGKILL');
      expect(stuck.output()).toContain('second signal: exiting now');
    } finally {
      stuck.child.kill('SIGKILL');
    }
  }, 40_000);
});

describe('SIGHUP', () => {
  // logrotate's `kill -HUP` and a closed terminal send it: the gateway logs to stdout, so it has no
  // file to reopen, and it must not stop (a clean exit is not restarted by `Restart=on-failure`).
  it('is logged and ignored: the gateway keeps answering, and SIGTERM still stops it with 0', async () => {
    const prefix = uniquePrefix();
    const port = await freePort();
    const child = await spawnMain({
      ROLE: 'all',
      REDIS_URL: inject('redisUrl'),
      PORT: String(port),
      HOST: '127.0.0.1',
      QUEUE_PREFIX: prefix,
      RPC_URL: '',
    });
    try {
      process.kill(child.pid, 'SIGHUP');
      await waitFor(() => child.output().includes('SIGHUP'), 10_000);
      const line = child
        .output()
        .split('\n')
        .find((l) => l.includes('SIGHUP'));
      expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 30, signal: 'SIGHUP' });
      expect(child.output()).not.toContain('shutting down');
      const health = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(health.status).toBe(200);
      // A second SIGHUP is not a "second signal" either.
      process.kill(child.pid, 'SIGHUP');
      await waitFor(
        () =>
          child
            .output()
            .split('\n')
            .filter((l) => l.includes('SIGHUP')).length >= 2,
        10_000,
      );
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(child.output()).toContain('shut down cleanly');
    } finally {
      await child.kill('SIGKILL');
      const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
      await deletePrefix(redis, prefix).finally(() => redis.disconnect());
    }
  }, 40_000);
});
