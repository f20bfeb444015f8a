import { Agent, get } from 'node:http';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { REQUEST_TIMEOUT_MS } from '../src/api/http/app.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { createMetrics } from '../src/core/metrics.js';
import { startApi } from '../src/api/runtime.js';
import { startWorker } from '../worker/runtime.js';
import {
  baseUrlOf,
  deletePrefix,
  getJson,
  startGateway,
  uniquePrefix,
  waitFor,
} from './support/gateway.js';
import { runMain, spawnMain, type MainProcess } from './support/main-process.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { freePort } from './support/ports.js';

const silent = pino({ level: 'silent' });

describe('liveness and readiness', () => {
  it('is live and ready with Redis, and not ready once shutdown begins', async () => {
    const gw = await startGateway();
    try {
      expect(await gw.get('/healthz')).toMatchObject({
        status: 200,
        body: { s: 'ok', result: 'live' },
      });
      expect((await gw.get('/readyz')).status).toBe(200);
      // A slow request keeps the server open while close() begins.
      gw.sim.setFaults([{ kind: 'delay', ms: 600 }]);
      const inflight = gw.get('/subdomains/67679');
      await waitFor(() => gw.sim.callCount('getProgramAccounts') === 1);
      const closing = gw.api.close();
      // Requests arriving while it drains (on a connection still open) get 503 in the envelope.
      const during = await gw.api.app.inject({ method: 'GET', url: '/readyz' });
      expect(during.statusCode).toBe(503);
      expect(during.json()).toMatchObject({ s: 'error' });
      const answered = await inflight;
      expect(answered.status).toBe(200);
      expect(answered.body.result).toEqual(['bullish', 'hollaaa', 'testing']);
      await closing;
    } finally {
      await gw.worker?.close();
      await gw.close().catch(() => undefined);
    }
  });

  it('keeps derivations up and fails subdomain requests fast while Redis is unreachable', async () => {
    const deadPort = await freePort();
    const config = loadConfig({
      REDIS_URL: `redis://127.0.0.1:${deadPort}`,
      RPC_URL: 'http://127.0.0.1:1',
      PORT: '0',
      HOST: '127.0.0.1',
      QUEUE_PREFIX: uniquePrefix(),
    });
    const api = await startApi(config, createMetrics(new Registry()), silent);
    try {
      const base = baseUrlOf(api.app);
      expect((await getJson(base, '/healthz')).status).toBe(200);
      expect(await getJson(base, '/readyz')).toMatchObject({ status: 503, body: { s: 'error' } });
      expect((await getJson(base, '/record-key-v2/bonfida/SOL')).status).toBe(200);
      const started = Date.now();
      expect(await getJson(base, '/subdomains/67679')).toMatchObject({
        status: 500,
        body: { s: 'error', result: 'Internal error' },
      });
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      await api.close();
    }
  });
});

describe('several API and worker processes on one Redis', () => {
  it('coalesces a cold burst spread over two APIs into one refresh, and both answer from one cache', async () => {
    const gw = await startGateway();
    const second = await startApi(gw.config, createMetrics(new Registry()), silent);
    const secondWorker = await startWorker(gw.config, createMetrics(new Registry()), silent, {
      serveMetrics: false,
    });
    try {
      const base2 = baseUrlOf(second.app);
      gw.sim.resetCalls();
      const replies = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          i % 2 ? gw.get('/subdomains/demo') : getJson(base2, '/subdomains/demo'),
        ),
      );
      for (const r of replies) expect(r.status).toBe(200);
      expect(new Set(replies.map((r) => JSON.stringify(r.body.result))).size).toBe(1);
      expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
      expect((await getJson(base2, '/subdomains/demo')).headers.get('x-cache')).toBe('HIT');
      expect((await gw.get('/subdomains/demo')).headers.get('x-cache')).toBe('HIT');
    } finally {
      await second.close();
      await secondWorker.close();
      await gw.close();
    }
  });
});

describe('worker shutdown', () => {
  it('finishes the active refresh before closing', async () => {
    const gw = await startGateway({ env: { SUBDOMAINS_WAIT_MS: '100' } });
    try {
      gw.sim.setFaults([{ kind: 'delay', ms: 500 }]);
      expect((await gw.get('/subdomains/67679')).status).toBe(502); // gave up waiting; the job runs on
      await waitFor(() => gw.sim.callCount('getProgramAccounts') === 1);
      await gw.worker?.close();
      // Computed, not listed: a listing of a shared Redis is slow, and a SCAN page can miss it.
      const key = redisKeys(gw.config.QUEUE_PREFIX).entryMeta(
        endpointId(gw.config.RPC_URL ?? ''),
        '67679',
      );
      expect(await gw.redis.exists(key)).toBe(1);
    } finally {
      await gw.close();
    }
  });
});

describe('the entry file', () => {
  it('starts API and worker with ROLE=all, serves, and exits 0 on SIGTERM', async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    const sim = await startRpcSimulator({ chain });
    const [port, metricsPort] = [await freePort(), await freePort()];
    const prefix = uniquePrefix();
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    let child: MainProcess | undefined;
    try {
      child = await spawnMain({
        REDIS_URL: inject('redisUrl'),
        RPC_URL: sim.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        WORKER_METRICS_PORT: String(metricsPort),
        QUEUE_PREFIX: prefix,
        ROLE: 'all',
      });
      const base = `http://127.0.0.1:${port}`;
      expect((await getJson(base, '/subdomains/67679')).body.result).toEqual([
        'bullish',
        'hollaaa',
        'testing',
      ]);
      const workerMetrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) =>
        r.text(),
      );
      expect(workerMetrics).toContain('sns_refresh_jobs_total{outcome="completed"} 1');
      expect((await child.kill('SIGTERM')).code).toBe(0);
      expect(child.output()).toContain('shut down cleanly');
    } finally {
      await child?.kill('SIGKILL');
      await sim.close();
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  });

  it('refuses to start on a bad variable, naming it', async () => {
    const { code, output } = await runMain({ PORT: 'not-a-port' });
    expect(code).toBe(2);
    expect(output).toContain('PORT:');
  });
});

describe('closing with open connections', () => {
  it('ends a keep-alive connection with the answer that was in flight when closing began', async () => {
    const gw = await startGateway();
    const agent = new Agent({ keepAlive: true });
    try {
      gw.sim.setFaults([{ kind: 'delay', ms: 600 }]);
      const url = new URL(`${gw.baseUrl}/subdomains/67679`);
      const answered = new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
        get(url, { agent }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode, connection: res.headers.connection }),
          );
        }).on('error', reject);
      });
      // The API has counted the miss: the request waits for its refresh, which the simulator
      // holds for 600 ms (its call is recorded only when answered, so it cannot be waited on).
      await waitFor(async () => {
        const lookups = await gw.metrics.registry.getSingleMetric('sns_cache_lookups_total')?.get();
        return lookups?.values.some((v) => v.labels.result === 'miss' && v.value === 1) === true;
      });
      const started = Date.now();
      const closing = gw.api.close();
      // Without `Connection: close` the client would keep the socket for the keep-alive time-out
      // (72 s), and close() would wait for it.
      expect(await answered).toEqual({ status: 200, connection: 'close' });
      await closing;
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      agent.destroy();
      await gw.worker?.close();
      await gw.close().catch(() => undefined);
    }
  });

  it('does not wait for a connection that never sent a request', async () => {
    const gw = await startGateway({ worker: false });
    const url = new URL(gw.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    try {
      await new Promise((resolve) => socket.once('connect', resolve));
      const started = Date.now();
      await gw.api.close();
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      socket.destroy();
      await gw.close();
    }
  });

  it("bounds slow and silent clients with Node's request time-out, not a timer per request", async () => {
    const gw = await startGateway({ worker: false });
    try {
      const { server } = gw.api.app;
      // Node answers 408 (clientErrorHandler: the envelope) and closes a connection whose request
      // has not arrived whole within requestTimeout, a silent one included, checking all
      // connections every connectionsCheckingInterval; `timeout` would arm a socket timer.
      expect(server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
      expect(server.timeout).toBe(0);
    } finally {
      await gw.close();
    }
  });
});
