import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { LookupFunction } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Cluster, Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/core/config.js';
import { createLogger } from '../../src/core/logger.js';
import { createMetrics, type Metrics } from '../../src/core/metrics.js';
import type { HostResolver } from '../../src/core/rpc/endpoint.js';
import type { RedisClient } from '../../src/core/redis.js';
import { startApi, type ApiRuntime } from '../../src/api/runtime.js';
import { startWorker, type WorkerRuntime } from '../../worker/runtime.js';
import { deletePrefix } from './redis-keys.js';
export { waitFor } from './wait.js';
import { inDatabase } from './shared-redis.js';
import {
  seedDemoChain,
  SimChain,
  startRpcSimulator,
  type RpcSimulator,
} from '../../tools/rpc-sim/index.js';

export type Reply = { status: number; headers: Headers; body: { s: string; result: unknown } };

export type Gateway = {
  config: Config;
  sim: RpcSimulator;
  api: ApiRuntime;
  worker: WorkerRuntime | undefined;
  metrics: Metrics;
  /** A command connection of the test's own, for looking at what the gateway wrote. */
  redis: RedisClient;
  baseUrl: string;
  /** The API's `/metrics` URL (on `API_METRICS_PORT`, not the public port). */
  metricsUrl: string;
  /** Every log line the gateway wrote, as text. */
  logs: string[];
  get(path: string, init?: RequestInit): Promise<Reply>;
  close(): Promise<void>;
};

/** A key prefix no other test (nor anything else on this Redis) uses. */
export const uniquePrefix = () => `snsgw-test-${process.pid}-${randomBytes(4).toString('hex')}`;

export { deletePrefix };

/** The loopback URL a listening app answers on. */
export function baseUrlOf(app: FastifyInstance): string {
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on TCP');
  return `http://127.0.0.1:${address.port}`;
}

/** GETs `baseUrl + path` over real HTTP and parses the JSON envelope. */
export async function getJson(baseUrl: string, path: string, init?: RequestInit): Promise<Reply> {
  const res = await fetch(baseUrl + path, init);
  const text = await res.text();
  let body: Reply['body'];
  try {
    body = JSON.parse(text) as Reply['body'];
  } catch {
    throw new Error(`${path}: HTTP ${res.status} with a non-JSON body: ${text.slice(0, 200)}`);
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * The configuration of a gateway under test: the test Redis, a fresh key prefix, ephemeral
 * loopback ports, short retries; `env` overrides any of it.
 */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    // On a cluster REDIS_URL carries credentials only, and the database is 0, the only one.
    REDIS_URL: env.REDIS_CLUSTER_NODES ? inDatabase(inject('redisUrl'), 0) : inject('redisUrl'),
    QUEUE_PREFIX: uniquePrefix(),
    PORT: '0',
    HOST: '127.0.0.1',
    WORKER_METRICS_PORT: '0',
    API_METRICS_PORT: '0',
    LOG_LEVEL: 'info',
    RPC_RETRIES: '1',
    JOB_BACKOFF_MS: '200',
    SUBDOMAINS_WAIT_MS: '10000',
    // Each test that follows the chain turns it on (test/freshness.test.ts); the others count
    // the RPC calls of clock-driven refreshes, and keep the behaviour of a provider without one.
    RPC_WS: 'off',
    ...env,
  });
}

/**
 * Starts the real API (listening on an ephemeral loopback port) and, unless told otherwise, the
 * real BullMQ worker, on the test Redis under a unique prefix, against a loopback RPC simulator
 * seeded with the demo chain. `env` overrides configuration variables.
 */
export async function startGateway(
  opts: {
    env?: Record<string, string>;
    worker?: boolean;
    sim?: RpcSimulator;
    chain?: SimChain;
    /** DNS stub for the API's `?rpc=` check. */
    resolveHost?: HostResolver;
    /** DNS stub for the worker's RPC connections. */
    lookup?: LookupFunction;
    /** Milliseconds between the event streams' heartbeats (15 s when absent). */
    sseHeartbeatMs?: number;
    /** Each process's own clock (`Date.now` when absent): tests skew them. */
    clocks?: { api?: () => number; worker?: () => number };
  } = {},
): Promise<Gateway> {
  const ownSim = !opts.sim;
  const sim = opts.sim ?? (await startRpcSimulator({ chain: opts.chain ?? seedDemo() }));
  const config = testConfig({ RPC_URL: sim.url, RPC_WS_URL: sim.wsUrl, ...opts.env });
  const logs: string[] = [];
  const logger = createLogger(
    config.LOG_LEVEL,
    new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(chunk.toString());
        done();
      },
    }),
  );
  const metrics = createMetrics(new Registry());
  const api = await startApi(config, metrics, logger, {
    resolveHost: opts.resolveHost,
    sseHeartbeatMs: opts.sseHeartbeatMs,
    clock: opts.clocks?.api,
  });
  const worker =
    opts.worker === false
      ? undefined
      : await startWorker(config, metrics, logger, {
          serveMetrics: false,
          lookup: opts.lookup,
          clock: opts.clocks?.worker,
        });
  const redis: RedisClient = config.REDIS_CLUSTER_NODES
    ? new Cluster([...config.REDIS_CLUSTER_NODES])
    : new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1 });
  // Tests stop Redis on purpose: the inspection connection just waits for it to come back.
  redis.on('error', () => undefined);
  const baseUrl = baseUrlOf(api.app);
  return {
    config,
    sim,
    api,
    worker,
    metrics,
    redis,
    baseUrl,
    metricsUrl: `http://127.0.0.1:${api.metricsPort ?? 0}/metrics`,
    logs,
    get: (path, init) => getJson(baseUrl, path, init),
    async close() {
      // Every step runs even when one fails (a worker closed with a job cut short throws), so a
      // test never leaves its keys behind.
      const failures: unknown[] = [];
      for (const step of [() => api.close(), () => worker?.close()]) {
        await Promise.resolve()
          .then(step)
          .catch((err: unknown) => failures.push(err));
      }
      if (ownSim) await sim.close().catch(() => undefined);
      await deletePrefix(redis, config.QUEUE_PREFIX);
      redis.disconnect();
      if (failures.length > 0) throw failures[0];
    },
  };
}

/** A chain holding the demo names (67679 with bullish, hollaaa, testing; bonfida; demo). */
export function seedDemo(): SimChain {
  const chain = new SimChain();
  seedDemoChain(chain);
  return chain;
}
