/**
 * The attacks of a hostile `?rpc=` server replayed against one process (`ROLE=all`, the entry
 * file): replies built to be expensive to parse, larger than the bound, endless, malformed, and
 * 429s asking for long waits. Through all of them the process keeps answering its probes, a cold
 * miss of the configured endpoint answers normally, its peak memory stays bounded, and a SIGTERM
 * during a hostile decode ends it within the shutdown bound. The servers are loopback ones on the
 * allowlist: they take the path a public https server takes once the SSRF policy has passed.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis } from 'ioredis';
import { deletePrefix, getJson, seedDemo, uniquePrefix } from './support/gateway.js';
import { spawnMain, type MainProcess } from './support/main-process.js';
import { ATTACK_NAMES, peakRss, startHostileRpc, type HostileRpc } from './support/hostile-rpc.js';
import { freePort } from './support/ports.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { elapse, waitFor } from './support/wait.js';

const MiB = 1024 * 1024;
const SHUTDOWN_TIMEOUT_MS = 5_000;

describe('a hostile ?rpc= server', () => {
  let hostile: HostileRpc;
  let hostileUrl: string;
  let sim: RpcSimulator;
  let gateway: MainProcess;
  let base: string;
  const prefix = uniquePrefix();
  let redis: Redis;

  beforeAll(async () => {
    hostile = await startHostileRpc();
    hostileUrl = hostile.url;
    sim = await startRpcSimulator({ chain: seedDemo() });
    const port = await freePort();
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    gateway = await spawnMain({
      ROLE: 'all',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: prefix,
      RPC_URL: sim.url,
      RPC_OVERRIDE_ALLOWLIST: hostileUrl,
      RPC_TIMEOUT_MS: '3000',
      RPC_RETRIES: '1',
      COLD_MISS_LIMIT: '10000',
      SUBDOMAINS_WAIT_MS: '8000',
      SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      LOG_LEVEL: 'info',
    });
    base = `http://127.0.0.1:${port}`;
  }, 60_000);

  afterAll(async () => {
    await gateway?.kill('SIGKILL');
    await hostile.close();
    await sim?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  /** Worst /healthz latency while `during` runs, probing every 50 ms. */
  async function probeWhile(during: Promise<unknown>): Promise<number> {
    let worst = 0;
    let done = false;
    void during.finally(() => (done = true));
    while (!done) {
      const started = performance.now();
      const reply = await getJson(base, '/healthz', { signal: AbortSignal.timeout(5_000) });
      expect(reply.status).toBe(200);
      worst = Math.max(worst, performance.now() - started);
      await elapse(50);
    }
    return worst;
  }

  let cold = 0;
  /** A cold miss of the configured endpoint: its answer, and how long it took. */
  async function defaultColdMiss(): Promise<{ status: number; ms: number }> {
    const started = performance.now();
    const reply = await getJson(base, `/subdomains/cold${cold++}`);
    return { status: reply.status, ms: performance.now() - started };
  }

  it.each(ATTACK_NAMES)(
    'keeps answering through the %s attack, the configured endpoint unharmed',
    async (attack) => {
      const rpc = encodeURIComponent(`${hostileUrl}/${attack}`);
      const before = hostile.received(attack);
      // More requests than the override lane has slots, each for its own parent (no dedup).
      const hostileRequests = Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          getJson(base, `/subdomains/${attack}${i}?rpc=${rpc}`, {
            signal: AbortSignal.timeout(30_000),
          }),
        ),
      );
      // The attack is under way: the hostile server has its first request.
      await waitFor(() => hostile.received(attack) > before, 10_000);
      const during = (async () => [await defaultColdMiss(), await defaultColdMiss()])();
      const worstProbe = await probeWhile(Promise.all([hostileRequests, during]));
      for (const miss of await during) {
        expect(miss.status).toBe(200);
        expect(miss.ms).toBeLessThan(3_000);
      }
      for (const reply of await hostileRequests) {
        expect(reply.status).toBe(502);
        expect(reply.body).toEqual({ s: 'error', result: 'RPC unavailable' });
      }
      const peak = peakRss(gateway.pid);
      const slowestMiss = Math.max(...(await during).map((m) => m.ms));
      console.log(
        `${attack}: worst /healthz ${worstProbe.toFixed(0)} ms, slowest default cold miss ` +
          `${slowestMiss.toFixed(0)} ms, peak RSS ${(peak / MiB).toFixed(0)} MiB`,
      );
      expect(worstProbe).toBeLessThan(1_000);
      expect(peak).toBeLessThan(1024 * MiB);
    },
    40_000,
  );

  it('stays within its memory bound and exits within the shutdown bound on SIGTERM mid-attack', async () => {
    const rpc = encodeURIComponent(`${hostileUrl}/junk`);
    const before = hostile.received('junk');
    const pending = Array.from({ length: 4 }, (_, i) =>
      getJson(base, `/subdomains/last${i}?rpc=${rpc}`).catch(() => undefined),
    );
    // Mid-attack: the hostile server has its first request, its reply is on the way.
    await waitFor(() => hostile.received('junk') > before, 10_000);
    const started = performance.now();
    const exit = await gateway.kill('SIGTERM');
    const took = performance.now() - started;
    await Promise.all(pending);
    expect(exit.code).toBe(0);
    expect(took).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 1_000);
  }, 30_000);
});
