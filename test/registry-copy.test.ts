import { Keypair } from '@solana/web3.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parentIdOf, RegistryIndex } from '../src/core/cache/registry-index.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { domainKey, toBase58 } from '../src/core/sns/pda.js';
import { SimChain } from '../tools/rpc-sim/index.js';
import { indexServing, REGISTRY } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { startPrivateRedis, type PrivateRedis } from './support/private-redis.js';

/**
 * The API's copy of the registry index's answers (docs/design.md, "The registry index"): a hot
 * parent is answered from memory, a change under it shows as soon as its event comes, and a lost
 * event channel drops the copy. A private redis-server, so the API's subscriber is the only one
 * of its name to kill.
 */

function chain(): SimChain {
  const c = new SimChain();
  for (const name of ['alpha', 'gamma']) c.addDomain(name);
  for (const label of ['one', 'two']) c.addSubdomain('alpha', label);
  c.addSubdomain('gamma', 'x');
  return c;
}

describe("the API's copy of the registry index's answers", () => {
  let server: PrivateRedis;
  let admin: Redis;
  let gw: Gateway;
  let index: RegistryIndex;
  beforeAll(async () => {
    server = await startPrivateRedis();
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    gw = await startGateway({ chain: chain(), env: { ...REGISTRY, REDIS_URL: server.url } });
    index = new RegistryIndex(gw.redis, gw.config.QUEUE_PREFIX);
    await indexServing(gw);
  }, 90_000);
  afterAll(async () => {
    await gw.close();
    admin.disconnect();
    await server.destroy();
  });

  const labels = async (parent: string) => {
    const res = await gw.get(`/subdomains/${parent}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-cache')).toBe('HIT');
    expect(res.headers.get('age')).toBe('0');
    return res.body.result as string[];
  };
  const hashOf = (parent: string) =>
    redisKeys(gw.config.QUEUE_PREFIX).registryParent(parentIdOf(toBase58(domainKey(parent))));
  /** Seconds since the parent's hash was last read or written (Redis's LRU clock). */
  const idle = async (parent: string) => Number(await admin.object('IDLETIME', hashOf(parent)));
  /** Lists `label` under `parent` in the index directly: no change event is published. */
  const plant = async (parent: string, label: string) => {
    const parentKey = toBase58(domainKey(parent));
    const slot = ((await index.members(parentKey)).slot ?? 0) + 1;
    const account = Keypair.generate().publicKey.toBase58();
    const owner = Keypair.generate().publicKey.toBase58();
    await index.apply([
      { op: 'label', slot, parentKey, account, reverse: account, label },
      { op: 'owner', slot, parentKey, account, owner },
    ]);
  };

  it('answers a hot parent from memory: its hash is not read again', async () => {
    expect(await labels('alpha')).toEqual(['one', 'two']);
    expect(await labels('alpha')).toEqual(['one', 'two']);
    // Redis's LRU clock counts whole seconds: wait until the hash shows idle, then ask on.
    await waitFor(async () => (await idle('alpha')) >= 2, 10_000);
    const before = await idle('alpha');
    for (let i = 0; i < 40; i++) expect(await labels('alpha')).toEqual(['one', 'two']);
    expect(await idle('alpha')).toBeGreaterThanOrEqual(before);
    // Proof it is the copy: a member planted with no event is not shown.
    await plant('alpha', 'planted');
    expect(await labels('alpha')).toEqual(['one', 'two']);
  });

  it('shows a change under a hot parent as soon as its event comes', async () => {
    expect(await labels('gamma')).toEqual(['x']);
    expect(await labels('gamma')).toEqual(['x']);
    const madeAt = Date.now();
    gw.sim.chain.addSubdomain('gamma', 'new');
    await waitFor(async () => (await labels('gamma')).includes('new'), 10_000);
    const shownMs = Date.now() - madeAt;
    gw.sim.chain.deleteSubdomain('gamma', 'new');
    await waitFor(async () => !(await labels('gamma')).includes('new'), 10_000);
    // The stream's notification, the feed's write and its event: well under a second here.
    expect(shownMs).toBeLessThan(5_000);
  });

  it('is dropped when the event channel is lost, and read again after the reconnect', async () => {
    await plant('alpha', 'planted2');
    expect(await labels('alpha')).not.toContain('planted2');
    const list = (await admin.client('LIST')) as string;
    const ids = list
      .split('\n')
      .filter((line) => / name=sns-gateway:api:subscriber /.test(line))
      .map((line) => /^id=(\d+)/.exec(line)?.[1])
      .filter((id): id is string => id !== undefined);
    expect(ids).toHaveLength(1);
    const channel = redisKeys(gw.config.QUEUE_PREFIX).refreshEvents(9);
    await admin.client('KILL', 'ID', ids[0] as string);
    // Subscribed again (ioredis resubscribes): the copy must not come back with the old list.
    await waitFor(async () => {
      const [, subscribers] = (await admin.pubsub('NUMSUB', channel)) as [string, number];
      return subscribers === 1;
    }, 10_000);
    expect(await labels('alpha')).toEqual(['one', 'planted', 'planted2', 'two']);
  });
});
