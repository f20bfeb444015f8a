import { PublicKey } from '@solana/web3.js';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readFollowStatus } from '../src/core/cache/follow-status.js';
import { RegistryIndex } from '../src/core/cache/registry-index.js';
import { REGISTRY_SERVING_VALUE } from '../src/core/cache/registry-serving.js';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import { Writable } from 'node:stream';
import { SlotClock } from '../src/core/rpc/slot.js';
import { laneRpc } from '../worker/follow/lane-rpc.js';
import { auditParent, auditRound } from '../worker/registry/audit.js';
import { DELETE_READ_GRACE_MS } from '../worker/follow/deletions.js';
import { RpcClient } from '../worker/rpc/client.js';
import { Agents } from '../worker/rpc/transport.js';
import { DecodeThread } from '../worker/sns/decode-thread.js';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { startWorker } from '../worker/runtime.js';
import { registryChangePublisher } from '../worker/registry-jobs.js';
import { SHARDS } from '../worker/registry/build.js';
import { ownersOf } from '../worker/registry/pages.js';
import { SimChain, startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import type { Fault } from '../tools/rpc-sim/faults.js';
import { indexServing, readyzIndex, REGISTRY } from './support/freshness.js';
import {
  deletePrefix,
  startGateway,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import { until } from './support/wait.js';
import { sdkSubdomains } from './support/sdk.js';

const NEW_OWNER = new PublicKey('9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin');

/**
 * A top-level name whose key starts with byte 0: its subdomains' reverse records are in shard
 * `00`, with every top-level name's (parent all zeros).
 */
const ZERO_PARENT = (() => {
  for (let i = 0; ; i++) if (domainKey(`zero${i}`)[0] === 0) return `zero${i}`;
})();

/**
 * Rewrites `label.parent`'s reverse record with its text lacking the leading NUL, as records made
 * by hand or by old tools are: the SDK's `findSubdomains` lists them all the same.
 */
function bareReverse(chain: SimChain, parent: string, label: string): void {
  const { reverseKey } = chain.addSubdomain(parent, label);
  const old = chain.getAccount(reverseKey);
  if (!old) throw new Error('no reverse record');
  const text = Buffer.from(label);
  const len = Buffer.alloc(4);
  len.writeUInt32LE(text.length);
  const data = Buffer.concat([Buffer.from(old.data).subarray(0, 96), len, text]);
  chain.setAccount(reverseKey, { data, lamports: old.lamports });
}

/**
 * A small registry: top-level names with reverse records, subdomains, a v1 record, an orphan, and
 * reverse texts without their leading NUL (in shard `00` and another).
 */
function registryChain(): SimChain {
  const chain = new SimChain();
  for (const name of ['alpha', 'beta', 'gamma', 'delta', 'lonely']) chain.addDomain(name);
  for (const label of ['one', 'two', 'three']) chain.addSubdomain('alpha', label);
  chain.addSubdomain('beta', 'solo');
  for (const label of ['x', 'y']) chain.addSubdomain('gamma', label);
  chain.addSubdomain('delta', 'kept');
  chain.addSubdomain('delta', 'norecord', { reverse: false });
  chain.addOrphanReverse('delta', 'orphan');
  chain.addSubdomain(ZERO_PARENT, 'usual');
  chain.addDomain('wide');
  for (let i = 0; i < 1_100; i++) chain.addSubdomain('wide', `w${i}`);
  bareReverse(chain, ZERO_PARENT, 'byhand');
  bareReverse(chain, 'delta', 'bare');
  return chain;
}

const silentLogger = createLogger('silent');

const metricValue = async (gw: Gateway, name: string) =>
  ((await gw.metrics.registry.getSingleMetric(name)?.get())?.values ?? []).reduce(
    (n, v) => n + v.value,
    0,
  );

const labels = async (gw: Gateway, parent: string) => {
  const res = await gw.get(`/subdomains/${parent}`);
  expect(res.status).toBe(200);
  return res.body.result as string[];
};

/** Calls that would read subdomains from the chain (scans, pages, account reads). */
const scanCalls = (sim: RpcSimulator) =>
  sim.callCount('getProgramAccounts') +
  sim.callCount('getProgramAccountsV2') +
  sim.callCount('getMultipleAccounts');

/**
 * A gateway on {@link registryChain} whose index serves, `env` added to {@link REGISTRY}: what each
 * block below starts once.
 */
async function servingGateway(env: Record<string, string> = {}): Promise<Gateway> {
  const gw = await startGateway({ chain: registryChain(), env: { ...REGISTRY, ...env } });
  await indexServing(gw);
  return gw;
}

/** How far the gateway's clock (Redis's, src/core/redis-time.ts) may be from the test's. */
const CLOCK_SLACK_MS = 100;

describe('the registry index (SUBDOMAIN_INDEX=registry)', () => {
  let gw: Gateway;
  let index: RegistryIndex;
  beforeAll(async () => {
    gw = await servingGateway();
    index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
  }, 90_000);
  afterAll(() => gw.close());

  it('answers every parent, never asked before, from the index: as findSubdomains, with no RPC call', async () => {
    // Built with getProgramAccountsV2 pages (the simulator offers them), a piece per shard.
    expect((await index.state()).status).toBe('complete');
    expect(gw.sim.callCount('getProgramAccountsV2')).toBeGreaterThanOrEqual(SHARDS.length);
    gw.sim.resetCalls();
    for (const parent of ['alpha', 'beta', 'gamma', 'delta', 'lonely', ZERO_PARENT]) {
      const got = await labels(gw, parent);
      expect(got).toEqual((await sdkSubdomains(gw.sim.url, parent)).sort());
    }
    // Texts without the leading NUL are listed, in shard `00` as in any other.
    expect(await labels(gw, ZERO_PARENT)).toEqual(['byhand', 'usual']);
    expect(await labels(gw, 'delta')).toEqual(['bare', 'kept']);
    // Made-up parents: an empty list, as the SDK gives, and no scan either.
    gw.sim.resetCalls();
    for (const parent of ['nosuchparent1', 'zz-made-up', 'alpha2']) {
      const res = await gw.get(`/subdomains/${parent}`);
      expect(res.status).toBe(200);
      expect(res.body.result).toEqual([]);
    }
    for (const parent of ['alpha', 'gamma']) await labels(gw, parent);
    expect(scanCalls(gw.sim)).toBe(0);
    const details = await gw.get('/subdomains/alpha/details');
    expect(details.status).toBe(200);
    expect((details.body.result as Array<{ label: string }>).map((r) => r.label)).toEqual([
      'one',
      'three',
      'two',
    ]);
    const page = await gw.get('/subdomains/alpha?limit=2');
    expect(page.body.result).toEqual(['one', 'three']);
    expect(scanCalls(gw.sim)).toBe(0);
    // No refresh was queued for any of them.
    const waiting = await gw.redis.keys(`${gw.config.QUEUE_PREFIX}:subdomain-refresh:*:wait`);
    for (const key of waiting) expect(await gw.redis.llen(key)).toBe(0);
  });

  it("renders a page of a large parent's /details from its answer's rows, as its view cuts it", async () => {
    const paths = [
      '?limit=1',
      '?limit=100&after=w500',
      '?prefix=w10&limit=7',
      '?prefix=w99&limit=1000',
    ];
    paths.push('?limit=1000&after=w2', '?prefix=nothing&limit=3');
    const answers = async () => {
      const out = [];
      for (const path of paths) {
        const r = await gw.get(`/subdomains/wide/details${path}`);
        expect(r.status).toBe(200);
        out.push({
          body: r.body,
          etag: r.headers.get('etag'),
          total: r.headers.get('x-total-count'),
        });
      }
      return out;
    };
    gw.sim.resetCalls();
    const rendered = await answers();
    expect(rendered[0]?.total).toBe('1100');
    // The whole answer renders the view, which then cuts the same pages.
    const whole = await gw.get('/subdomains/wide/details');
    expect(await answers()).toEqual(rendered);
    expect(scanCalls(gw.sim)).toBe(0);
    const rows = whole.body.result as Array<{ label: string }>;
    expect(rows.map((r) => r.label)).toEqual((await sdkSubdomains(gw.sim.url, 'wide')).sort());
  });

  it('sends live updates of a parent nobody asked for from the index', async () => {
    const abort = new AbortController();
    const res = await fetch(`${gw.baseUrl}/subdomains/beta/events`, { signal: abort.signal });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    /** Reads until the stream has sent a list event holding exactly `labels`, at most 10 s. */
    const until = async (labels: string[]) => {
      const want = `data: ${JSON.stringify({ s: 'ok', result: labels })}`;
      const deadline = Date.now() + 10_000;
      while (!text.includes(want)) {
        if (Date.now() > deadline) throw new Error(`no event of ${want} in ${text}`);
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        text += decoder.decode(value, { stream: true });
      }
    };
    try {
      await until(['solo']);
      gw.sim.chain.addSubdomain('beta', 'live');
      await until(['live', 'solo']);
    } finally {
      abort.abort();
    }
  });

  it('lists a subdomain whose label is longer than the stream carries, made after the build', async () => {
    // The stream's slice holds 30 bytes of a reverse text: this one is read whole.
    const long = 'a-label-longer-than-the-slice-of-the-stream';
    gw.sim.chain.addSubdomain('beta', long);
    await waitFor(async () => (await labels(gw, 'beta')).includes(long), 10_000);
    expect(await labels(gw, 'beta')).toEqual((await sdkSubdomains(gw.sim.url, 'beta')).sort());
    gw.sim.chain.deleteSubdomain('beta', long);
    await waitFor(async () => !(await labels(gw, 'beta')).includes(long), 10_000);
  });

  it('shows a subdomain created, transferred and deleted under a parent nobody asked for', async () => {
    const chain = gw.sim.chain;
    chain.addSubdomain('lonely', 'fresh');
    await waitFor(async () => (await labels(gw, 'lonely')).includes('fresh'), 10_000);
    chain.transferSubdomain('lonely', 'fresh', NEW_OWNER);
    await waitFor(async () => {
      const res = await gw.get('/subdomains/lonely/details');
      const rows = res.body.result as Array<{ label: string; owner: string }>;
      return rows.some((r) => r.label === 'fresh' && r.owner === NEW_OWNER.toBase58());
    }, 10_000);
    chain.deleteSubdomain('lonely', 'fresh');
    await waitFor(async () => (await labels(gw, 'lonely')).length === 0, 10_000);
    // Deleted: a tombstone at the deletion's slot, so nothing older brings it back.
    expect((await index.state()).status).toBe('complete');
  });
});

describe('the registry index while a Delete waits for its read', () => {
  // A short window, so an answer dated at the waiting Delete goes stale before its read comes.
  const FRESH_SECONDS = 3;
  let gw: Gateway;
  beforeAll(async () => {
    gw = await servingGateway({ CACHE_FRESH_SECONDS: String(FRESH_SECONDS) });
  }, 90_000);
  afterAll(() => gw.close());

  it('never answers its name as current until the read, and is current again after it', async () => {
    const index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
    const { run } = await index.state();
    const listed = async () => {
      const res = await gw.get('/subdomains/gamma');
      expect(res.status).toBe(200);
      return {
        labels: res.body.result as string[],
        cache: res.headers.get('x-cache'),
        age: Number(res.headers.get('age')),
      };
    };
    expect(await listed()).toEqual({ labels: ['x', 'y'], cache: 'HIT', age: 0 });
    // The node answers null for the transaction until it is 7 s old: the follower's tries (0.25
    // s doubled, six in all) read it at the last, about 7.75 s after it was reported.
    gw.sim.setTransactionLagMs(7_000);
    const deletedAt = Date.now();
    gw.sim.chain.deleteSubdomain('gamma', 'y');
    try {
      // Past DELETE_READ_GRACE_MS the answer still listing it is dated when the Delete was
      // reported: its age grows, and past the window it is stale, never a hit of now.
      let answer = await listed();
      await waitFor(async () => {
        answer = await listed();
        return answer.cache === 'STALE' || !answer.labels.includes('y');
      }, 20_000);
      expect(answer).toMatchObject({ labels: ['x', 'y'], cache: 'STALE' });
      expect(answer.age).toBeGreaterThanOrEqual(FRESH_SECONDS);
      expect(answer.age * 1_000).toBeLessThanOrEqual(Date.now() - deletedAt + 1_000);
      // Once read, the name is gone and the answer current again: no rebuild was needed.
      await waitFor(async () => {
        answer = await listed();
        return !answer.labels.includes('y') && answer.cache === 'HIT' && answer.age === 0;
      }, 20_000);
      expect(answer).toEqual({ labels: ['x'], cache: 'HIT', age: 0 });
      expect(await index.state()).toMatchObject({ run, status: 'complete' });
    } finally {
      gw.sim.setTransactionLagMs(0);
    }
  }, 60_000);
});

describe('the registry index while the follow stream heals a gap', () => {
  // A short window, so the heal's bound passes within the test; long enough that the answers asked
  // at once after the drop come well within it.
  const FRESH_SECONDS = 6;
  const FRESH_MS = FRESH_SECONDS * 1_000;
  let gw: Gateway;
  beforeAll(async () => {
    gw = await servingGateway({ CACHE_FRESH_SECONDS: String(FRESH_SECONDS) });
  }, 90_000);
  afterAll(() => gw.close());

  /** Refresh jobs added to the configured endpoint's queue: BullMQ counts every add in `id`. */
  const jobsAdded = async () =>
    Number(await gw.redis.get(`${gw.config.QUEUE_PREFIX}:${REFRESH_QUEUE}:id`)) || 0;
  const ask = async (parent: string, path = '') => {
    const askedAt = Date.now();
    const res = await gw.get(`/subdomains/${parent}${path}`);
    expect(res.status).toBe(200);
    const result = res.body.result as Array<string | { label: string }>;
    return {
      askedAt,
      answeredAt: Date.now(),
      labels: result.map((r) => (typeof r === 'string' ? r : r.label)),
      cache: res.headers.get('x-cache'),
      age: Number(res.headers.get('age')),
    };
  };

  it('answers from the index, dated from the last vouch, within the window; per parent past it; current once healed', async () => {
    // Parents never asked in this gateway (but alpha), and what findSubdomains lists for them.
    const listed: Record<string, string[]> = {
      alpha: ['one', 'three', 'two'],
      beta: ['solo'],
      delta: ['bare', 'kept'],
      [ZERO_PARENT]: ['byhand', 'usual'],
      lonely: [],
    };
    const { run } = await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state();
    // Asked while the index serves: current, and kept in process (the copy from before the drop,
    // which must not outlive the heal's change of alpha).
    for (let i = 0; i < 2; i++) {
      const a = await ask('alpha');
      expect({ labels: a.labels, cache: a.cache, age: a.age }).toEqual({
        labels: listed.alpha,
        cache: 'HIT',
        age: 0,
      });
    }
    const scansBefore = scanCalls(gw.sim);
    const jobsBefore = await jobsAdded();
    gw.sim.setWebsocketAvailable(false);
    try {
      expect(gw.sim.dropSockets()).toBeGreaterThanOrEqual(1);
      // The worker writes at once that it stopped vouching, since when it heals, and when it last
      // vouched (it vouched until the drop: the index was serving).
      const heal = await until(async () => {
        const status = await readFollowStatus(gw.redis, gw.config.QUEUE_PREFIX);
        return status?.healingSince === undefined ? undefined : status;
      }, 'the status saying a heal is under way');
      const vouchedAt = heal.vouchedAt;
      if (vouchedAt === undefined) throw new Error('the status says no last vouch');
      expect(vouchedAt).toBeLessThanOrEqual(heal.healingSince ?? 0);
      // Past it an answer dated from the last vouch is not fresh by the window.
      const windowEnds = vouchedAt + FRESH_MS;
      // The API has read that status: the index is not served (readiness and gauge unchanged).
      await waitFor(
        async () => (await readyzIndex(gw)) === 'unfollowed',
        10_000,
        'the API seeing the heal',
      );
      expect(await metricValue(gw, 'sns_registry_state')).toBe(REGISTRY_SERVING_VALUE.unfollowed);
      // Every answer is judged by when it was asked, not by a deadline the test must meet: one
      // answered within the window is the index's, dated from the last vouch; one asked past it is
      // the per-parent path's (a load slow enough to ask past it skips the index's checks).
      let hits = 0;
      let late = false;
      const throughHeal = async (parent: string, want: string[], path = '') => {
        const a = await ask(parent, path);
        if (a.answeredAt >= windowEnds - CLOCK_SLACK_MS) {
          late = true;
          return;
        }
        hits++;
        expect({ parent, labels: a.labels, cache: a.cache }).toEqual({
          parent,
          labels: want,
          cache: 'HIT',
        });
        // `Age` counts from the last vouch, in whole seconds.
        expect(a.age * 1_000).toBeGreaterThanOrEqual(a.askedAt - vouchedAt - 1_000);
        expect(a.age * 1_000).toBeLessThanOrEqual(a.answeredAt - vouchedAt + 1_000);
      };
      for (const [parent, want] of Object.entries(listed)) await throughHeal(parent, want);
      // A name made during the gap, which no stream brings while the websocket is refused.
      gw.sim.chain.addSubdomain('alpha', 'four');
      // Asked again two seconds past the last vouch: read again, each dated from it (an answer
      // dated now, or kept in process, would say `Age: 0`), alpha without the new name.
      await waitFor(
        () => Date.now() >= vouchedAt + 2_000 + CLOCK_SLACK_MS,
        FRESH_MS,
        'two seconds since the last vouch',
      );
      for (const [parent, want] of Object.entries(listed)) await throughHeal(parent, want);
      await throughHeal('delta', listed.delta ?? [], '/details');
      expect(hits).toBeGreaterThan(0);
      if (!late) {
        // From the index: no scan, no account read, no refresh queued.
        expect(scanCalls(gw.sim)).toBe(scansBefore);
        expect(await jobsAdded()).toBe(jobsBefore);
      }

      // A heal that long is stuck: past the window the per-parent path answers, a scan of its own.
      await waitFor(
        () => Date.now() > windowEnds + CLOCK_SLACK_MS,
        FRESH_MS + 1_000,
        'the window past since the last vouch',
      );
      const fallback = await ask('gamma');
      expect({ labels: fallback.labels, cache: fallback.cache }).toEqual({
        labels: ['x', 'y'],
        cache: 'MISS',
      });
      expect(gw.sim.callCount('getProgramAccounts')).toBeGreaterThan(0);
      expect(await jobsAdded()).toBeGreaterThan(jobsBefore);
      expect(await readyzIndex(gw)).toBe('unfollowed');
    } finally {
      gw.sim.setWebsocketAvailable(true);
    }
    // The websocket back, the gap healed: the index serves again, current, no rebuild, and the
    // name made during the gap is listed (the heal's write dropped alpha's answer kept before).
    await indexServing(gw, 30_000);
    let answer = await ask('alpha');
    await waitFor(
      async () => {
        answer = await ask('alpha');
        return answer.cache === 'HIT' && answer.age === 0 && answer.labels.includes('four');
      },
      10_000,
      'a current answer from the index, with the name made during the gap',
    );
    expect(answer.labels).toEqual(['four', ...(listed.alpha ?? [])]);
    expect(await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state()).toMatchObject({
      run,
      status: 'complete',
    });
  }, 90_000);
});

describe('the registry index once a heal vouches again', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await servingGateway();
  }, 90_000);
  afterAll(() => gw.close());

  const ask = async (parent: string) => {
    const res = await gw.get(`/subdomains/${parent}`);
    expect(res.status).toBe(200);
    return {
      labels: res.body.result as string[],
      cache: res.headers.get('x-cache'),
      age: Number(res.headers.get('age')),
    };
  };
  type Answer = Awaited<ReturnType<typeof ask>>;

  /**
   * Drops the socket, makes `change` on the chain in the gap once the API knows of the heal, and
   * lets the websocket back once an answer dated from the stream's last vouch (before the drop)
   * says `Age: 1` or more (so `Age: 0` then means dated now); `slow` arms faults just before.
   */
  const gap = async (change: () => void, slow: Fault[] = []) => {
    gw.sim.setWebsocketAvailable(false);
    try {
      expect(gw.sim.dropSockets()).toBeGreaterThanOrEqual(1);
      const healingSince = await until(
        async () =>
          (await readFollowStatus(gw.redis, gw.config.QUEUE_PREFIX))?.healingSince ?? undefined,
        'the status saying a heal is under way',
        5_000,
      );
      // The API has read that status: an answer it dates now is dated after the change.
      await waitFor(
        async () => (await readyzIndex(gw)) === 'unfollowed',
        5_000,
        'the API seeing the heal',
      );
      change();
      await waitFor(
        () => Date.now() >= healingSince + 1_000 + CLOCK_SLACK_MS,
        5_000,
        'a second since the drop',
      );
      gw.sim.setFaults(slow);
    } finally {
      gw.sim.setWebsocketAvailable(true);
    }
  };

  /**
   * Asks `parent` until `done` holds of a current answer (`HIT`, `Age: 0`), keeping every current
   * answer `wrong` says misses the gap's change.
   */
  const current = async (
    parent: string,
    done: (a: Answer) => boolean,
    wrong: (a: Answer) => boolean,
  ) => {
    const missed: Answer[] = [];
    let answer = await ask(parent);
    await waitFor(
      async () => {
        answer = await ask(parent);
        const now = answer.cache === 'HIT' && answer.age === 0;
        if (now && wrong(answer)) missed.push(answer);
        return now && done(answer);
      },
      30_000,
      `a current answer of ${parent} with the gap's change`,
    );
    return { answer, missed };
  };

  it("never answers a parent current without a long label made in the gap, while the heal's whole read is slow", async () => {
    const { run } = await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state();
    expect(await ask('beta')).toEqual({ labels: ['solo'], cache: 'HIT', age: 0 });
    // Longer than the stream's slice: the feed completes it with a whole read after the heal.
    const long = 'a-label-made-in-the-gap-longer-than-the-slice';
    // Every account read slow: the heal's sliced one, then the feed's whole one of the label.
    await gap(
      () => gw.sim.chain.addSubdomain('beta', long),
      [{ kind: 'delay', ms: 3_000, method: 'getMultipleAccounts', times: 2 }],
    );
    const { answer, missed } = await current(
      'beta',
      (a) => a.labels.includes(long),
      (a) => !a.labels.includes(long),
    );
    // Dated from the last vouch until the label is in, never current without it.
    expect(missed).toEqual([]);
    expect(answer.labels).toEqual([long, 'solo']);
    expect(await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state()).toMatchObject({
      run,
      status: 'complete',
    });
  }, 60_000);

  it("never answers a parent current without a long label the stream reported, while the feed's whole read is slow", async () => {
    const { run } = await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state();
    const before = await ask('alpha');
    expect(before).toMatchObject({ cache: 'HIT', age: 0 });
    // No heal: the stream vouches throughout, and the feed reads the label's whole text slowly.
    const long = 'a-label-the-stream-reported-longer-than-its-slice';
    // Past this after the change, an answer dated now must list it: the grace a waiting fact gets,
    // the status's next write (every second), the API's next read of it (every 500 ms), and the
    // second `Age: 0` may hide.
    const lagMs = DELETE_READ_GRACE_MS + 1_000 + 500 + 1_000 + CLOCK_SLACK_MS;
    gw.sim.setFaults([{ kind: 'delay', ms: 6_000, method: 'getMultipleAccounts', times: 2 }]);
    try {
      const madeAt = Date.now();
      gw.sim.chain.addSubdomain('alpha', long);
      const answers: Array<Answer & { after: number }> = [];
      await waitFor(
        async () => {
          const after = Date.now() - madeAt;
          const answer = await ask('alpha');
          answers.push({ ...answer, after });
          return answer.labels.includes(long);
        },
        30_000,
        'an answer of alpha listing the long label',
      );
      const missing = answers.filter((a) => !a.labels.includes(long));
      // An answer `HIT` with `Age: 0` asked that late is dated after the chain had the label.
      const missed = missing.filter((a) => a.cache === 'HIT' && a.age === 0 && a.after >= lagMs);
      const late = missing.filter((a) => a.after >= lagMs);
      const shown = (a: (typeof answers)[number]) => `${a.after} ms: ${a.cache}, Age ${a.age}`;
      console.log(
        `without the label: ${missing.length} answers, ${late.length} asked ${lagMs} ms or more`,
        `after it was made, ${missed.length} of them current;`,
        `first ${late.slice(0, 1).map(shown).join('')}, last ${late.slice(-1).map(shown).join('')}`,
      );
      // The read was slow enough to judge: answers without it were asked past the bound.
      expect(late.length).toBeGreaterThan(0);
      expect(missed).toEqual([]);
      expect(answers.at(-1)?.labels).toEqual([...before.labels, long].sort());
      // Current again once written: the status's next write, then the API's next read of it.
      const { answer } = await current(
        'alpha',
        (a) => a.labels.includes(long),
        () => false,
      );
      expect(answer.labels).toEqual([...before.labels, long].sort());
    } finally {
      gw.sim.setFaults([]);
    }
    expect(await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state()).toMatchObject({
      run,
      status: 'complete',
    });
  }, 90_000);

  it('never answers a parent current with a subdomain deleted in the gap', async () => {
    const { run } = await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state();
    expect(await ask('gamma')).toEqual({ labels: ['x', 'y'], cache: 'HIT', age: 0 });
    await gap(() => gw.sim.chain.deleteSubdomain('gamma', 'y'));
    const { answer, missed } = await current(
      'gamma',
      (a) => !a.labels.includes('y'),
      (a) => a.labels.includes('y'),
    );
    expect(missed).toEqual([]);
    expect(answer.labels).toEqual(['x']);
    expect(await new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX).state()).toMatchObject({
      run,
      status: 'complete',
    });
  }, 60_000);
});

describe('the registry audit', () => {
  let gw: Gateway;
  let index: RegistryIndex;
  beforeAll(async () => {
    gw = await servingGateway();
    index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
  }, 90_000);
  afterAll(() => gw.close());

  it('finds a planted mismatch with getProgramAccounts, counts it, repairs it and logs it', async () => {
    const keys = redisKeys(gw.config.QUEUE_PREFIX);
    const alpha = toBase58(domainKey('alpha'));
    const hash = keys.registryParent(alpha.slice(0, 16));
    const stored = await index.storedMembers(alpha);
    const [first, second] = [...stored.keys()].sort();
    // Planted at the build's floor (older members read as gone): one member gone, one with
    // another owner, one the chain does not have.
    const at = (await index.state()).floor.toString(36);
    await gw.redis.hdel(hash, first as string);
    const other = stored.get(second as string);
    await gw.redis.hset(hash, second as string, `${at}|${NEW_OWNER.toBase58()}|${other?.label}`);
    await gw.redis.hset(
      hash,
      'GhostAccount1111111111111111111111111111111',
      `${at}|${NEW_OWNER.toBase58()}|+ghost`,
    );
    expect(await labels(gw, 'alpha')).not.toEqual(['one', 'three', 'two']);

    const agents = new Agents();
    const thread = new DecodeThread({ heapMb: 64, taskMs: 5_000 });
    const lane = {
      rpc: new RpcClient({
        metrics: gw.metrics,
        agents,
        timeoutMs: 5_000,
        retries: 1,
        maxResponseBytes: 1 << 24,
        isTrusted: () => true,
        costs: gw.config.RPC_CREDITS,
      }),
      thread,
      maxLabelBytes: 1024,
      maxAnswerBytes: 1 << 20,
    };
    const endpoint = { kind: 'default' as const, url: gw.sim.url, id: endpointId(gw.sim.url) };
    const logged: string[] = [];
    const logger = createLogger(
      'warn',
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logged.push(chunk.toString());
          done();
        },
      }),
    );
    const deps = {
      index: new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX),
      lane,
      endpoint,
      metrics: gw.metrics,
      logger,
      rpc: laneRpc(lane, endpoint, new SlotClock()),
      changed: registryChangePublisher(gw.redis, gw.config.QUEUE_PREFIX, logger),
    };
    const mismatchesBefore = await metricValue(gw, 'sns_registry_audit_mismatches_total');
    gw.sim.resetCalls();
    try {
      // A round over every parent of the index (a handful here), each read with getProgramAccounts.
      const found = await auditRound(deps, 100);
      expect(found.map((m) => m.kind).sort()).toEqual(['differs', 'extra', 'missing']);
      expect(found.every((m) => m.parentKey === alpha)).toBe(true);
      expect(logged.filter((l) => l.includes('registry audit')).length).toBe(3);
      // Again: nothing left to repair.
      expect(await auditParent(deps, alpha)).toEqual([]);
    } finally {
      await thread.close();
      agents.destroy();
    }
    const audited = (await index.sampleParents(100)).length;
    expect(gw.sim.callCount('getProgramAccounts')).toBe(audited + 1);
    expect((await metricValue(gw, 'sns_registry_audit_mismatches_total')) - mismatchesBefore).toBe(
      3,
    );
    expect(await labels(gw, 'alpha')).toEqual((await sdkSubdomains(gw.sim.url, 'alpha')).sort());
    const rows = (await gw.get('/subdomains/alpha/details')).body.result as Array<{
      owner: string;
    }>;
    expect(rows.every((r) => r.owner !== NEW_OWNER.toBase58())).toBe(true);
  });
});

describe('the registry index while it is built', () => {
  let sim: RpcSimulator;
  let gw: Gateway;
  beforeAll(async () => {
    // HTTP reads a second behind the websocket: a piece reads an older slot than the stream
    // has already delivered, the case stitching is for.
    // And a provider without getProgramAccountsV2 (-32601, as most answer): pieces fall back to
    // getProgramAccounts (the other suites' simulator pages with V2).
    sim = await startRpcSimulator({
      chain: registryChain(),
      httpLagMs: 1_000,
      refusedMethods: ['getProgramAccountsV2'],
    });
    // Slow scans, so the build is caught half done.
    sim.setFaults([{ kind: 'delay', ms: 60, method: 'getProgramAccounts' }]);
    gw = await startGateway({ sim, env: REGISTRY });
  }, 60_000);
  afterAll(async () => {
    await gw.close();
    await sim.close();
  });

  it('answers per parent while building, resumes after the worker stops, and loses no change made meanwhile', async () => {
    const index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
    await waitFor(async () => {
      const state = await index.state();
      return state.status === 'building' && state.done >= 20;
    }, 60_000);
    // Not complete: the per-parent path answers (a scan of its own).
    await waitFor(async () => (await readyzIndex(gw)) === 'building', 5_000);
    sim.resetCalls();
    expect(await labels(gw, 'beta')).toEqual(['solo']);
    expect(sim.callCount('getProgramAccounts')).toBeGreaterThan(0);

    // Changes while the build runs: an addition, a transfer, a deletion.
    sim.chain.addSubdomain('gamma', 'added');
    sim.chain.transferSubdomain('alpha', 'two', NEW_OWNER);
    sim.chain.deleteSubdomain('alpha', 'one');

    // The worker stops mid-build; another starts and resumes where the build was.
    await gw.worker?.close();
    const before = await index.state();
    expect(before.status).toBe('building');
    expect(before.done).toBeLessThan(SHARDS.length);
    sim.resetCalls();
    const worker = await startWorker(gw.config, gw.metrics, silentLogger, {
      serveMetrics: false,
    });
    try {
      await indexServing(gw, 90_000);
      const after = await index.state();
      expect(after.run).toBe(before.run);
      // Only the pieces not done were read again (the stream's own reads aside).
      const pieces = sim.calls.filter(
        (c) =>
          c.method === 'getProgramAccountsV2' ||
          (c.method === 'getProgramAccounts' && JSON.stringify(c.params).includes('"offset":64')),
      ).length;
      expect(pieces).toBeLessThanOrEqual(2 * (SHARDS.length - before.done) + 1);
      // Each piece asked for V2 once, was refused, and read with getProgramAccounts.
      expect(sim.callCount('getProgramAccountsV2')).toBeGreaterThan(0);

      for (const parent of ['alpha', 'beta', 'gamma', 'delta']) {
        expect(await labels(gw, parent)).toEqual((await sdkSubdomains(sim.url, parent)).sort());
      }
      expect(await labels(gw, 'alpha')).toEqual(['three', 'two']);
      expect(await labels(gw, 'gamma')).toEqual(['added', 'x', 'y']);
      const rows = (await gw.get('/subdomains/alpha/details')).body.result as Array<{
        label: string;
        owner: string;
      }>;
      expect(rows.find((r) => r.label === 'two')?.owner).toBe(NEW_OWNER.toBase58());
    } finally {
      await worker.close();
    }
  }, 150_000);
});

describe("a page's owners", () => {
  it('are dated by the oldest of their reads, so a transfer the stream saw between two wins', async () => {
    // 150 subdomains: their owners are read in two batches, each at a slot of its own.
    const chain = new SimChain();
    const keys = Array.from({ length: 150 }, (_, i) => chain.addSubdomain('owners', `l${i}`));
    const sim = await startRpcSimulator({ chain });
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    const prefix = uniquePrefix();
    const agents = new Agents();
    const thread = new DecodeThread({ heapMb: 64, taskMs: 5_000 });
    const lane = {
      rpc: new RpcClient({
        metrics: createMetrics(new Registry()),
        agents,
        timeoutMs: 5_000,
        retries: 1,
        maxResponseBytes: 1 << 24,
        isTrusted: () => true,
        costs: {},
      }),
      thread,
      maxLabelBytes: 1024,
      maxAnswerBytes: 1 << 20,
    };
    try {
      const endpoint = { kind: 'default' as const, url: sim.url, id: endpointId(sim.url) };
      const found = keys.map((k, i) => ({
        parentKey: k.parentKey.toBase58(),
        account: k.subKey.toBase58(),
        reverse: k.reverseKey.toBase58(),
        label: `l${i}`,
      }));
      const P = chain.slot;
      const { members, slot } = await ownersOf(lane, endpoint, found, P);
      expect(members.every((m) => m.owner !== null)).toBe(true);
      // The simulator moves a slot per request: the batches were read at P + 1 and P + 2.
      expect(slot).toBe(P + 1);
      // The first subdomain (read at P + 1) was transferred at P + 2, and the stream saw it
      // before the page was written: the transfer wins over the owner the page read.
      const index = new RegistryIndex(redis, prefix);
      await index.start(1);
      const first = found[0] as (typeof found)[number];
      await index.apply([
        {
          op: 'owner',
          slot: P + 2,
          parentKey: first.parentKey,
          account: first.account,
          owner: NEW_OWNER.toBase58(),
        },
      ]);
      await index.writePiece(1, undefined, P, slot, members);
      const listed = (await index.members(first.parentKey)).members;
      expect(listed.find((m) => m.account === first.account)?.owner).toBe(NEW_OWNER.toBase58());
      expect(listed).toHaveLength(150);
    } finally {
      await deletePrefix(redis, prefix);
      redis.disconnect();
      await thread.close();
      agents.destroy();
      await sim.close();
    }
  });
});
