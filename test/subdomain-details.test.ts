import { getDomainKeySync, NameRegistryState } from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SubdomainCache } from '../src/cache/subdomain-cache.js';
import { endpointId } from '../src/rpc/endpoint.js';
import { startGateway, type Gateway } from './support/gateway.js';
import { SimChain, startRpcSimulator, type RpcSimulator } from './support/rpc-sim/index.js';

/**
 * `GET /subdomains/:parent/details` against the real worker, Redis and the simulator: each label
 * with its subdomain name account and owner, from the same entry and refresh as the list, equal
 * to what the SDK's own functions give for those accounts.
 */

type Row = { label: string; key: string; owner: string };

describe('GET /subdomains/:parent/details', () => {
  let gw: Gateway;
  let other: RpcSimulator;
  beforeAll(async () => {
    const chain = new SimChain();
    chain.addSubdomain('elsewhere', 'far', { owner: new PublicKey(Buffer.alloc(32, 3)) });
    other = await startRpcSimulator({ chain });
    gw = await startGateway({ env: { RPC_OVERRIDE_ALLOWLIST: other.url } });
    // Owners of their own, so a mix-up between subdomains would show.
    for (const [i, label] of ['ünï', 'zeta', 'alpha'].entries()) {
      gw.sim.chain.addSubdomain('demo', label, { owner: new PublicKey(Buffer.alloc(32, 10 + i)) });
    }
  });
  afterAll(async () => {
    await gw.close();
    await other.close();
  });

  /** What the SDK says of each label's subdomain: its key, and the owner it reads on chain. */
  async function fromSdk(rpcUrl: string, parent: string, labels: string[]): Promise<Row[]> {
    const connection = new Connection(rpcUrl, 'confirmed');
    const rows: Row[] = [];
    for (const label of labels) {
      const { pubkey } = getDomainKeySync(`${label}.${parent}.sol`);
      const { registry } = await NameRegistryState.retrieve(connection, pubkey);
      rows.push({ label, key: pubkey.toBase58(), owner: registry.owner.toBase58() });
    }
    return rows;
  }

  it('lists the labels of /subdomains in the same order, with the keys and owners the SDK gives', async () => {
    for (const parent of ['67679', 'demo']) {
      const details = await gw.get(`/subdomains/${parent}/details`);
      expect(details.status).toBe(200);
      const list = (await gw.get(`/subdomains/${parent}`)).body.result as string[];
      const rows = details.body.result as Row[];
      expect(rows.map((r) => r.label)).toEqual(list);
      expect(rows).toEqual(await fromSdk(gw.sim.url, parent, list));
    }
  });

  it('answers a cold parent, with the caching headers of the list, and no RPC call of its own', async () => {
    gw.sim.chain.addSubdomain('coldparent', 'one');
    gw.sim.resetCalls();
    const first = await gw.get('/subdomains/coldparent/details');
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    expect(first.headers.get('cache-control')).toMatch(/^public, max-age=\d+/);
    expect(first.headers.get('etag')).toMatch(/^"/);
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
    const list = await gw.get('/subdomains/coldparent');
    const again = await gw.get('/subdomains/coldparent/details');
    expect(list.headers.get('x-cache')).toBe('HIT');
    expect(again.headers.get('x-cache')).toBe('HIT');
    expect(again.body).toEqual(first.body);
    expect(gw.sim.callCount('getProgramAccounts')).toBe(1);
  });

  it('answers through an override from its own entry, no-store', async () => {
    const rpc = encodeURIComponent(other.url);
    const res = await gw.get(`/subdomains/elsewhere/details?rpc=${rpc}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body.result).toEqual(await fromSdk(other.url, 'elsewhere', ['far']));
  });

  it('answers 503 with Retry-After for an entry an earlier release wrote without its accounts', async () => {
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 60_000, 86_400_000);
    await cache.put(endpointId(gw.sim.url), 'olden', { labels: ['x'], fetchedAt: Date.now() });
    const res = await gw.get('/subdomains/olden/details');
    expect(res).toMatchObject({ status: 503, body: { s: 'error', result: 'Service overloaded' } });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('takes the pages and prefixes of the list: pages of rows concatenated equal the whole', async () => {
    for (let i = 0; i < 23; i++)
      gw.sim.chain.addSubdomain('paged', `p${String(i).padStart(2, '0')}`);
    const whole = (await gw.get('/subdomains/paged/details')).body.result as Row[];
    expect(whole).toHaveLength(23);
    const rows: Row[] = [];
    let after: string | null | undefined;
    do {
      const query = after === undefined ? '' : `&after=${encodeURIComponent(after as string)}`;
      const res = await gw.get(`/subdomains/paged/details?limit=5${query}`);
      expect(res.headers.get('x-total-count')).toBe('23');
      rows.push(...(res.body.result as Row[]));
      after = (res.body as { next?: string | null }).next;
    } while (after);
    expect(rows).toEqual(whole);
    const prefixed = await gw.get('/subdomains/paged/details?prefix=p1');
    expect((prefixed.body.result as Row[]).map((r) => r.label)).toEqual(
      whole.filter((r) => r.label.startsWith('p1')).map((r) => r.label),
    );
    expect(prefixed.headers.get('x-total-count')).toBe('10');
  });

  it('refuses a parent that is not one label with the envelope', async () => {
    const res = await gw.get('/subdomains/a.b/details');
    expect(res).toMatchObject({ status: 400, body: { s: 'error', result: 'Invalid input' } });
  });
});
