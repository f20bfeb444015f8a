/**
 * A large cold miss answered from its scan before the entry's write is done (docs/design.md,
 * "Early answers"): with the real API, worker, Redis and simulator, the write's last step held
 * until the test lets it go, so what is answered before it is known to come from the scan.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { seedParent } from '../bench/seed-parent.js';
import { ScanWrite } from '../src/core/cache/scan-write.js';
import { SubdomainCache, type EarlyAnswer } from '../src/core/cache/subdomain-cache.js';
import { EARLY_ANSWER_TTL_MS, getEarlyAnswer } from '../src/core/cache/early-answers.js';
import {
  parseRefreshEvent,
  publishEarlyAnswer,
  publishRefreshEvent,
  RefreshListener,
} from '../src/core/queue/refresh-events.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { startRpcSimulator } from '../tools/rpc-sim/index.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';

/** Subdomains of the large parent: enough that its scan is written in several chunks. */
const LARGE = 5_000;

let gw: Gateway | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await gw?.close();
  gw = undefined;
});

/** Holds every scan write's last step (its commit) until `open()`. */
function holdCommits(): { open: () => void; held: () => number } {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let held = 0;
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its own `this` below
  const commit = ScanWrite.prototype.commit;
  vi.spyOn(ScanWrite.prototype, 'commit').mockImplementation(async function (
    this: ScanWrite,
    ...args: Parameters<ScanWrite['commit']>
  ) {
    held++;
    await gate;
    return commit.apply(this, args);
  });
  return { open, held: () => held };
}

/** The keys under the gateway's prefix that match `pattern` (after the prefix). */
async function keysLike(g: Gateway, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await g.redis.scan(
      cursor,
      'MATCH',
      `${g.config.QUEUE_PREFIX}:${pattern}`,
    );
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found;
}

/**
 * A loopback RPC in front of `target` whose scan replies list every account twice, as a faulty
 * RPC might: the entry's write keeps an account once.
 */
async function listingTwice(target: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const scan = body.includes('getProgramAccounts');
      void fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (got) => {
          let text = await got.text();
          if (scan) {
            const reply = JSON.parse(text) as { result: { value: unknown[] } };
            reply.result.value = [...reply.result.value, ...reply.result.value];
            text = JSON.stringify(reply);
          }
          res.writeHead(got.status, { 'content-type': 'application/json' }).end(text);
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('early answers', () => {
  it('answers a large cold miss from its scan while the write is held, /details after it', async () => {
    const chain = seedDemo();
    const { labels } = seedParent(chain, { parent: 'big', count: LARGE, seed: 1 });
    const sorted = [...labels].sort();
    gw = await startGateway({ chain });
    const g = gw;
    const keys = redisKeys(g.config.QUEUE_PREFIX);
    const hold = holdCommits();

    const list = await g.get('/subdomains/big');
    expect(list.status).toBe(200);
    expect(list.headers.get('x-cache')).toBe('MISS');
    expect(list.body.result).toEqual(sorted);
    // Answered while the write's last step waits: no entry yet, and no "entry written" event.
    expect(hold.held()).toBe(1);
    expect(await keysLike(g, 'entry:*:big')).toEqual([]);
    expect(await g.redis.get(keys.refreshEventsSent)).toBeNull();

    // `/details` renders the entry's accounts: it waits for the write.
    let detailsDone = false;
    const details = g.get('/subdomains/big/details?limit=2').finally(() => (detailsDone = true));
    // Another list request meanwhile joins the same scan and is answered from it too.
    const again = await g.get('/subdomains/big');
    expect(again.headers.get('x-cache')).toBe('MISS');
    expect(again.body.result).toEqual(sorted);
    expect(detailsDone).toBe(false);
    expect(g.sim.callCount('getProgramAccounts')).toBe(1);

    hold.open();
    const rows = await details;
    expect(rows.status).toBe(200);
    expect((rows.body.result as Array<{ label: string }>).map((r) => r.label)).toEqual(
      sorted.slice(0, 2),
    );
    const hit = await g.get('/subdomains/big');
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.body.result).toEqual(sorted);
    // One scan, one write, one "entry written" event: the early one is not counted.
    expect(g.sim.callCount('getProgramAccounts')).toBe(1);
    expect(await g.redis.get(keys.refreshEventsSent)).toBe('1');
    const early = await keysLike(g, 'early-answer:*:big');
    expect(early).toHaveLength(1);
    const ttl = await g.redis.pttl(early[0] as string);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(EARLY_ANSWER_TTL_MS);
  });

  it('lists no early answer for a small parent, nor for a refresh nobody waits on', async () => {
    const chain = seedDemo();
    const { labels } = seedParent(chain, { parent: 'big', count: LARGE, seed: 2 });
    gw = await startGateway({ chain, env: { CACHE_FRESH_SECONDS: '1' } });
    const g = gw;
    const small = await g.get('/subdomains/67679');
    expect(small.body.result).toEqual(['bullish', 'hollaaa', 'testing']);
    expect(await keysLike(g, 'early-answer:*')).toEqual([]);

    // The large parent's first answer lists one; once it is gone, a stale refresh lists none.
    expect((await g.get('/subdomains/big')).body.result).toEqual([...labels].sort());
    const [early] = await keysLike(g, 'early-answer:*:big');
    expect(early).toBeDefined();
    await g.redis.del(early as string);
    await waitFor(async () => (await g.get('/subdomains/big')).headers.get('x-cache') === 'STALE');
    await waitFor(() => g.sim.callCount('getProgramAccounts') >= 3);
    await waitFor(async () => (await g.get('/subdomains/big')).headers.get('x-cache') === 'HIT');
    expect(await keysLike(g, 'early-answer:*')).toEqual([]);
  });

  it('waits for the entry when the early answer cannot be read', async () => {
    const chain = seedDemo();
    const { labels } = seedParent(chain, { parent: 'big', count: LARGE, seed: 3 });
    gw = await startGateway({ chain });
    const g = gw;
    const keys = redisKeys(g.config.QUEUE_PREFIX);
    const hold = holdCommits();
    // The worker lists text that is no answer; the API's reads of it are watched.
    vi.spyOn(SubdomainCache.prototype, 'putEarlyAnswer').mockImplementation(
      async (endpointId: string, parent: string) => {
        await g.redis.set(keys.earlyAnswer(endpointId, parent), '{"labels":"not a list"}');
      },
    );
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its own `this` below
    const read = SubdomainCache.prototype.earlyAnswer;
    const reads: Array<EarlyAnswer | null> = [];
    vi.spyOn(SubdomainCache.prototype, 'earlyAnswer').mockImplementation(async function (
      this: SubdomainCache,
      ...args: Parameters<SubdomainCache['earlyAnswer']>
    ) {
      const got = await read.apply(this, args);
      reads.push(got);
      return got;
    });
    let answered = false;
    const list = g.get('/subdomains/big').finally(() => (answered = true));
    await waitFor(() => reads.length === 1 && hold.held() === 1);
    expect(reads).toEqual([null]);
    expect(answered).toBe(false);
    hold.open();
    const got = await list;
    expect(got.status).toBe(200);
    expect(got.headers.get('x-cache')).toBe('MISS');
    expect(got.body.result).toEqual([...labels].sort());
    expect(await keysLike(g, 'entry:*:big')).toHaveLength(1);
    expect(await g.redis.get(keys.refreshEventsSent)).toBe('1');
  });

  it('lists none from a reply that lists an account twice: the entry lists it once', async () => {
    const chain = seedDemo();
    const { labels } = seedParent(chain, { parent: 'big', count: LARGE, seed: 4 });
    const sim = await startRpcSimulator({ chain });
    const rpc = await listingTwice(sim.url);
    try {
      gw = await startGateway({ sim, env: { RPC_URL: rpc.url } });
      const g = gw;
      const hold = holdCommits();
      const list = g.get('/subdomains/big');
      await waitFor(() => hold.held() === 1);
      hold.open();
      const got = await list;
      expect(got.status).toBe(200);
      expect(got.body.result).toEqual([...labels].sort());
      expect(await keysLike(g, 'early-answer:*')).toEqual([]);
    } finally {
      await gw?.close();
      gw = undefined;
      await rpc.close();
      await sim.close();
    }
  });
});

describe('early events', () => {
  it('are told from the entry events, and ignored by a parser that does not know them', () => {
    const early = JSON.stringify({ endpointId: 'e', parent: 'p', early: true, prefix: 'x', db: 3 });
    expect(parseRefreshEvent(early, 'x', 3)).toEqual({ endpointId: 'e', parent: 'p', early: true });
    expect(parseRefreshEvent(early, 'y', 3)).toBeNull();
    // The fields an older parser requires: an `ok` of true or false. An early event has none.
    expect(JSON.parse(early)).not.toHaveProperty('ok');
  });

  it('call a waiter back without ending its wait', async () => {
    gw = await startGateway({ worker: false });
    const g = gw;
    const subscriber = g.redis.duplicate();
    const listener = new RefreshListener(subscriber, g.config.QUEUE_PREFIX);
    try {
      await listener.start();
      let called = 0;
      const wait = listener.next('e', 'p', 10_000, () => called++);
      await publishEarlyAnswer(g.redis, g.config.QUEUE_PREFIX, 'e', 'p');
      await waitFor(() => called === 1);
      await publishRefreshEvent(g.redis, g.config.QUEUE_PREFIX, {
        endpointId: 'e',
        parent: 'p',
        ok: true,
      });
      expect(await wait.event).toEqual({ endpointId: 'e', parent: 'p', ok: true });
      expect(called).toBe(1);
    } finally {
      await listener.close();
      subscriber.disconnect();
    }
  });

  it('reads a stored answer back, and none from text that is not one', async () => {
    gw = await startGateway({ worker: false });
    const g = gw;
    const keys = redisKeys(g.config.QUEUE_PREFIX);
    await g.redis.set(keys.earlyAnswer('e', 'p'), JSON.stringify({ fetchedAt: 5, labels: ['a'] }));
    expect(await getEarlyAnswer(g.redis, keys, 'e', 'p')).toEqual({ fetchedAt: 5, labels: ['a'] });
    for (const bad of [
      'nope',
      '[]',
      '{"fetchedAt":-1,"labels":[]}',
      '{"fetchedAt":1,"labels":[1]}',
    ]) {
      await g.redis.set(keys.earlyAnswer('e', 'p'), bad);
      expect(await getEarlyAnswer(g.redis, keys, 'e', 'p')).toBeNull();
    }
  });
});
