import { Redis } from 'ioredis';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createMetrics } from '../src/core/metrics.js';
import { startWorker } from '../worker/runtime.js';
import { getJson, startGateway, waitFor } from './support/gateway.js';
import { startPrivateRedis } from './support/private-redis.js';
import { redisKeys } from '../src/core/redis-keys.js';
import type { Config } from '../src/core/config.js';
import { scrape, value } from './support/prometheus.js';

/**
 * `/readyz` says which part is ready (Redis, Redis writes, RPC configured, websocket), and a
 * gateway without `RPC_URL` answers 500 to the subdomain route without logging it as a fault.
 */

const ALL_READY = { redis: true, redisWrites: true, rpc: 'configured', websocket: 'off' };

describe('/readyz', () => {
  it('answers 200 with every part, probing Redis with a short-lived write under the prefix', async () => {
    const gw = await startGateway({ worker: false });
    try {
      expect(await gw.get('/readyz')).toMatchObject({
        status: 200,
        body: { s: 'ok', result: 'ready', parts: ALL_READY },
      });
      const key = redisKeys(gw.config.QUEUE_PREFIX).readinessProbe;
      expect(await gw.redis.get(key)).toBe('1');
      const ttl = await gw.redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(10_000);
    } finally {
      await gw.close();
    }
  });

  it('says when Redis refuses writes (OOM at maxmemory), staying ready for what still works', async () => {
    // A private redis-server: never the shared one.
    const server = await startPrivateRedis();
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const gw = await startGateway({ worker: false, env: { REDIS_URL: server.url } });
    try {
      expect((await gw.get('/readyz')).status).toBe(200);
      // Below what the server already uses, with the default noeviction policy: every write
      // is refused with OOM, reads and PING go on.
      await admin.config('SET', 'maxmemory', '1');
      expect(await admin.ping()).toBe('PONG');
      // Derivations and cached answers still work: taking every replica out of the load
      // balancer would turn a full Redis into a full outage. The body says what is wrong.
      await waitFor(
        async () =>
          ((await gw.get('/readyz')).body as { parts?: { redisWrites?: boolean } }).parts
            ?.redisWrites === false,
      );
      expect(await gw.get('/readyz')).toMatchObject({
        status: 200,
        body: { s: 'ok', parts: { ...ALL_READY, redisWrites: false } },
      });
      await admin.config('SET', 'maxmemory', '0');
      await waitFor(
        async () =>
          ((await gw.get('/readyz')).body as { parts?: { redisWrites?: boolean } }).parts
            ?.redisWrites === true,
      );
    } finally {
      await gw.close().catch(() => undefined);
      admin.disconnect();
      await server.destroy();
    }
  });

  it('says Redis is down when it is unreachable', async () => {
    const server = await startPrivateRedis();
    const gw = await startGateway({ worker: false, env: { REDIS_URL: server.url } });
    try {
      await server.stop();
      await waitFor(async () => (await gw.get('/readyz')).status === 503, 5_000);
      expect((await gw.get('/readyz')).body).toMatchObject({
        s: 'error',
        parts: { ...ALL_READY, redis: false, redisWrites: false },
      });
    } finally {
      await gw.api.close();
      gw.redis.disconnect();
      await server.destroy();
      await gw.sim.close();
    }
  });
});

describe("the worker's /readyz (WORKER_METRICS_PORT)", () => {
  it('answers as the API does: ready with Redis, 503 without it', async () => {
    const server = await startPrivateRedis();
    const gw = await startGateway({ worker: false, env: { REDIS_URL: server.url } });
    const worker = await startWorker(
      gw.config,
      createMetrics(new Registry()),
      pino({ level: 'silent' }),
      {
        serveMetrics: true,
      },
    );
    try {
      const workerUrl = `http://127.0.0.1:${worker.metricsPort}`;
      expect(await getJson(workerUrl, '/readyz')).toMatchObject({
        status: 200,
        body: { s: 'ok', result: 'ready', parts: { ...ALL_READY, queue: true } },
      });
      await server.stop();
      // The worker's own connections drop at once; the probe (at most once a second) follows.
      await waitFor(
        async () =>
          ((await getJson(workerUrl, '/readyz')).body as { parts?: { redis?: boolean } }).parts
            ?.redis === false,
        5_000,
      );
      expect((await getJson(workerUrl, '/readyz')).body).toEqual({
        s: 'error',
        result: 'Not ready',
        parts: { ...ALL_READY, redis: false, redisWrites: false, queue: false },
      });
    } finally {
      await worker.close();
      await gw.api.close();
      gw.redis.disconnect();
      await server.destroy();
      await gw.sim.close();
    }
  });
});

/** An IPv4 address of this machine other than loopback: Redis' protected mode refuses clients from it. */
const externalAddress = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

/** A worker on `config` with its ops server, and its base URL. */
async function startOpsWorker(config: Config) {
  const metrics = createMetrics(new Registry());
  const worker = await startWorker(config, metrics, pino({ level: 'silent' }), {
    serveMetrics: true,
  });
  return { worker, url: `http://127.0.0.1:${worker.metricsPort}` };
}

/** `sns_redis_up` as scraped from a metrics URL (the API's is off its public port). */
const redisUp = async (metricsUrl: string) => value(await scrape(metricsUrl), 'sns_redis_up');

describe('readiness is the ability to do the job (what the compose health checks ask)', () => {
  it.runIf(externalAddress)(
    'API and worker are not ready while Redis refuses them (protected mode), ready once it lets them in',
    async () => {
      // As in compose when Redis runs in protected mode: the other containers reach it over the
      // network, it accepts the connection and answers DENIED. /healthz alone would say healthy.
      const server = await startPrivateRedis(undefined, [
        '--bind',
        `127.0.0.1 ${externalAddress}`,
        '--protected-mode',
        'yes',
      ]);
      const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
      const url = server.url.replace('127.0.0.1', externalAddress ?? '');
      const gw = await startGateway({ worker: false, env: { REDIS_URL: url } });
      const { worker, url: workerUrl } = await startOpsWorker(gw.config);
      try {
        const sides = [
          { base: gw.baseUrl, metrics: gw.metricsUrl },
          { base: workerUrl, metrics: `${workerUrl}/metrics` },
        ];
        for (const { base, metrics } of sides) {
          expect((await getJson(base, '/healthz')).status).toBe(200);
          expect(await getJson(base, '/readyz')).toMatchObject({
            status: 503,
            body: { s: 'error', result: 'Not ready', parts: { redis: false } },
          });
          expect(await redisUp(metrics)).toBe(0);
        }
        expect((await getJson(workerUrl, '/readyz')).body).toMatchObject({
          parts: { queue: false },
        });
        // The same processes, let in: both turn ready without a restart.
        await admin.config('SET', 'protected-mode', 'no');
        for (const { base, metrics } of sides) {
          await waitFor(async () => (await getJson(base, '/readyz')).status === 200, 10_000);
          expect(await redisUp(metrics)).toBe(1);
        }
        expect((await getJson(workerUrl, '/readyz')).body).toMatchObject({
          parts: { redis: true, queue: true },
        });
      } finally {
        await worker.close();
        await gw.close().catch(() => undefined);
        admin.disconnect();
        await server.destroy();
      }
    },
    60_000,
  );
  if (!externalAddress) {
    console.warn('readiness.test: no non-loopback IPv4 address; skipping the protected-mode test');
  }

  it('the worker is not ready while Redis answers but refuses its jobs (an ACL without scripts)', async () => {
    const server = await startPrivateRedis();
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    // Everything but Lua: the readiness probe's SET works, every BullMQ fetch (a script) fails.
    await admin.call('ACL', 'SETUSER', 'noscripts', 'on', '>secret-pass', '~*', '&*', '+@all');
    const url = server.url.replace('redis://', 'redis://noscripts:secret-pass@');
    const gw = await startGateway({ worker: false, env: { REDIS_URL: url } });
    const { worker, url: workerUrl } = await startOpsWorker(gw.config);
    try {
      await waitFor(async () => (await getJson(workerUrl, '/readyz')).status === 200, 10_000);
      await admin.call('ACL', 'SETUSER', 'noscripts', '-@scripting');
      await waitFor(async () => (await getJson(workerUrl, '/readyz')).status === 503, 15_000);
      expect((await getJson(workerUrl, '/readyz')).body).toEqual({
        s: 'error',
        result: 'Not ready',
        // The scheduler of the hot-parent scans was installed before the refusal.
        parts: { ...ALL_READY, queue: false, refreshAhead: 'running' },
      });
      // Redis itself answers: the API (no scripts on its readiness path) stays ready.
      expect(await redisUp(`${workerUrl}/metrics`)).toBe(1);
      expect((await gw.get('/readyz')).status).toBe(200);
      await admin.call('ACL', 'SETUSER', 'noscripts', '+@scripting');
      await waitFor(async () => (await getJson(workerUrl, '/readyz')).status === 200, 15_000);
    } finally {
      await worker.close();
      await gw.close().catch(() => undefined);
      admin.disconnect();
      await server.destroy();
    }
  });
});

describe('without RPC_URL', () => {
  it('answers 500 Internal error, logs it at debug without a stack, and says rpc unset', async () => {
    const gw = await startGateway({ worker: false, env: { RPC_URL: '', LOG_LEVEL: 'debug' } });
    try {
      const before = gw.logs.length;
      for (const path of ['/subdomains/67679', '/subdomains/bonfida']) {
        expect(await gw.get(path)).toMatchObject({
          status: 500,
          body: { s: 'error', result: 'Internal error' },
        });
      }
      const lines = gw.logs.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
      expect(lines.some((l) => l.level === 20 && String(l.msg).includes('RPC_URL'))).toBe(true);
      expect(gw.logs.slice(before).join('')).not.toContain('stack');
      // Other requests still work, and readiness tells why the subdomain route fails.
      expect((await gw.get('/record-key-v2/bonfida/SOL')).status).toBe(200);
      expect(await gw.get('/readyz')).toMatchObject({
        status: 200,
        body: { parts: { ...ALL_READY, rpc: 'unset' } },
      });
      // A request naming its own endpoint is not affected: an invalid one is refused with 400.
      expect((await gw.get('/subdomains/67679?rpc=not-a-url')).status).toBe(400);
    } finally {
      await gw.close();
    }
  });
});
