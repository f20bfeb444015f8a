import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { closeSteps, SAME_SIGNAL_MS } from '../src/core/runtime/shutdown.js';
import { startGateway, waitFor } from './support/gateway.js';
import { startPrivateRedis } from './support/private-redis.js';

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
      await sleep(20);
      stuck.child.kill('SIGINT');
      await sleep(SAME_SIGNAL_MS + 200);
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
