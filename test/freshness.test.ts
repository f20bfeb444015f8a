import { afterEach, describe, expect, it } from 'vitest';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { FOLLOW, labels, metric, PARENT, watched } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { spawnWorkerProcess, type MainProcess } from './support/main-process.js';
import { encodeNameAccount, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { PublicKey } from '@solana/web3.js';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { createLogger } from '../src/core/logger.js';
import { createMetrics, REFRESH_OUTCOME, WS_NOTIFICATION_OUTCOME } from '../src/core/metrics.js';
import { Registry } from 'prom-client';
import { elapse } from './support/wait.js';

/**
 * Change-driven freshness (docs/design.md, "Freshness") against the real worker, Redis and the
 * simulator over HTTP and websockets: additions by programSubscribe, deletions by existence
 * checks, slots that never go back, reconnects, and one subscriber per parent across workers.
 */

let gw: Gateway | undefined;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await gw?.close();
  gw = undefined;
});

describe('change-driven freshness', () => {
  it('patches a subdomain created on chain into the answer from its notification, without a scan', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    sim.resetCalls();
    sim.chain.addSubdomain(PARENT, 'brandnew');
    // How soon is measured by bench/freshness.ts; here, that it comes from the notification.
    await waitFor(async () => (await labels(gw as Gateway)).includes('brandnew'));
    expect(await labels(gw)).toEqual(['brandnew', 'bullish', 'hollaaa', 'testing']);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    expect(
      await metric(gw, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.patched }),
    ).toBe(1);
    expect(await metric(gw, 'sns_ws_connected')).toBe(1);
    // One programSubscribe over the whole program and one logsSubscribe, whatever the parents.
    expect(await metric(gw, 'sns_ws_subscriptions')).toBe(2);
    expect(
      await metric(gw, 'sns_rpc_credits_total', { method: 'wsConnection' }),
    ).toBeGreaterThanOrEqual(1);
    expect(await metric(gw, 'sns_ws_received_bytes_total')).toBeGreaterThan(0);
  });

  it("keeps each subdomain's owner, following a transfer from its notification without a scan", async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    const first = new PublicKey(Buffer.alloc(32, 1));
    const keys = sim.chain.addSubdomain(PARENT, 'moving', { owner: first });
    await waitFor(async () => (await labels(gw as Gateway)).includes('moving'));
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 15_000, 600_000);
    const member = async () =>
      (await cache.getWithAccounts(endpointId(sim.url), PARENT))?.accounts?.[
        keys.subKey.toBase58()
      ];
    expect(await member()).toEqual(['moving', first.toBase58()]);
    sim.resetCalls();
    const next = new PublicKey(Buffer.alloc(32, 2));
    const account = sim.chain.getAccount(keys.subKey);
    sim.chain.setAccount(keys.subKey, {
      data: encodeNameAccount(
        { parent: keys.parentKey, owner: next, nameClass: PublicKey.default },
        Buffer.from(account?.data ?? []).subarray(96),
      ),
    });
    await waitFor(async () => (await member())?.[1] === next.toBase58());
    expect(sim.callCount('getProgramAccounts')).toBe(0);
  });

  it('re-reads at the notification slot what it cannot prove, waiting out a lagging node', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    sim.setHttpLagMs(600);
    sim.resetCalls();
    const long = 'a-label-longer-than-the-inline-slice-of-thirty-bytes';
    const before = sim.chain.slot;
    sim.chain.addSubdomain(PARENT, long);
    await waitFor(async () => (await labels(gw as Gateway)).includes(long));
    const scans = sim.calls.filter((c) => c.method === 'getProgramAccounts');
    const config = (scans[0]?.params as unknown[])[1] as { minContextSlot?: number };
    // The reverse record's slot: one of the two writes of the creation.
    expect(config.minContextSlot).toBeGreaterThan(before);
    expect(config.minContextSlot).toBeLessThanOrEqual(before + 2);
    // The lagging node answered -32016 first: retried, counted as behind, not as a failure.
    expect(await metric(gw, 'sns_rpc_requests_total', { outcome: 'behind' })).toBeGreaterThan(0);
    expect(await metric(gw, 'sns_refresh_jobs_total', { outcome: REFRESH_OUTCOME.failed })).toBe(0);
    expect(
      await metric(gw, 'sns_ws_notifications_total', { outcome: WS_NOTIFICATION_OUTCOME.reread }),
    ).toBe(1);
    // Never backwards: every answer from now on holds the label, lagging node or not.
    for (let i = 0; i < 20; i++) expect(await labels(gw)).toContain(long);
  });

  it('drops a deleted subdomain from its transaction (logs, then getTransaction), without a scan', async () => {
    gw = await startGateway({ env: { ...FOLLOW, CACHE_FRESH_SECONDS: '3' } });
    const { sim } = gw;
    await watched(gw, sim);
    sim.resetCalls();
    sim.chain.deleteSubdomain(PARENT, 'bullish');
    await waitFor(async () => !(await labels(gw as Gateway)).includes('bullish'), 2_000);
    expect(await labels(gw)).toEqual(['hollaaa', 'testing']);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    expect(sim.callCount('getTransaction')).toBe(1);
    const [, config] = sim.calls.find((c) => c.method === 'getTransaction')?.params as [
      string,
      Record<string, unknown>,
    ];
    expect(config).toEqual({
      encoding: 'json',
      maxSupportedTransactionVersion: 0,
      commitment: 'confirmed',
    });
  });

  it('retries a deleting transaction a lagging node does not have yet', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    sim.setTransactionLagMs(1_200);
    sim.resetCalls();
    sim.chain.deleteSubdomain(PARENT, 'hollaaa');
    await waitFor(async () => !(await labels(gw as Gateway)).includes('hollaaa'), 5_000);
    expect(sim.callCount('getTransaction')).toBeGreaterThan(1);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
  });

  it('keeps a quiet parent fresh without clock refreshes, its existence checks backing off', async () => {
    gw = await startGateway({ env: { ...FOLLOW, CACHE_FRESH_SECONDS: '3' } });
    const { sim } = gw;
    await watched(gw, sim);
    sim.resetCalls();
    const before = await metric(gw, 'sns_rpc_credits_total');
    const windows = 3;
    const until = Date.now() + windows * 3_000;
    while (Date.now() < until) {
      const res = await gw.get(`/subdomains/${PARENT}`);
      expect(res.headers.get('x-cache')).toBe('HIT');
      await elapse(100);
    }
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    const spent = (await metric(gw, 'sns_rpc_credits_total')) - before;
    // Existence checks wait a window, then twice as long each time: at 3 s and 9 s here, one
    // getMultipleAccounts each (and the silence probe, at most one).
    expect(spent).toBeLessThanOrEqual(3);
    expect(sim.callCount('getMultipleAccounts')).toBeLessThanOrEqual(2);
  });

  it('reconnects after the provider drops the socket, reads the gap, and follows on', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    const accepted = sim.wsStats().accepted;
    sim.resetCalls();
    expect(sim.dropSockets()).toBeGreaterThanOrEqual(1);
    await waitFor(() => sim.wsStats().accepted > accepted && sim.wsStats().subscriptions >= 2);
    // What happened in the gap is read (the transactions since the last one seen), not every
    // parent scanned again.
    await waitFor(() => sim.callCount('getSignaturesForAddress') >= 1);
    expect(sim.callCount('getProgramAccounts')).toBe(0);
    sim.chain.addSubdomain(PARENT, 'afterdrop');
    await waitFor(async () => (await labels(gw as Gateway)).includes('afterdrop'));
    expect(await metric(gw, 'sns_ws_reconnects_total')).toBeGreaterThanOrEqual(1);
  });

  it('notices a socket that went silent (no pongs) and opens another', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    const accepted = sim.wsStats().accepted;
    sim.freezeSockets();
    await waitFor(() => sim.wsStats().accepted > accepted, 5_000);
    await waitFor(() => sim.wsStats().subscriptions >= 1, 5_000);
  });

  it('does not take a process too busy to read its socket for a silent socket', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    const { accepted, pings } = sim.wsStats();
    // The whole process (gateway and simulator) held for three ping intervals, as a long
    // synchronous stretch or a starved core holds it: time is the subject, and no timer may run.
    const heldUntil = Date.now() + 3 * gw.config.RPC_WS_PING_MS;
    while (Date.now() < heldUntil);
    // Three pings on, a socket taken for silent would have been replaced.
    await waitFor(() => sim.wsStats().pings >= pings + 3, 10_000);
    expect(sim.wsStats().accepted).toBe(accepted);
    expect(await metric(gw, 'sns_ws_reconnects_total')).toBe(0);
  });

  it('behaves as before without a websocket: no socket, hot parents refreshed by the clock', async () => {
    gw = await startGateway({
      env: { ...FOLLOW, RPC_WS: 'off', CACHE_FRESH_SECONDS: '2', CACHE_STALE_SECONDS: '4' },
    });
    const { sim } = gw;
    await labels(gw);
    sim.chain.addSubdomain(PARENT, 'byclock');
    await waitFor(async () => (await labels(gw as Gateway)).includes('byclock'), 5_000);
    expect(sim.wsStats().accepted).toBe(0);
    expect(gw.worker?.websocket()).toBe('off');
    expect((await gw.get('/readyz')).body).toMatchObject({ parts: { websocket: 'off' } });
  });

  it('falls back to the clock when the provider refuses websockets', async () => {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    cleanups.push(() => sim.close());
    sim.setWebsocketAvailable(false);
    gw = await startGateway({
      sim,
      env: { ...FOLLOW, CACHE_FRESH_SECONDS: '2', CACHE_STALE_SECONDS: '4' },
    });
    await labels(gw);
    sim.chain.addSubdomain(PARENT, 'byclock');
    await waitFor(async () => (await labels(gw as Gateway)).includes('byclock'), 5_000);
    expect(gw.worker?.websocket()).toBe('disconnected');
    expect(sim.wsStats().subscriptions).toBe(0);
  });
});

describe('several workers', () => {
  it('has one stream across workers, and another worker takes it over when its owner dies', async () => {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    cleanups.push(() => sim.close());
    // The API alone in this process, then a worker in a child process (the one to kill).
    gw = await startGateway({ sim, worker: false, env: FOLLOW });
    const env = {
      ...Object.fromEntries(Object.entries(FOLLOW)),
      REDIS_URL: gw.config.REDIS_URL,
      QUEUE_PREFIX: gw.config.QUEUE_PREFIX,
      RPC_URL: sim.url,
      RPC_WS_URL: sim.wsUrl,
    };
    const first: MainProcess = await spawnWorkerProcess(env);
    cleanups.push(() => first.kill('SIGKILL'));
    await waitFor(async () => {
      await gw?.get(`/subdomains/${PARENT}`);
      return sim.wsStats().subscriptions === 2;
    }, 15_000);
    // A second worker in this process: the stream is leased, so it opens no socket.
    const second: WorkerRuntime = await startWorker(
      gw.config,
      createMetrics(new Registry()),
      createLogger('silent'),
      { serveMetrics: false },
    );
    cleanups.push(() => second.close());
    await elapse(2_000);
    expect(sim.wsStats().subscriptions).toBe(2);
    expect(sim.wsStats().connections).toBe(1);

    const accepted = sim.wsStats().accepted;
    await first.kill('SIGKILL');
    // Within the lease (1.5 s here) and a tick, give or take a loaded machine.
    await waitFor(
      () =>
        sim.wsStats().accepted > accepted &&
        sim.wsStats().subscriptions === 2 &&
        sim.wsStats().connections === 1,
    );
    sim.chain.addSubdomain(PARENT, 'takenover');
    await waitFor(async () => (await labels(gw as Gateway)).includes('takenover'));
  });
});
