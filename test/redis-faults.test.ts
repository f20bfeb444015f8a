import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { startWorker } from '../worker/runtime.js';
import { startGateway, waitFor, type Gateway, type Reply } from './support/gateway.js';
import { hasBinary } from './support/programs.js';
import { startPrivateRedis, type PrivateRedis } from './support/private-redis.js';
import { elapse } from './support/wait.js';

/**
 * Redis faults (docs/design.md, "Shape": derivations need no Redis; the subdomain route fails fast
 * with the envelope): a private redis-server is SIGKILLed and restarted under the API and the
 * worker. The shared test Redis is never touched. Any unhandled error or rejection in the gateway
 * would fail the vitest run: the test process is the gateway's process.
 */

type Sample = {
  kind: 'derive' | 'warm' | 'cold';
  sentAt: number;
  ms: number;
  reply: Reply | Error;
};

/** An inspection connection to the private Redis that survives its restarts quietly. */
function inspector(url: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  redis.on('error', () => undefined);
  return redis;
}

/** The gateway on the private Redis (startGateway keeps its inspection connection quiet). */
async function gatewayOn(server: PrivateRedis, opts: Parameters<typeof startGateway>[0] = {}) {
  return startGateway({ ...opts, env: { REDIS_URL: server.url, ...opts.env } });
}

/**
 * Closes the gateway with Redis up (its close deletes the test's keys), whatever happened. After a
 * restart it first waits for a refresh to go through: BullMQ's `Worker.close()` never returns
 * while the worker's blocking connection is still reconnecting.
 */
async function closeOn(server: PrivateRedis, gw: Gateway): Promise<void> {
  if (!server.running) {
    await server.start();
    if (gw.worker) {
      await waitFor(async () => (await gw.get('/readyz')).status === 200, 15_000);
      await gw.get(`/subdomains/closing-${Date.now()}`, { signal: AbortSignal.timeout(20_000) });
    }
  }
  await gw.close();
}

const available = hasBinary('redis-server');
if (!available) console.warn('Redis fault tests skipped: redis-server is not installed');

describe.skipIf(!available)('Redis killed and restarted under the API and the worker', () => {
  let server: PrivateRedis;
  beforeAll(async () => {
    server = await startPrivateRedis();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('keeps derivations up, fails subdomain requests fast, and recovers by itself', async () => {
    const waitMs = 5_000;
    const gw: Gateway = await gatewayOn(server, {
      env: {
        SUBDOMAINS_WAIT_MS: String(waitMs),
        RPC_MAX_PER_SECOND: '1000',
        COLD_MISS_LIMIT: '1000000',
      },
    });
    const samples: Sample[] = [];
    const pending: Array<Promise<void>> = [];
    const probe = (kind: Sample['kind'], path: string) => {
      const sentAt = Date.now();
      pending.push(
        gw
          .get(path, { signal: AbortSignal.timeout(15_000) })
          .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))))
          .then((reply) => void samples.push({ kind, sentAt, ms: Date.now() - sentAt, reply })),
      );
    };
    try {
      expect((await gw.get('/subdomains/67679')).body.result).toEqual([
        'bullish',
        'hollaaa',
        'testing',
      ]);
      expect((await gw.get('/readyz')).status).toBe(200);

      // A steady trickle: a derivation, a warm hit and a cold parent every 40 ms, not awaited.
      let tick = 0;
      const trickle = setInterval(() => {
        tick++;
        probe('derive', '/record-key-v2/bonfida/SOL');
        probe('warm', '/subdomains/67679');
        probe('cold', `/subdomains/cold-${tick}`);
      }, 40);
      try {
        await elapse(400);
        const killedAt = Date.now();
        await server.stop();
        await waitFor(async () => (await gw.get('/readyz')).status === 503, 3_000);
        const notReadyAt = Date.now();
        expect(notReadyAt - killedAt).toBeLessThan(2_000);
        // Longer than the worker's blocking timeout (BullMQ: drainDelay 5 s + 1 s), after which
        // a BullMQ worker used to stay parked in "reconnecting" for good.
        await elapse(7_000);
        const restartAt = Date.now();
        await server.start();
        await waitFor(async () => (await gw.get('/readyz')).status === 200, 15_000);
        const readyAgainAt = Date.now();
        // The trickle goes on until a few warm hits sent after the restart have their answer.
        await waitFor(
          () =>
            samples.filter((s) => s.kind === 'warm' && s.sentAt >= readyAgainAt + 100).length > 3,
          15_000,
        );
        clearInterval(trickle);
        await Promise.all(pending);

        for (const s of samples) {
          const what = `${s.kind} sent ${s.sentAt - killedAt} ms after the kill`;
          if (s.reply instanceof Error) throw new Error(`${what}: no answer (${s.reply.message})`);
          if (s.kind === 'derive') {
            // Derivations never need Redis.
            expect(s.reply, what).toMatchObject({ status: 200, body: { s: 'ok' } });
            continue;
          }
          expect([200, 500, 502, 503], what).toContain(s.reply.status);
          const results: Record<number, string> = {
            500: 'Internal error',
            502: 'RPC unavailable',
            503: 'Service unavailable',
          };
          if (s.reply.status !== 200) {
            expect(s.reply.body, what).toEqual({ s: 'error', result: results[s.reply.status] });
          }
          const endedAt = s.sentAt + s.ms;
          if (s.reply.status === 503) {
            // A request waiting for its refresh when the connection dropped: retry later, when
            // the refresh, a job in Redis, completes once Redis is back.
            expect(s.sentAt, what).toBeLessThan(notReadyAt);
            expect(endedAt, what).toBeGreaterThanOrEqual(killedAt);
            expect(Number(s.reply.headers.get('retry-after')), what).toBeGreaterThanOrEqual(1);
          }
          if (s.sentAt < killedAt && endedAt > killedAt) {
            // In flight at the kill: a request waiting for its refresh is released at once, one
            // with a Redis command in flight when the connection dropped within the command
            // time-out (2 s).
            expect(endedAt - killedAt, what).toBeLessThan(2_000 + 1_000);
          }
          const outage = s.sentAt >= notReadyAt && endedAt < restartAt;
          if (outage) {
            // While Redis is down every subdomain request fails fast with 500.
            expect(s.reply.status, what).toBe(500);
            expect(s.ms, what).toBeLessThan(1_000);
          } else if (s.sentAt > killedAt && s.sentAt < readyAgainAt) {
            // Around the kill and the restart: an answer, never later than the wait bound.
            expect(s.ms, what).toBeLessThan(waitMs + 1_000);
          }
        }
        const during = samples.filter((s) => s.sentAt >= notReadyAt && s.sentAt < restartAt);
        expect(during.filter((s) => s.kind === 'warm').length).toBeGreaterThan(10);
        const after = samples.filter((s) => s.sentAt >= readyAgainAt + 100);
        expect(after.filter((s) => s.kind === 'warm').length).toBeGreaterThan(3);
        for (const s of after) {
          expect(s.reply, `${s.kind} after the restart`).toMatchObject({ status: 200 });
        }
      } finally {
        clearInterval(trickle);
        await Promise.all(pending);
      }

      // The worker is back too: a cold parent is answered by a refresh (the API never calls the
      // RPC; refreshes of the trickle's cold parents may still be running, so no call count).
      const cold = await gw.get('/subdomains/demo');
      expect(cold).toMatchObject({
        status: 200,
        body: { s: 'ok', result: ['alpha', 'beta', 'gamma'] },
      });
      expect(cold.headers.get('x-cache')).toBe('MISS');
    } finally {
      await closeOn(server, gw);
    }
  });

  it('answers a cold request waiting on its refresh at once with 503 and Retry-After when Redis dies, and the refresh completes after', async () => {
    const gw = await gatewayOn(server, {
      env: {
        // The default wait: without release on disconnect the request would hang this long.
        SUBDOMAINS_WAIT_MS: '15000',
        RPC_TIMEOUT_MS: '1500',
      },
    });
    try {
      // The refresh's first getProgramAccounts hangs (the simulator counts it on arrival) until
      // the RPC client times out and retries; Redis is killed while the request waits for it.
      gw.sim.setFaults([{ kind: 'hang', method: 'getProgramAccounts', times: 1 }]);
      const waiting = gw.get('/subdomains/demo', { signal: AbortSignal.timeout(20_000) });
      await waitFor(() => gw.sim.callCount('getProgramAccounts') === 1);
      await server.stop();
      const killedAt = Date.now();
      // A dependency gone for a while, not a fault of the request or the gateway: 503, and a
      // retry after Retry-After finds the refresh done once Redis is back.
      const reply = await waiting;
      expect(reply).toMatchObject({
        status: 503,
        body: { s: 'error', result: 'Service unavailable' },
      });
      expect(Number(reply.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Date.now() - killedAt).toBeLessThan(1_000);

      await server.start();
      await waitFor(async () => (await gw.get('/readyz')).status === 200, 15_000);
      // Nothing lost: the job was in Redis (append-only file) and the worker completes it.
      await waitFor(async () => (await gw.get('/subdomains/demo')).status === 200, 15_000);
      expect((await gw.get('/subdomains/demo')).body.result).toEqual(['alpha', 'beta', 'gamma']);
    } finally {
      await closeOn(server, gw);
    }
  });

  it('bounds a cold request whose refresh is being queued when Redis stalls and dies', async () => {
    const gw = await gatewayOn(server, {
      env: { SUBDOMAINS_WAIT_MS: '15000' },
    });
    const inspect = inspector(server.url);
    try {
      expect((await gw.get('/readyz')).status).toBe(200);
      // Redis stops executing writes (reads go on): the cold request gets past its cache read
      // and deduplication check, then waits on the queueing of its refresh...
      await inspect.call('CLIENT', 'PAUSE', '60000', 'WRITE');
      const sentAt = Date.now();
      const waiting = gw.get('/subdomains/demo', { signal: AbortSignal.timeout(25_000) });
      await elapse(3_000);
      // ...when Redis dies. The request must still get its answer within the command bound.
      await server.stop();
      const reply = await waiting;
      expect(reply).toMatchObject({ status: 500, body: { s: 'error', result: 'Internal error' } });
      expect(Date.now() - sentAt).toBeLessThan(3_000 + 3_000);
    } finally {
      inspect.disconnect();
      await closeOn(server, gw);
    }
  });

  it('answers within the command time-out while Redis stalls, and serves again when it resumes', async () => {
    const gw = await gatewayOn(server, { env: { SUBDOMAINS_WAIT_MS: '3000' } });
    const timed = async (path: string) => {
      const sentAt = Date.now();
      const reply = await gw.get(path, { signal: AbortSignal.timeout(10_000) });
      return { reply, ms: Date.now() - sentAt };
    };
    try {
      expect((await gw.get('/subdomains/67679')).status).toBe(200);
      // A stalled Redis keeps its connections open and answers nothing: no reset tells the
      // clients, only the commands' own time-out (2 s) does.
      server.pause();
      try {
        const [derive, warm, cold, ready] = await Promise.all([
          timed('/record-key-v2/bonfida/SOL'),
          timed('/subdomains/67679'),
          timed('/subdomains/stalled-cold'),
          timed('/readyz'),
        ]);
        expect(derive.reply).toMatchObject({ status: 200, body: { s: 'ok' } });
        expect(derive.ms).toBeLessThan(1_000);
        // The warm key is served from the API's in-process copy (still fresh, and no event was
        // missed: a stalled Redis drops no connection); the cold one fails fast.
        expect(warm.reply).toMatchObject({
          status: 200,
          body: { s: 'ok', result: ['bullish', 'hollaaa', 'testing'] },
        });
        expect(warm.ms).toBeLessThan(1_000);
        expect(cold.reply).toMatchObject({
          status: 500,
          body: { s: 'error', result: 'Internal error' },
        });
        expect(cold.ms).toBeLessThan(2_000 + 1_500);
        expect(ready.reply.status).toBe(503);
        expect(ready.ms).toBeLessThan(2_000 + 1_500);
      } finally {
        server.resume();
      }
      await waitFor(async () => (await gw.get('/readyz')).status === 200, 10_000);
      expect((await gw.get('/subdomains/67679')).body.result).toEqual([
        'bullish',
        'hollaaa',
        'testing',
      ]);
      expect((await gw.get('/subdomains/demo')).body.result).toEqual(['alpha', 'beta', 'gamma']);
    } finally {
      await closeOn(server, gw);
    }
  });

  it('keeps a refresh queued while no worker runs across a Redis restart, and completes it after', async () => {
    const gw = await gatewayOn(server, { worker: false, env: { SUBDOMAINS_WAIT_MS: '200' } });
    const inspect = inspector(server.url);
    const logger = pino({ level: 'silent' });
    const prefix = gw.config.QUEUE_PREFIX;
    let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      // No worker: the request gives up waiting (502), the job stays queued.
      expect(await gw.get('/subdomains/demo')).toMatchObject({
        status: 502,
        body: { s: 'error', result: 'RPC unavailable' },
      });
      expect(await inspect.zcard(`${prefix}:${REFRESH_QUEUE}:prioritized`)).toBe(1);

      await server.stop();
      await server.start();
      await waitFor(async () => (await gw.get('/readyz')).status === 200, 15_000);
      // The append-only file brought the job back.
      await waitFor(
        async () => (await inspect.zcard(`${prefix}:${REFRESH_QUEUE}:prioritized`)) === 1,
      );
      expect(gw.sim.callCount('getProgramAccounts')).toBe(0);

      worker = await startWorker(gw.config, gw.metrics, logger, { serveMetrics: false });
      const cacheKeys = async () => inspect.keys(`${prefix}:entry:*`);
      await waitFor(async () => (await cacheKeys()).length === 1);
      const reply = await gw.get('/subdomains/demo');
      expect(reply).toMatchObject({ status: 200, body: { result: ['alpha', 'beta', 'gamma'] } });
      expect(reply.headers.get('x-cache')).toBe('HIT');
      expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
      expect(await inspect.zcard(`${prefix}:${REFRESH_QUEUE}:completed`)).toBe(1);
      expect(await inspect.zcard(`${prefix}:${REFRESH_QUEUE}:prioritized`)).toBe(0);
    } finally {
      await worker?.close();
      await closeOn(server, gw);
      inspect.disconnect();
    }
  });
});
