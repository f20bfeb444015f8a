import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { startWorker } from '../worker/runtime.js';
import { FOLLOW, labels, PARENT, watched } from './support/freshness.js';
import {
  deletePrefix,
  seedDemo,
  startGateway,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import { spawnWorkerProcess } from './support/main-process.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { inDatabase } from './support/shared-redis.js';

/**
 * A deployment's space in Redis is its database and its key prefix (docs/design.md, "Redis
 * isolation"): keys, watch leases and refresh-event channels stay in it, so deployments may share
 * one Redis by database as well as by prefix. These tests pick their databases themselves (none
 * is 0, which they only scan for their own prefix), whatever the suite's database is.
 */

const base = inject('redisUrl');
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** A connection to database `db` of the test Redis, closed after the test. */
function connect(db: number): Redis {
  const redis = new Redis(inDatabase(base, db), { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  cleanups.push(async () => redis.disconnect());
  return redis;
}

/** The keys of `prefix` in database `db`, sorted: SCAN with MATCH (never KEYS: Redis is shared). */
async function keysIn(db: number, prefix: string): Promise<string[]> {
  const redis = connect(db);
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found.sort();
}

/** A simulator of the demo chain, closed after the test. */
async function simulator(): Promise<RpcSimulator> {
  const sim = await startRpcSimulator({ chain: seedDemo() });
  cleanups.push(() => sim.close());
  return sim;
}

/** A gateway on database `db` under `prefix`, closed (its keys deleted) after the test. */
async function deployment(
  sim: RpcSimulator,
  db: number,
  prefix: string,
  opts: { worker?: boolean; env?: Record<string, string> } = {},
): Promise<Gateway> {
  // Whatever a build without isolation wrote to database 0 under this prefix goes too.
  const zero = connect(0);
  cleanups.push(() => deletePrefix(zero, prefix));
  const gw = await startGateway({
    sim,
    worker: opts.worker,
    env: { REDIS_URL: inDatabase(base, db), QUEUE_PREFIX: prefix, ...opts.env },
  });
  cleanups.push(() => gw.close());
  return gw;
}

describe('one deployment on a database other than 0', () => {
  const DB = 5;

  it.each([
    ['ROLE=all, in one process', false],
    ['the API here and a ROLE=worker process', true],
  ])(
    'keeps every key, lease and channel in that database (%s)',
    async (_name, separateWorker) => {
      const sim = await simulator();
      const prefix = uniquePrefix();
      const gw = await deployment(sim, DB, prefix, { worker: !separateWorker, env: FOLLOW });
      if (separateWorker) {
        const worker = await spawnWorkerProcess({
          ...FOLLOW,
          REDIS_URL: gw.config.REDIS_URL,
          QUEUE_PREFIX: prefix,
          RPC_URL: sim.url,
          RPC_WS_URL: sim.wsUrl,
        });
        cleanups.push(() => worker.kill('SIGKILL'));
      }
      const keys = redisKeys(prefix);
      const id = endpointId(sim.url);

      // A cold miss: the job, the worker's refresh and its event, all in database DB.
      const cold = await gw.get('/subdomains/bonfida');
      expect(cold.status).toBe(200);
      expect(cold.headers.get('x-cache')).toBe('MISS');
      // The stream's lease (in whichever database it lands), then a parent it follows.
      const zero = connect(0);
      await waitFor(async () => {
        const leased = (await gw.redis.exists(keys.followLease)) === 1;
        return leased || (await zero.exists(keys.followLease)) === 1;
      }, 15_000);
      await watched(gw, sim);
      // A change on chain: patched by the follower, announced on the channel of database DB.
      sim.chain.addSubdomain(PARENT, 'isolated');
      await waitFor(async () => (await labels(gw)).includes('isolated'));
      expect((await gw.get('/readyz')).status).toBe(200);

      const own = await keysIn(DB, prefix);
      expect(own).toEqual(
        expect.arrayContaining([
          keys.followLease,
          keys.followStatus,
          keys.followSignature,
          keys.entryMeta(id, PARENT),
          keys.entryLabels(id, PARENT),
          keys.entryMembers(id, PARENT),
          keys.entryMeta(id, 'bonfida'),
          keys.memberParents(id),
          keys.followedParents(id),
          keys.readinessProbe,
        ]),
      );
      for (const family of [
        `${prefix}:hot-parents:`,
        keys.coldMissLimitNamespace,
        `${prefix}:${REFRESH_QUEUE}:`,
        `${prefix}:hot-parent-scans:`,
      ]) {
        expect(
          own.some((key) => key.startsWith(family)),
          family,
        ).toBe(true);
      }
      expect(await keysIn(0, prefix)).toEqual([]);
      // Channels are global to the server: the API's subscription names the database.
      const channels = await connect(0).pubsub('CHANNELS', `${prefix}*`);
      expect(channels).toEqual([keys.refreshEvents(DB)]);
    },
    45_000,
  );
});

describe('two deployments on one Redis, same prefix, databases 3 and 4', () => {
  it("never answers a cold miss on one deployment's event of the other", async () => {
    const WAIT_MS = 5_000;
    const sim = await simulator();
    const prefix = uniquePrefix();
    // No worker on A yet: its cold miss waits for an event that only its own worker may send.
    const a = await deployment(sim, 3, prefix, {
      worker: false,
      env: { SUBDOMAINS_WAIT_MS: String(WAIT_MS) },
    });
    const b = await deployment(sim, 4, prefix);
    const aQueue = new Queue(REFRESH_QUEUE, { connection: connect(3), prefix });
    cleanups.push(() => aQueue.close());

    const asked = Date.now();
    const pending = a.get(`/subdomains/${PARENT}`);
    // A's job is queued (its wait began before): now B answers the same parent, which sends B's
    // refresh event while A still waits (else this test would prove nothing).
    await waitFor(async () => (await aQueue.count()) === 1);
    const other = await b.get(`/subdomains/${PARENT}`);
    expect(other.status).toBe(200);
    expect(other.headers.get('x-cache')).toBe('MISS');
    expect(Date.now() - asked).toBeLessThan(WAIT_MS);

    // A did not take B's event for its own (it would read no entry and answer 500): it waited
    // out its bound, as for any refresh that does not come.
    const waited = await pending;
    expect(waited.status).toBe(502);
    expect(Date.now() - asked).toBeGreaterThanOrEqual(WAIT_MS);
    expect(a.logs.join('')).not.toContain('reported done but wrote no entry');

    // A's own worker takes A's job from database 3, and A answers from its own entry.
    const worker = await startWorker(
      a.config,
      createMetrics(new Registry()),
      createLogger('silent'),
      {
        serveMetrics: false,
      },
    );
    cleanups.push(() => worker.close());
    await waitFor(async () => (await a.get(`/subdomains/${PARENT}`)).status === 200);
    const cold = await a.get('/subdomains/bonfida');
    expect(cold.status).toBe(200);
    expect(cold.headers.get('x-cache')).toBe('MISS');
  });

  it('follows the same parent in each, with a lease and a stream of its own', async () => {
    const sim = await simulator();
    const prefix = uniquePrefix();
    const a = await deployment(sim, 3, prefix, { env: FOLLOW });
    const b = await deployment(sim, 4, prefix, { env: FOLLOW });
    // Each its own stream: a programSubscribe and a logsSubscribe each.
    await waitFor(() => sim.wsStats().subscriptions === 4, 15_000);
    await Promise.all([watched(a, sim), watched(b, sim)]);
    const lease = redisKeys(prefix).followLease;
    expect(await a.redis.exists(lease)).toBe(1);
    expect(await b.redis.exists(lease)).toBe(1);
    expect(await a.redis.get(lease)).not.toBe(await b.redis.get(lease));
    expect(await keysIn(0, prefix)).toEqual([]);

    // Each follows the chain and patches its own entry.
    sim.chain.addSubdomain(PARENT, 'both');
    await waitFor(
      async () => (await labels(a)).includes('both') && (await labels(b)).includes('both'),
    );
  });
});
