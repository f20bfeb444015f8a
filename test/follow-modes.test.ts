import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { readFollowStatus } from '../src/core/cache/follow-status.js';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { FOLLOW, indexServing, PARENT, watched } from './support/freshness.js';
import { seedDemo, startGateway, type Gateway } from './support/gateway.js';
import { elapse, waitFor } from './support/wait.js';

/**
 * The stream down a mode and back (docs/design.md, "Modes", "Gaps"): while a provider refuses the
 * whole-program subscription only the hot parents' accounts come (`parents` mode), though the logs
 * still flow; a change under another parent reaches neither its entry nor the registry index. When
 * the whole program is followed again (here by another worker taking the stream over) the stream
 * must not vouch for them before it has read what happened meanwhile.
 */

let gw: Gateway | undefined;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await gw?.close();
  gw = undefined;
});

/**
 * A websocket provider in front of the simulator's that, while `refuseWhole` is set, refuses the
 * unfiltered `programSubscribe` (as providers do that allow only filtered ones) and passes
 * everything else through; `drop` closes every socket it holds, as a provider dropping them.
 */
async function wsProxy(target: string) {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => wss.once('listening', resolve));
  const state = { refuseWhole: false };
  wss.on('connection', (client) => {
    const upstream = new WebSocket(target);
    const waiting: string[] = [];
    const closeBoth = () => {
      client.terminate();
      upstream.terminate();
    };
    upstream.on('open', () => {
      for (const text of waiting.splice(0)) upstream.send(text);
    });
    upstream.on('message', (data: Buffer) => {
      if (client.readyState === WebSocket.OPEN) client.send(data.toString());
    });
    for (const socket of [client, upstream]) {
      socket.on('close', closeBoth);
      socket.on('error', closeBoth);
    }
    client.on('message', (data: Buffer) => {
      const text = data.toString();
      const msg = JSON.parse(text) as { id?: unknown; method?: unknown; params?: unknown[] };
      const config = msg.params?.[1] as { filters?: unknown } | undefined;
      if (state.refuseWhole && msg.method === 'programSubscribe' && !config?.filters) {
        const error = { code: -32602, message: 'programSubscribe needs a filter' };
        client.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error }));
        return;
      }
      if (upstream.readyState === WebSocket.OPEN) upstream.send(text);
      else waiting.push(text);
    });
  });
  return {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    state,
    drop: () => {
      for (const client of wss.clients) client.terminate();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close(() => resolve());
      }),
  };
}

/** A worker of the gateway's configuration in this process, closed after the test. */
async function worker(g: Gateway): Promise<WorkerRuntime> {
  const runtime = await startWorker(
    g.config,
    createMetrics(new Registry()),
    createLogger('silent'),
    {
      serveMetrics: false,
    },
  );
  cleanups.push(() => runtime.close());
  return runtime;
}

/** Whether the stored follow status says `mode`, and vouches when `healthy`. */
const statusIs = async (g: Gateway, mode: string, healthy: boolean) => {
  const status = await readFollowStatus(g.redis, g.config.QUEUE_PREFIX);
  return status?.mode === mode && status.healthyUntil > Date.now() === healthy;
};

/**
 * Waits until the owner has written the follow status again after now: its time to live (renewed
 * by each beat's write) is longer than it would be had nothing written it since.
 */
async function statusWrittenAgain(g: Gateway): Promise<void> {
  const key = redisKeys(g.config.QUEUE_PREFIX).followStatus;
  const from = Date.now();
  const ttl = await g.redis.pttl(key);
  await waitFor(async () => (await g.redis.pttl(key)) > ttl - (Date.now() - from) + 200);
}

describe('the whole program followed again after parents mode', () => {
  // No parent is hot (the test is one client, fewer than HOT_KEYS_MIN_CLIENTS): in `parents` mode
  // no parent's accounts come, only the logs.
  const AWAY = { ...FOLLOW, HOT_KEYS_MIN_CLIENTS: '2', CACHE_FRESH_SECONDS: '4' } as const;

  /**
   * While away: `whileaway` created under {@link PARENT}, then `testing` deleted; returns once the
   * Delete's transaction was read (the logs' one reader in this mode), so the logs before it were
   * taken in too.
   */
  const createdAndDeleted = async (sim: RpcSimulator) => {
    sim.chain.addSubdomain(PARENT, 'whileaway');
    const reads = sim.callCount('getTransaction');
    sim.chain.deleteSubdomain(PARENT, 'testing');
    await waitFor(async () => sim.callCount('getTransaction') > reads, 10_000);
  };

  /**
   * A gateway whose first worker follows the whole program through {@link wsProxy}; `ready` runs
   * once the stream vouches. Then the provider refuses the whole-program stream and drops the
   * socket (`parents` mode), `away` changes the chain, and the status is written after its logs
   * were read; then the provider takes the whole program again and another worker takes the
   * stream over. Returns once it vouches.
   */
  async function awayAndBack(
    env: Record<string, string>,
    ready: (g: Gateway, sim: RpcSimulator) => Promise<void>,
    away: (sim: RpcSimulator) => Promise<void>,
  ): Promise<Gateway> {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    cleanups.push(() => sim.close());
    const proxy = await wsProxy(sim.wsUrl);
    cleanups.push(() => proxy.close());
    const g = await startGateway({ sim, worker: false, env: { ...env, RPC_WS_URL: proxy.url } });
    gw = g;
    const first = await worker(g);
    await waitFor(() => statusIs(g, 'program', true), 15_000);
    await ready(g, sim);

    proxy.state.refuseWhole = true;
    proxy.drop();
    await waitFor(() => statusIs(g, 'parents', false), 15_000);
    await away(sim);
    await statusWrittenAgain(g);

    proxy.state.refuseWhole = false;
    await first.close();
    await worker(g);
    await waitFor(() => statusIs(g, 'program', true), 20_000);
    return g;
  }

  it('never answers a followed entry fresh without a subdomain created while only hot parents were followed', async () => {
    let scannedBy = 0;
    const g = await awayAndBack(
      AWAY,
      async (g, sim) => {
        await watched(g, sim);
        // The entry's scan began before this: it is past its window once this is.
        scannedBy = Date.now();
      },
      createdAndDeleted,
    );
    // Past the window of the scan, the entry is a hit only by following.
    await elapse(Math.max(0, scannedBy + g.config.CACHE_FRESH_MS + 100 - Date.now()));
    const res = await g.get(`/subdomains/${PARENT}`);
    expect({ cache: res.headers.get('x-cache'), labels: res.body.result }).toEqual({
      cache: 'HIT',
      labels: ['bullish', 'hollaaa', 'whileaway'],
    });
  }, 90_000);

  it('never serves the registry index without a subdomain created while only hot parents were followed', async () => {
    const g = await awayAndBack(
      { ...AWAY, SUBDOMAIN_INDEX: 'registry' },
      async (g) => indexServing(g),
      createdAndDeleted,
    );
    await indexServing(g);
    const res = await g.get(`/subdomains/${PARENT}`);
    expect({ cache: res.headers.get('x-cache'), labels: res.body.result }).toEqual({
      cache: 'HIT',
      labels: ['bullish', 'hollaaa', 'whileaway'],
    });
  }, 120_000);
});
