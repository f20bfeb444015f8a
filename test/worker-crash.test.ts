import { Queue } from 'bullmq';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { REFRESH_JOB, REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { startWorker, type WorkerRuntime } from '../worker/runtime.js';
import { startGateway, waitFor, type Gateway, type Reply } from './support/gateway.js';
import { demoLabels } from '../tools/rpc-sim/index.js';
import { spawnWorkerProcess, type WorkerProcess } from './support/main-process.js';

/**
 * Worker crashes and shutdowns lose no refresh (docs/design.md, "The refresh queue"): a job whose
 * worker is SIGKILLed mid-refresh is taken over by another worker once its lock expires, and a
 * worker that closes gracefully finishes its active jobs and leaves the rest queued.
 */

const silent = pino({ level: 'silent' });
const LABELS = demoLabels();

/** Short lock and stalled-check period, so a dead worker's job is taken over in about 2 s. */
const FAST_STALLED = { WORKER_LOCK_MS: '1000', WORKER_STALLED_INTERVAL_MS: '500' };

/**
 * How many refresh jobs are in each state (jobs of other names, such as the hot-parent scans of a
 * job scheduler, are not counted); `wait` counts prioritized jobs too.
 */
async function queueState(gw: Gateway) {
  const queue = new Queue(REFRESH_QUEUE, { connection: gw.redis, prefix: gw.config.QUEUE_PREFIX });
  try {
    const count = async (
      state: 'wait' | 'prioritized' | 'active' | 'completed' | 'failed' | 'delayed',
    ) => (await queue.getJobs([state])).filter((job) => job.name === REFRESH_JOB).length;
    const [wait, prioritized, active, completed, failed, delayed] = await Promise.all(
      (['wait', 'prioritized', 'active', 'completed', 'failed', 'delayed'] as const).map(count),
    );
    // Refreshes queued by requests carry a priority: they wait in the prioritized set.
    return { wait: (wait ?? 0) + (prioritized ?? 0), active, completed, failed, delayed };
  } finally {
    await queue.close();
  }
}

/** What a worker child needs to share the gateway's Redis, queue and RPC. */
function childEnv(gw: Gateway, extra: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: gw.config.REDIS_URL,
    RPC_URL: gw.sim.url,
    QUEUE_PREFIX: gw.config.QUEUE_PREFIX,
    HOST: '127.0.0.1',
    RPC_RETRIES: '1',
    JOB_BACKOFF_MS: '200',
    RPC_MAX_PER_SECOND: '1000',
    ...extra,
  };
}

/** Every parent got its own labels: no refresh lost, none answered with another's list. */
function expectEveryParentAnswered(parents: readonly string[], answers: Reply[]): void {
  answers.forEach((reply, i) => {
    const parent = parents[i] as string;
    expect(reply, parent).toMatchObject({
      status: 200,
      body: { s: 'ok', result: LABELS.get(parent) ?? [] },
    });
  });
}

describe('a worker killed mid-refresh', () => {
  it('has its stalled job taken over by a second worker, and the waiting request gets the labels', async () => {
    const gw = await startGateway({
      worker: false,
      env: { SUBDOMAINS_WAIT_MS: '20000', ...FAST_STALLED },
    });
    let child: WorkerProcess | undefined;
    let second: WorkerRuntime | undefined;
    try {
      child = await spawnWorkerProcess(
        childEnv(gw, { ...FAST_STALLED, RPC_TIMEOUT_MS: '30000', RPC_RETRIES: '0' }),
      );
      // The first getProgramAccounts never answers (the simulator counts it on arrival): the
      // child is killed in the middle of its refresh.
      gw.sim.setFaults([{ kind: 'hang', method: 'getProgramAccounts', times: 1 }]);
      const waiting = gw.get('/subdomains/67679', { signal: AbortSignal.timeout(25_000) });
      await waitFor(() => gw.sim.callCount('getProgramAccounts') === 1, 15_000);
      expect(await queueState(gw)).toMatchObject({ active: 1, completed: 0 });

      expect(await child.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
      const killedAt = Date.now();
      second = await startWorker(gw.config, gw.metrics, silent, { serveMetrics: false });

      const reply = await waiting;
      expect(reply).toMatchObject({
        status: 200,
        body: { s: 'ok', result: ['bullish', 'hollaaa', 'testing'] },
      });
      expect(reply.headers.get('x-cache')).toBe('MISS');
      // Lock (1 s) plus at most two stalled checks (0.5 s each), with slack for a busy machine.
      expect(Date.now() - killedAt).toBeLessThan(8_000);
      expect(gw.sim.callCount('getProgramAccounts')).toBe(2);
      expect(await queueState(gw)).toMatchObject({ active: 0, completed: 1, failed: 0, wait: 0 });
      // The next request is a hit from the entry the second worker wrote.
      const next = await gw.get('/subdomains/67679');
      expect(next.body.result).toEqual(['bullish', 'hollaaa', 'testing']);
      expect(next.headers.get('x-cache')).toBe('HIT');
    } finally {
      await child?.kill('SIGKILL');
      await second?.close();
      await gw.close();
    }
  });
});

describe('a worker shut down gracefully under load', () => {
  const parents = ['67679', 'demo', 'empty', 'bonfida', 'load-a', 'load-b', 'load-c', 'load-d'];

  it('finishes its active jobs on close(); a new worker completes every queued one', async () => {
    const gw = await startGateway({
      env: {
        SUBDOMAINS_WAIT_MS: '20000',
        WORKER_CONCURRENCY: '3',
        RPC_MAX_PER_SECOND: '1000',
        COLD_MISS_LIMIT: '1000000',
      },
    });
    let second: WorkerRuntime | undefined;
    try {
      // Every refresh takes a while, so close() finds three of them running.
      gw.sim.setFaults([{ kind: 'delay', ms: 700, method: 'getProgramAccounts' }]);
      const replies = parents.map((p) =>
        gw.get(`/subdomains/${p}`, { signal: AbortSignal.timeout(25_000) }),
      );
      // (The simulator counts a delayed call when it answers: watch the queue instead.)
      await waitFor(async () => {
        const { wait, active } = await queueState(gw);
        return wait === parents.length - 3 && active === 3;
      }, 10_000);

      await gw.worker?.close();
      // The three active refreshes finished; the others wait, untouched.
      expect(await queueState(gw)).toEqual({
        wait: parents.length - 3,
        active: 0,
        completed: 3,
        failed: 0,
        delayed: 0,
      });
      expect(gw.sim.callCount('getProgramAccounts')).toBe(3);

      gw.sim.setFaults([]);
      second = await startWorker(gw.config, gw.metrics, silent, { serveMetrics: false });
      expectEveryParentAnswered(parents, await Promise.all(replies));
      expect(await queueState(gw)).toEqual({
        wait: 0,
        active: 0,
        completed: parents.length,
        failed: 0,
        delayed: 0,
      });
      // Each parent was refreshed exactly once: nothing lost, nothing run twice.
      expect(gw.sim.callCount('getProgramAccounts')).toBe(parents.length);
    } finally {
      await second?.close();
      await gw.close();
    }
  });

  it('finishes its active jobs on SIGTERM and exits 0; a new worker completes the rest', async () => {
    const gw = await startGateway({
      worker: false,
      env: { SUBDOMAINS_WAIT_MS: '20000', COLD_MISS_LIMIT: '1000000' },
    });
    let child: WorkerProcess | undefined;
    let second: WorkerRuntime | undefined;
    try {
      child = await spawnWorkerProcess(childEnv(gw, { WORKER_CONCURRENCY: '2' }));
      gw.sim.setFaults([{ kind: 'delay', ms: 700, method: 'getProgramAccounts' }]);
      const replies = parents.map((p) =>
        gw.get(`/subdomains/${p}`, { signal: AbortSignal.timeout(25_000) }),
      );
      await waitFor(async () => {
        const { wait, active } = await queueState(gw);
        return wait === parents.length - 2 && active === 2;
      }, 10_000);

      const exit = await child.kill('SIGTERM');
      expect(exit, child.output().slice(-2000)).toEqual({ code: 0, signal: null });
      expect(child.output()).toContain('shut down cleanly');
      expect(await queueState(gw)).toMatchObject({ active: 0, completed: 2, failed: 0 });

      gw.sim.setFaults([]);
      second = await startWorker(gw.config, gw.metrics, silent, { serveMetrics: false });
      expectEveryParentAnswered(parents, await Promise.all(replies));
      expect(await queueState(gw)).toMatchObject({
        wait: 0,
        active: 0,
        completed: parents.length,
        failed: 0,
      });
      expect(gw.sim.callCount('getProgramAccounts')).toBe(parents.length);
    } finally {
      await child?.kill('SIGKILL');
      await second?.close();
      await gw.close();
    }
  });
});
