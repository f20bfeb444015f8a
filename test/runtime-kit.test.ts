/**
 * The start-up kit both runtimes open their resources with (src/core/runtime/kit.ts): close steps
 * run newest first, every one of them, each within `SHUTDOWN_TIMEOUT_MS`.
 */
import { pino } from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { createRuntimeKit } from '../src/core/runtime/kit.js';
import { waitReady } from '../src/core/redis.js';
import { uniquePrefix, waitFor } from './support/gateway.js';

const silent = pino({ level: 'silent' });

// The readiness probe's key expires by itself (10 s).
const prefix = uniquePrefix();

const kitFor = (shutdownMs = 10_000) =>
  createRuntimeKit({
    name: 'test',
    config: {
      REDIS_URL: inject('redisUrl'),
      REDIS_CLUSTER_NODES: undefined,
      QUEUE_PREFIX: prefix,
      SHUTDOWN_TIMEOUT_MS: shutdownMs,
    },
    logger: silent,
  });

describe('the runtime kit', () => {
  it('closes in the reverse of the order the steps were declared', async () => {
    const kit = kitFor();
    const ran: string[] = [];
    for (const name of ['first', 'second', 'third']) {
      kit.closes(name, name, (n) => void ran.push(n));
    }
    await kit.close();
    expect(ran).toEqual(['third', 'second', 'first']);
  });

  it('runs every step when one fails or throws, then rejects', async () => {
    const kit = kitFor();
    const ran: string[] = [];
    kit.closes('a', 'a', (n) => void ran.push(n));
    kit.closes('rejects', 'rejects', async (n) => {
      ran.push(n);
      throw new Error('close failed');
    });
    kit.closes('throws', 'throws', (n) => {
      ran.push(n);
      throw new Error('sync');
    });
    kit.closes('z', 'z', (n) => void ran.push(n));
    await expect(kit.close()).rejects.toThrow(/the test closed with failures/);
    expect(ran).toEqual(['z', 'throws', 'rejects', 'a']);
  });

  it('bounds each step by SHUTDOWN_TIMEOUT_MS and goes on to the next', async () => {
    const kit = kitFor(150);
    const ran: string[] = [];
    kit.closes('after', 'after', (n) => void ran.push(n));
    kit.closes('hangs', 'hangs', () => new Promise(() => undefined));
    const started = Date.now();
    await expect(kit.close()).rejects.toThrow();
    const took = Date.now() - started;
    expect(ran).toEqual(['after']);
    expect(took).toBeGreaterThanOrEqual(140);
    expect(took).toBeLessThan(2_000);
  });

  it('is closing from the first call, and a second call is the same close', async () => {
    const kit = kitFor();
    let runs = 0;
    let seenClosing = false;
    kit.closes('count', null, () => {
      runs += 1;
      seenClosing = kit.closing;
    });
    expect(kit.closing).toBe(false);
    const first = kit.close();
    expect(kit.close()).toBe(first);
    await first;
    expect([runs, seenClosing]).toEqual([1, true]);
  });

  it('closes its Redis connections last, even after a failed step', async () => {
    const kit = kitFor();
    const connection = kit.redis('command', 'test command connection');
    await waitReady(connection, AbortSignal.timeout(5_000));
    const statusSeen: string[] = [];
    kit.closes('fails', null, () => {
      statusSeen.push(connection.status);
      throw new Error('close failed');
    });
    await expect(kit.close()).rejects.toThrow();
    expect(statusSeen).toEqual(['ready']);
    // QUIT answered; the socket ends right after.
    await waitFor(() => connection.status === 'end', 2_000);
  });

  it('reports not ready once closing', async () => {
    const kit = kitFor();
    const connection = kit.redis('command', 'test command connection');
    await waitReady(connection, AbortSignal.timeout(5_000));
    const readiness = kit.readiness(connection, () => ({ rpc: 'unset', websocket: 'off' }));
    expect(await readiness()).toMatchObject({ ready: true, parts: { redis: true, rpc: 'unset' } });
    let during: boolean | undefined;
    kit.closes('probe', null, async () => {
      during = (await readiness()).ready;
    });
    await kit.close();
    expect(during).toBe(false);
  });
});
