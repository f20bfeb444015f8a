import { readFileSync } from 'node:fs';
import { PublicKey } from '@solana/web3.js';
import { afterEach, describe, expect, it } from 'vitest';
import { subdomainKey } from '../worker/sns/change.js';
import { MAX_PENDING_PER_PARENT } from '../worker/follow/patcher.js';
import { HEAD_SLICE } from '../worker/follow/name-program.js';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { SCAN_SLICE, SLICE_AT } from '../worker/sns/discovery-decode.js';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import { FOLLOW, labels, metric, PARENT, watched } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { spawnWorkerProcess, type MainProcess } from './support/main-process.js';
import { programNotificationText, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { elapse } from './support/wait.js';
import { WS_NOTIFICATION_OUTCOME } from '../src/core/metrics.js';

/**
 * A provider that floods one watched parent with notifications (docs/design.md, "Freshness"):
 * the worker, in a process of its own, coalesces them by account and drops what is past its
 * bounds for one re-read, so its memory stays flat and a real change made after the flood shows
 * within seconds. Before the bounds, every notification queued a promise of its own.
 */

/** Notifications sent; FLOOD_COUNT overrides it to measure (BENCHMARKS.md). */
const COUNT = Number(process.env.FLOOD_COUNT ?? 200_000);
/** How long the worker may stay busy after the flood; FLOOD_IDLE_MS overrides it to measure. */
const IDLE_MS = Number(process.env.FLOOD_IDLE_MS ?? 30_000);
/** Subdomains of the parent besides the demo's: a hot parent is a large one. */
const SUBDOMAINS = Number(process.env.FLOOD_SUBDOMAINS ?? 2_000);

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** Resident and peak resident memory of a process, in MiB (Linux `/proc/<pid>/status`). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** CPU time a process has used, in milliseconds (`/proc/<pid>/stat`, in ticks of 10 ms). */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime: fields 14 and 15 of the line, 12 and 13 after the command name.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Milliseconds until the process has gone idle (under 5 % of a core over a second), sampled
 * every 250 ms, and its peak resident memory meanwhile, in MiB.
 * @throws when it is still busy after `timeoutMs`.
 */
async function untilIdle(pid: number, timeoutMs: number): Promise<{ ms: number; peak: number }> {
  const started = Date.now();
  const samples: number[] = [cpuMsOf(pid)];
  let peak = memoryOf(pid).peak;
  for (;;) {
    await elapse(250);
    samples.push(cpuMsOf(pid));
    peak = Math.max(peak, memoryOf(pid).peak);
    const last = samples.length - 1;
    if (last >= 4 && (samples[last] ?? 0) - (samples[last - 4] ?? 0) < 50) {
      return { ms: Date.now() - started - 1_000, peak };
    }
    if (Date.now() - started > timeoutMs) {
      throw new Error(`still busy after ${timeoutMs} ms, at a peak of ${Math.round(peak)} MiB`);
    }
  }
}

describe('a flood of notifications', () => {
  it(
    `keeps the worker's memory bounded and its following prompt through ${COUNT} notifications for one parent`,
    async () => {
      // Made before anything runs: the simulator shares this process, and a socket whose pings go
      // unanswered for two intervals is dropped.
      const key = Buffer.alloc(32, 7);
      const keys = Array.from({ length: COUNT }, (_, i) => {
        key.writeUInt32LE(i, 0);
        return toBase58(key);
      });
      const chain = seedDemo();
      for (let i = 0; i < SUBDOMAINS; i++) chain.addSubdomain(PARENT, `member${i}`);
      const sim = await startRpcSimulator({ chain });
      cleanups.push(() => sim.close());
      // Pings far apart: the simulator in this process is busy sending, and should not look silent.
      const env = { ...FOLLOW, RPC_WS_PING_MS: '5000' };
      const gw: Gateway = await startGateway({ sim, worker: false, env });
      cleanups.push(() => gw.close());
      const worker: MainProcess = await spawnWorkerProcess({
        ...env,
        REDIS_URL: gw.config.REDIS_URL,
        QUEUE_PREFIX: gw.config.QUEUE_PREFIX,
        RPC_URL: sim.url,
        RPC_WS_URL: sim.wsUrl,
      });
      cleanups.push(() => worker.kill('SIGKILL'));
      await watched(gw, sim);
      const [sub] = sim.wsSubscriptions('program');
      if (sub === undefined) throw new Error('no subscription');
      const before = memoryOf(worker.pid);

      // Subdomain name accounts under the parent, each a different one: the worst case for
      // coalescing by account. Their data is a real subdomain's header (the parent, an owner).
      const account = sim.chain.getAccount(
        new PublicKey(subdomainKey('bullish', domainKey(PARENT))),
      );
      const slice = Buffer.from(
        account?.data.subarray(HEAD_SLICE.offset, HEAD_SLICE.offset + HEAD_SLICE.length) ?? [],
      );
      const [head, tail] = programNotificationText(sub, sim.chain.slot, '<key>', slice).split(
        '<key>',
      );
      const scansBefore = sim.callCount('getProgramAccounts');
      const flood = await sim.wsFlood(sub, COUNT, (i) => `${head}${keys[i]}${tail}`);
      expect(flood.sent).toBe(COUNT);

      // Drained once the worker has nothing left to do; a change made then shows at once.
      const idle = await untilIdle(worker.pid, IDLE_MS);
      const scans = sim.callCount('getProgramAccounts') - scansBefore;
      sim.chain.addSubdomain(PARENT, 'afterflood');
      await waitFor(async () => (await labels(gw)).includes('afterflood'), 10_000);
      const metrics = await fetch(
        `http://127.0.0.1:${Number(worker.started.workerMetricsPort)}/metrics`,
      );
      const outcomes = (await metrics.text())
        .split('\n')
        .filter((line) => line.startsWith('sns_ws_notifications_total'))
        .map((line) => line.replace(/^sns_ws_notifications_total\{outcome="(\w+)"\} /, '$1 '));
      console.log(
        `flood of ${COUNT}: sent in ${Math.round(flood.ms)} ms; worker RSS ` +
          `${Math.round(before.rss)} MiB before, peak ${Math.round(idle.peak)} MiB; idle ` +
          `${idle.ms} ms after it was sent; ${scans} scans; outcomes: ${outcomes.join(', ')}`,
      );
      expect(idle.peak - before.rss).toBeLessThan(256);
      expect(idle.ms).toBeLessThan(15_000);
      expect(scans).toBeLessThan(COUNT / MAX_PENDING_PER_PARENT);
    },
    90_000 + IDLE_MS,
  );
});

describe('notifications of one account, faster than they can be applied', () => {
  it('applies the newest state of the account, not every one', async () => {
    const gw = await startGateway({ env: FOLLOW });
    cleanups.push(() => gw.close());
    const { sim } = gw;
    await watched(gw, sim);
    const [sub] = sim.wsSubscriptions('program');
    if (sub === undefined) throw new Error('no subscription');
    const subKey = subdomainKey('bullish', domainKey(PARENT));
    const account = sim.chain.getAccount(new PublicKey(subKey));
    const slice = Buffer.from(
      account?.data.subarray(HEAD_SLICE.offset, HEAD_SLICE.offset + HEAD_SLICE.length) ?? [],
    );
    // The same slot for all: the last received wins. Each names another owner (a transfer).
    const count = 50_000;
    const owners = Array.from({ length: count }, (_, i) => {
      const owner = Buffer.alloc(32, 3);
      owner.writeUInt32LE(i, 0);
      return owner;
    });
    const slot = sim.chain.slot;
    const flood = await sim.wsFlood(sub, count, (i) => {
      owners[i]?.copy(slice, SCAN_SLICE.offset + SLICE_AT.owner);
      return programNotificationText(sub, slot, subKey, slice);
    });
    expect(flood.sent).toBe(count);
    const last = toBase58(owners[count - 1] ?? Buffer.alloc(0));
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 15_000, 600_000);
    // A bound against a hang: the worker reads all 50,000 before the last one shows, which took
    // longer than 15 s with a CPU burner beside the suite.
    await waitFor(
      async () =>
        (await cache.getWithAccounts(endpointId(sim.url), PARENT))?.accounts?.[subKey]?.[1] ===
        last,
      60_000,
    );
    const patched = await metric(gw, 'sns_ws_notifications_total', {
      outcome: WS_NOTIFICATION_OUTCOME.patched,
    });
    expect(patched).toBeGreaterThan(0);
    expect(patched).toBeLessThan(count / 10);
    expect(
      await metric(gw, 'sns_ws_notifications_total', {
        outcome: WS_NOTIFICATION_OUTCOME.coalesced,
      }),
    ).toBeGreaterThan(count - count / 10);
  }, 90_000);
});
