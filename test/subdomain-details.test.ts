import { getDomainKeySync, NameRegistryState } from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  labelsOf,
  SubdomainCache,
  type CacheEntry,
  type EntryAccounts,
} from '../src/core/cache/subdomain-cache.js';
import { renderPage, renderPageText } from '../src/api/http/paged-answer.js';
import { renderOk } from '../src/api/http/rendered.js';
import { publishRefreshEvent } from '../src/core/queue/refresh-events.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../src/core/sns/pda.js';
import { buildDetailsView, detailsOf, rowsText } from '../src/api/subdomains/details-view.js';
import { DetailsViews } from '../src/api/subdomains/details-views.js';
import { selectPage } from '../src/api/subdomains/page-selection.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { SimChain, startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { accountsOf, withReverses } from './support/entry-accounts.js';

/**
 * `GET /subdomains/:parent/details` against the real worker, Redis and the simulator: each label
 * with its subdomain name account and owner, from the same entry and refresh as the list, equal
 * to what the SDK's own functions give for those accounts.
 */

type Row = { label: string; key: string; owner: string };

/**
 * Counts the commands that read a key, as Redis's MONITOR shows them: every client's commands, on
 * a socket of the test's own, those naming a key under `prefix` kept. Real reads of the real
 * gateway, not a spy. (A plain socket: ioredis's `monitor()` drops lines that arrive with the
 * MONITOR reply on a busy server.)
 */
async function watchReads(url: string, prefix: string) {
  const READS = new Set([
    'get',
    'mget',
    'getex',
    'getdel',
    'getrange',
    'substr',
    'dump',
    'hgetall',
    'zrange',
    'zrangebylex',
    'hmget',
  ]);
  const { hostname, port, username, password } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port || 6379) });
  await once(socket, 'connect');
  const auth = password
    ? ['AUTH', ...(username ? [decodeURIComponent(username)] : []), decodeURIComponent(password)]
    : [];
  const resp = (args: string[]) =>
    `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  socket.write((auth.length ? resp(auth) : '') + resp(['MONITOR']));
  const counts = new Map<string, number>();
  /** The labels' key of a range from index 0 on the line before, if it was one. */
  let runFrom: string | undefined;
  /** `command key` -> times, for the commands of {@link READS}. */
  const commands = new Map<string, number>();
  const markers = new Set<string>();
  const markerPrefix = `${prefix}:monitor-marker:`;
  let rest = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\r\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      // +<time> [<db> <client>] "command" "arg" ...
      const quote = line.indexOf('"');
      if (!line.startsWith('+') || quote < 0) continue;
      const [command = '', ...keys] = line.slice(quote + 1, -1).split('" "');
      if (!READS.has(command.toLowerCase())) {
        runFrom = undefined;
        continue;
      }
      // A whole read: HGETALL of the members, or a read of members in runs, whose first run is a
      // range of the labels from index 0 then, in the same script, an HMGET of their values (a
      // read of the labels alone has no HMGET after it).
      const [first = '', from, to] = keys;
      const name = command.toLowerCase();
      const whole = name === 'hgetall' || (name === 'hmget' && runFrom !== undefined);
      const at = name === 'hmget' ? runFrom : first;
      if (whole && at) commands.set(`whole ${at}`, (commands.get(`whole ${at}`) ?? 0) + 1);
      runFrom = name === 'zrange' && from === '0' && to !== '-1' ? first : undefined;
      commands.set(`${name} ${first}`, (commands.get(`${name} ${first}`) ?? 0) + 1);
      for (const key of keys) {
        if (key.startsWith(markerPrefix)) markers.add(key);
        else if (key.startsWith(prefix)) counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    }
  });
  const probe = new Redis(url, { maxRetriesPerRequest: 1 });
  let sent = 0;
  /** Resolves once MONITOR has shown every command Redis ran before the call. */
  const caughtUp = async () => {
    // A marker read after the others: once MONITOR shows it, it has shown them.
    const marker = `${markerPrefix}${sent++}`;
    await probe.get(marker);
    await waitFor(() => markers.has(marker), 5_000);
  };
  const ready = `${markerPrefix}ready`;
  // MONITOR shows only what runs after it began: wait until it shows a read.
  await waitFor(async () => {
    await probe.get(ready);
    return markers.has(ready);
  }, 5_000);
  return {
    /** Reads of `key` so far, every command Redis ran before this call included. */
    async of(key: string): Promise<number> {
      await caughtUp();
      return counts.get(key) ?? 0;
    },
    /**
     * Whole reads of the entry whose members' hash is `members` and labels' sorted set `labels`
     * so far (an HGETALL of the one, or a read in runs of the other), and its range reads
     * (ZRANGEBYLEX: a page read by its labels).
     */
    async entryReads(members: string, labels: string): Promise<{ whole: number; ranged: number }> {
      await caughtUp();
      return {
        whole: (commands.get(`whole ${members}`) ?? 0) + (commands.get(`whole ${labels}`) ?? 0),
        ranged: commands.get(`zrangebylex ${labels}`) ?? 0,
      };
    },
    close() {
      socket.destroy();
      probe.disconnect();
    },
  };
}

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

  it('answers 503 with Retry-After for an entry one of whose accounts is unreadable', async () => {
    const cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 60_000, 86_400_000);
    const id = endpointId(gw.sim.url);
    await cache.put(
      id,
      'olden',
      ...withReverses('olden', { labels: ['x'], fetchedAt: Date.now() }, { AccX: ['x', 'o'] }),
    );
    await gw.redis.hset(redisKeys(gw.config.QUEUE_PREFIX).entryMembers(id, 'olden'), 'AccX', '[1]');
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

  describe('a parent of 3,000 subdomains, rendered once per revision', () => {
    const BIG = 3000;
    let reads: Awaited<ReturnType<typeof watchReads>>;
    let cache: SubdomainCache;
    let id: string;
    const owner = (n: number) => new PublicKey(Buffer.alloc(32, n)).toBase58();
    /** N requests for `path`, `concurrent` at a time. */
    const many = async (path: string, n: number, concurrent: number) => {
      const replies = [];
      for (let done = 0; done < n; done += concurrent) {
        const batch = Math.min(concurrent, n - done);
        replies.push(...(await Promise.all(Array.from({ length: batch }, () => gw.get(path)))));
      }
      return replies;
    };
    /** Patches the owner of `parent`'s first row (in answer order) as the watcher does. */
    const patchFirstOwner = async (parent: string, to: string, announce: boolean) => {
      const read = await cache.getWithAccounts(id, parent);
      if (!read?.accounts) throw new Error(`no accounts for ${parent}`);
      const first = detailsOf(read.accounts)[0] as Row;
      const reverse = toBase58(reverseKeyFromDomainKey(first.key, domainKey(parent)));
      const change = { account: first.key, reverse, member: [first.label, to] as const };
      const slot = (read.entry.slot ?? 0) + 1;
      expect((await cache.applyChanges(id, parent, [change], slot)).outcome).toBe('written');
      if (announce) {
        await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
          endpointId: id,
          parent,
          ok: true,
        });
      }
      return first;
    };

    beforeAll(async () => {
      for (let i = 0; i < BIG; i++) gw.sim.chain.addSubdomain('big', `b${i}`);
      for (const parent of ['quiet', 'reborn']) gw.sim.chain.addSubdomain(parent, 'only');
      cache = new SubdomainCache(gw.redis, gw.config.QUEUE_PREFIX, 60_000, 86_400_000);
      id = endpointId(gw.sim.url);
      reads = await watchReads(gw.config.REDIS_URL, gw.config.QUEUE_PREFIX);
    }, 60_000);
    afterAll(() => reads?.close());

    /** Each of `paths` of `/details`, one after the other: status, body, ETag, total. */
    const answersOf = async (parent: string, paths: readonly string[]) => {
      const out = [];
      for (const path of paths) {
        const r = await gw.get(`/subdomains/${parent}/details${path}`);
        expect(r.status).toBe(200);
        out.push({
          path,
          body: r.body,
          etag: r.headers.get('etag'),
          total: r.headers.get('x-total-count'),
        });
      }
      return out;
    };

    /** Whole and ranged reads of `parent`'s entry so far. */
    const entryReads = (parent: string) => {
      const keys = redisKeys(gw.config.QUEUE_PREFIX);
      return reads.entryReads(keys.entryMembers(id, parent), keys.entryLabels(id, parent));
    };

    it('reads pages of a large entry by their labels until its view, read once, cuts them alike', async () => {
      expect((await gw.get('/subdomains/big')).status).toBe(200);
      const paths = [
        '?limit=1',
        '?limit=997',
        '?limit=50&after=b1999',
        '?limit=1000&after=b2',
        '?prefix=b12&limit=5&after=b120',
        '?prefix=b29',
        '?prefix=zz&limit=3',
        '?prefix=b2999&limit=2',
      ];
      const before = await entryReads('big');
      const ranged = await answersOf('big', paths);
      const after = await entryReads('big');
      expect(after.ranged).toBeGreaterThan(before.ranged);
      // The first page began rendering the view in the background, once for all of them.
      expect(after.whole - before.whole).toBe(1);
      expect(ranged[0]?.total).toBe(String(BIG));
      // Once it is kept, the same pages are cut from it: no read, the same bytes and ETags.
      await waitFor(async () => {
        const was = await entryReads('big');
        expect(await answersOf('big', paths)).toEqual(ranged);
        return (await entryReads('big')).ranged === was.ranged;
      });
      expect((await gw.get('/subdomains/big/details')).status).toBe(200);
      expect((await entryReads('big')).whole - before.whole).toBe(1);
    });

    it("renders a registry index's answer once while the same answer is kept", async () => {
      const views = new DetailsViews({ cache, maxBytes: 1 << 20 });
      const accounts = accountsOf(Array.from({ length: 1_200 }, (_, i) => `r${i}`));
      const entry = { labels: labelsOf(accounts), fetchedAt: Date.now(), slot: 9 };
      const found = { entry, state: 'HIT' as const, accounts };
      const first = await views.get(id, 'indexed', found);
      expect(views.peek(id, 'indexed', found)?.view).toBe(first?.view);
      expect((await views.get(id, 'indexed', { ...found }))?.view).toBe(first?.view);
      // Another answer of the index (an event dropped the kept one) is rendered anew.
      const again = { ...found, accounts: { ...accounts } };
      expect(views.peek(id, 'indexed', again)).toBeUndefined();
      const second = await views.get(id, 'indexed', again);
      expect(second?.view).not.toBe(first?.view);
      expect(second?.view.whole).toEqual(first?.view.whole);
      // An answer of the per-parent entries is never taken from a view of the index's.
      expect(views.peek(id, 'indexed', { entry, state: 'HIT' })).toBeUndefined();
    });

    it('reads the accounts once for any number of whole answers, concurrent or not', async () => {
      // (The patch reads the entry whole itself.)
      const patched = await patchFirstOwner('big', owner(76), true);
      const before = await entryReads('big');
      await waitFor(async () => {
        const res = await gw.get('/subdomains/big/details');
        return (res.body.result as Row[])[0]?.owner === owner(76);
      });
      const replies = [
        ...(await many('/subdomains/big/details', 40, 40)),
        ...(await many('/subdomains/big/details', 40, 4)),
      ];
      expect((await entryReads('big')).whole - before.whole).toBe(1);
      const first = replies[0] as (typeof replies)[number];
      expect(first.status).toBe(200);
      expect((first.body.result as Row[])[0]).toEqual({ ...patched, owner: owner(76) });
      expect(first.headers.get('x-cache')).toBe('HIT');
      for (const r of replies) {
        expect(r.body).toEqual(first.body);
        expect(r.headers.get('etag')).toBe(first.headers.get('etag'));
      }
    });

    it('pages an entry of repeated labels, NULs and labels past U+D7FF alike either way', async () => {
      // Put as a scan would: a label on two or three accounts, labels that go on with a NUL
      // (ordered by Redis past their NUL), labels Redis orders by UTF-8 bytes otherwise than
      // answers do (U+E000 and up against the astral planes).
      const odd = ['a', 'a\0', 'a\0b', 'a\0b\0c', 'dup', 'dup', 'dup', 'two', 'two'];
      odd.push('\ue000', '\ue000x', '😀', '😀x', 'ß', 'ab', 'a b');
      const labels = [...odd, ...Array.from({ length: 1_100 }, (_, i) => `f${i}`)];
      const accounts = accountsOf(labels);
      const entry = { labels: labelsOf(accounts), fetchedAt: Date.now(), slot: 1 };
      await cache.put(id, 'oddities', ...withReverses('oddities', entry, accounts));
      const paths = ['a', 'a\0', 'a\0b', 'dup', 'two', '\ue000', '😀', 'ß', 'f1', ''].flatMap(
        (prefix) => [`?prefix=${encodeURIComponent(prefix)}&limit=1000`],
      );
      // The first pages of a few sizes, each from the one before's next.
      for (const limit of [1, 2, 3, 7]) {
        let after: string | undefined;
        for (let i = 0; i < 12; i++) {
          paths.push(
            `?limit=${limit}${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`,
          );
          after = selectPage(entry.labels, { limit, after, prefix: '' }).next ?? undefined;
          if (after === undefined) break;
        }
      }
      const before = await entryReads('oddities');
      const ranged = await answersOf('oddities', paths);
      expect((await entryReads('oddities')).ranged).toBeGreaterThan(before.ranged);
      // The view, read in Redis's order and sorted into the answers', cuts the same pages.
      const whole = await gw.get('/subdomains/oddities/details');
      expect((whole.body.result as Row[]).map((r) => r.label)).toEqual(entry.labels);
      expect(whole.body).toEqual(JSON.parse(buildDetailsView(entry, accounts).whole.body));
      expect(await answersOf('oddities', paths)).toEqual(ranged);
      expect((await entryReads('oddities')).whole - before.whole).toBe(1);
    });

    it('reads a large entry a run at a time as one revision, begun again after a change between runs', async () => {
      const labels = ['dup', 'dup', 'a', 'a\0b', '\ue000', '😀', 'ß'];
      labels.push(...Array.from({ length: 1_100 }, (_, i) => `r${i}`));
      const accounts = accountsOf(labels);
      const entry = { labels: labelsOf(accounts), fetchedAt: Date.now(), slot: 1 };
      await cache.put(id, 'runs', ...withReverses('runs', entry, accounts));
      const found = {
        entry: (await cache.get(cache.key(id, 'runs'))) as CacheEntry,
        state: 'HIT' as const,
      };
      // The real store, with a real change landing after its second run.
      let changed = 0;
      const racing = Object.create(cache) as SubdomainCache;
      racing.membersRun = async (...args) => {
        const run = await cache.membersRun(...args);
        if (args[2] > 0 && changed++ === 0) await patchFirstOwner('runs', owner(80), false);
        return run;
      };
      const views = new DetailsViews({ cache: racing, maxBytes: 1 << 24, runMembers: 100 });
      const got = await views.get(id, 'runs', found);
      const now = await cache.getWithAccounts(id, 'runs');
      if (!now?.accounts) throw new Error('no accounts for runs');
      expect(changed).toBeGreaterThan(12);
      expect(got?.view.whole).toEqual(buildDetailsView(now.entry, now.accounts).whole);
      expect(got?.view.labels).toEqual(now.entry.labels);
      expect(got?.view.entry.rev).toBe(now.entry.rev);
      const rows = (JSON.parse(got?.view.whole.body ?? '') as { result: Row[] }).result;
      expect(rows[0]?.owner).toBe(owner(80));
    });

    describe('background builds of a view', () => {
      /** A parent of `n` labels put now, and what a lookup of it finds. */
      const seeded = async (parent: string, n: number) => {
        const accounts = accountsOf(Array.from({ length: n }, (_, i) => `${parent}${i}`));
        const entry = { labels: labelsOf(accounts), fetchedAt: Date.now(), slot: 1 };
        await cache.put(id, parent, ...withReverses(parent, entry, accounts));
        const found = await cache.get(cache.key(id, parent));
        return { entry: found as CacheEntry, state: 'HIT' as const };
      };
      /** The real store, its whole reads and its reads in runs counted (each run's first). */
      const counted = (after?: (start: number) => Promise<void>) => {
        const counts = { whole: 0, runs: 0, firstRuns: 0 };
        const store = Object.create(cache) as SubdomainCache;
        store.getWithAccounts = (...args) => {
          counts.whole++;
          return cache.getWithAccounts(...args);
        };
        store.membersRun = async (...args) => {
          counts.runs++;
          if (args[2] === 0) counts.firstRuns++;
          const run = await cache.membersRun(...args);
          await after?.(args[2]);
          return run;
        };
        return { counts, store };
      };

      it('gives up an entry that changes between every run, never reading it in one step', async () => {
        const found = await seeded('restless', 1_200);
        let n = 0;
        const { counts, store } = counted(async (start) => {
          if (start > 0) await patchFirstOwner('restless', owner(100 + (n++ % 50)), false);
        });
        const views = new DetailsViews({ cache: store, maxBytes: 1 << 26, runMembers: 100 });
        views.warm(id, 'restless', found);
        await views.idle();
        expect(counts.firstRuns).toBe(3);
        expect(counts.whole).toBe(0);
        expect(views.peek(id, 'restless', found)).toBeUndefined();
        // A whole answer asked for still gets one, read in one step as a last resort.
        expect(await views.get(id, 'restless', found)).not.toBeNull();
        expect(counts.whole).toBe(1);
      });

      it('runs one at a time, a parent at most once in a while, and none a budget could not keep', async () => {
        const left = await seeded('left', 1_100);
        const right = await seeded('right', 1_100);
        const { counts, store } = counted();
        // A budget that holds one of the two views: each evicts the other.
        const one = (await new DetailsViews({ cache, maxBytes: 1 << 26 }).get(id, 'left', left))
          ?.view.bytes as number;
        const views = new DetailsViews({ cache: store, maxBytes: Math.floor(one * 1.5) });
        views.warm(id, 'left', left);
        views.warm(id, 'right', right); // one runs already: not begun
        await views.idle();
        expect(counts.firstRuns).toBe(1);
        for (let i = 0; i < 6; i++) {
          views.warm(id, i % 2 === 0 ? 'left' : 'right', i % 2 === 0 ? left : right);
          await views.idle();
        }
        // Once each within the while, however the two evict each other.
        expect(counts.firstRuns).toBe(2);
        expect(views.peek(id, 'right', right)).toBeDefined();
        // A view the budget could not keep is never begun.
        const small = new DetailsViews({ cache: store, maxBytes: 10_000 });
        small.warm(id, 'left', left);
        await small.idle();
        expect(counts.firstRuns).toBe(2);
      });

      it('does not read again at once an entry whose build failed', async () => {
        const found = await seeded('broken', 1_100);
        const members = redisKeys(gw.config.QUEUE_PREFIX).entryMembers(id, 'broken');
        const [account] = (await gw.redis.hkeys(members)) as [string];
        await gw.redis.hset(members, account, '[1]');
        const { counts, store } = counted();
        const views = new DetailsViews({ cache: store, maxBytes: 1 << 26 });
        for (let i = 0; i < 5; i++) {
          views.warm(id, 'broken', found);
          await views.idle();
        }
        expect(counts.firstRuns).toBe(1);
      });
    });

    it('cuts pages that concatenate to the whole answer, the labels of /subdomains', async () => {
      const whole = await gw.get('/subdomains/big/details');
      const rows = whole.body.result as Row[];
      expect(rows.map((r) => r.label)).toEqual((await gw.get('/subdomains/big')).body.result);
      const paged: Row[] = [];
      let after: string | null | undefined;
      do {
        const query = after === undefined ? '' : `&after=${encodeURIComponent(after as string)}`;
        const res = await gw.get(`/subdomains/big/details?limit=997${query}`);
        paged.push(...(res.body.result as Row[]));
        after = (res.body as { next?: string | null }).next;
      } while (after);
      expect(paged).toEqual(rows);
      const prefixed = await gw.get('/subdomains/big/details?prefix=b12&limit=5&after=b120');
      expect(prefixed.body).toEqual({
        s: 'ok',
        result: rows.filter((r) => r.label.startsWith('b12') && r.label > 'b120').slice(0, 5),
        next: 'b1204',
      });
      expect(prefixed.headers.get('x-total-count')).toBe('111');
    });

    it('renders a patched revision again, once, and answers with the change', async () => {
      const old = await gw.get('/subdomains/big/details');
      const oldPage = await gw.get('/subdomains/big/details?limit=1');
      const changed = await patchFirstOwner('big', owner(77), true);
      const before = await entryReads('big');
      // The refresh event drops the in-process copy's entry: the next lookup finds the patch,
      // its page is read by its labels, and the revision's view is read in the background.
      await waitFor(async () => {
        const res = await gw.get('/subdomains/big/details?limit=1');
        return (res.body.result as Row[])[0]?.owner === owner(77);
      });
      const page = await gw.get('/subdomains/big/details?limit=1');
      expect(page.headers.get('etag')).not.toBe(oldPage.headers.get('etag'));
      expect((await entryReads('big')).ranged).toBeGreaterThan(before.ranged);
      const replies = await many('/subdomains/big/details', 40, 8);
      expect((await entryReads('big')).whole - before.whole).toBe(1);
      for (const r of replies) {
        expect((r.body.result as Row[])[0]).toEqual({ ...changed, owner: owner(77) });
        expect(r.headers.get('etag')).not.toBe(old.headers.get('etag'));
      }
      // Cut from the view now, the page keeps the ETag it was read with.
      expect((await gw.get('/subdomains/big/details?limit=1')).headers.get('etag')).toBe(
        page.headers.get('etag'),
      );
    });

    it("tags a page by its bytes and total: kept across revisions that leave it, moved by the total's change", async () => {
      const first = await gw.get('/subdomains/big/details?limit=2');
      const last = (first.body.result as Row[])[1] as Row;
      // A change of another row: a new revision, the same page.
      const read = await cache.getWithAccounts(id, 'big');
      if (!read?.accounts) throw new Error('no accounts for big');
      const rows = detailsOf(read.accounts);
      const far = rows[rows.length - 1] as Row;
      const reverse = (key: string) => toBase58(reverseKeyFromDomainKey(key, domainKey('big')));
      let slot = (read.entry.slot ?? 0) + 1;
      const change = (account: string, member: readonly [string, string] | null) =>
        cache.applyChanges(id, 'big', [{ account, reverse: reverse(account), member }], slot++);
      await change(far.key, [far.label, owner(90)]);
      await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
        endpointId: id,
        parent: 'big',
        ok: true,
      });
      await waitFor(async () => {
        const res = await gw.get(`/subdomains/big/details?prefix=${far.label}`);
        return (res.body.result as Row[])[0]?.owner === owner(90);
      });
      const same = await gw.get('/subdomains/big/details?limit=2');
      expect(same.body).toEqual(first.body);
      expect(same.headers.get('etag')).toBe(first.headers.get('etag'));
      // A subdomain added after the page: the same rows, one more in the total.
      const added = toBase58(Buffer.alloc(32, 91));
      await change(added, ['zz-added', owner(91)]);
      await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
        endpointId: id,
        parent: 'big',
        ok: true,
      });
      await waitFor(async () => {
        const res = await gw.get('/subdomains/big/details?limit=2');
        return res.headers.get('x-total-count') !== first.headers.get('x-total-count');
      });
      const more = await gw.get('/subdomains/big/details?limit=2');
      expect((more.body.result as Row[])[1]).toEqual(last);
      expect(more.headers.get('etag')).not.toBe(first.headers.get('etag'));
      await change(added, null);
    });

    it('answers from a newer revision read since, without a read per request', async () => {
      // The in-process copy holds revision 1; a patch that announced nothing (a deletion check
      // that dropped nothing does not) makes revision 2, and this process has no view yet.
      expect((await gw.get('/subdomains/quiet')).headers.get('x-cache')).toBe('MISS');
      expect((await gw.get('/subdomains/quiet')).headers.get('x-cache')).toBe('HIT');
      const key = redisKeys(gw.config.QUEUE_PREFIX).entryMembers(id, 'quiet');
      const changed = await patchFirstOwner('quiet', owner(78), false);
      const before = await reads.of(key);
      const replies = await many('/subdomains/quiet/details', 30, 6);
      expect((await reads.of(key)) - before).toBe(1);
      for (const r of replies) {
        expect(r.status).toBe(200);
        expect(r.body.result).toEqual([{ ...changed, owner: owner(78) }]);
        expect(r.headers.get('x-cache')).toBe('HIT');
      }
    });

    it('tells a rewritten entry from the one it replaced, though both are revision 1', async () => {
      const key = redisKeys(gw.config.QUEUE_PREFIX).entryMembers(id, 'reborn');
      const first = await gw.get('/subdomains/reborn/details');
      const read = await cache.getWithAccounts(id, 'reborn');
      if (!read?.accounts) throw new Error('no accounts for reborn');
      expect(read.entry.rev).toBe(1);
      // The entry expires and a later scan writes it anew: revision 1 again, a later fetchedAt.
      await gw.redis.del(
        cache.key(id, 'reborn'),
        key,
        redisKeys(gw.config.QUEUE_PREFIX).entryLabels(id, 'reborn'),
      );
      const [subKey, [label]] = Object.entries(read.accounts)[0] as [string, [string, string]];
      const accounts: EntryAccounts = { [subKey]: [label, owner(79)] };
      const entry = { ...read.entry, labels: labelsOf(accounts), fetchedAt: Date.now() + 1 };
      await cache.put(id, 'reborn', ...withReverses('reborn', entry, accounts));
      expect((await cache.getWithAccounts(id, 'reborn'))?.entry.rev).toBe(1);
      const before = await reads.of(key);
      await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
        endpointId: id,
        parent: 'reborn',
        ok: true,
      });
      await waitFor(async () => {
        const res = await gw.get('/subdomains/reborn/details');
        return (res.body.result as Row[])[0]?.owner === owner(79);
      });
      await many('/subdomains/reborn/details', 20, 5);
      expect((await reads.of(key)) - before).toBe(1);
      expect((first.body.result as Row[])[0]?.owner).not.toBe(owner(79));
    });
  });
});

describe('the /details view', () => {
  // Labels JSON escapes (quotes, backslashes, controls, a lone surrogate), others it does not
  // (non-Latin-1, astral), and one label under two keys.
  const accounts: EntryAccounts = {
    k5: ['dup', 'o5'],
    k1: ['a"q\\b', 'o1'],
    k2: ['\u0001ctl\n', 'o2'],
    k3: ['ünï', 'o3'],
    k4: ['dup', 'o4'],
    k6: ['\ud800lone', 'o6'],
    k7: ['😀smile', 'o7'],
    k8: ['zeta', 'o8'],
  };
  const entry = { labels: [], fetchedAt: 1, rev: 3, slot: 9 };

  it('renders the bytes and ETag of the whole answer as JSON.stringify does', () => {
    const view = buildDetailsView(entry, accounts);
    const rows = detailsOf(accounts);
    expect(view.whole).toEqual(renderOk(rows));
    expect(view.labels).toEqual(rows.map((r) => r.label));
    expect(view.entry).toMatchObject({ rev: 3, fetchedAt: 1, slot: 9 });
    expect(buildDetailsView(entry, {}).whole).toEqual(renderOk([]));
  });

  it('cuts every page and prefix to the bytes renderPage gives for those rows', () => {
    const view = buildDetailsView(entry, accounts);
    const rows = detailsOf(accounts);
    const afters = [undefined, ...rows.map((r) => r.label), 'b', '\uffff'];
    for (const prefix of ['', 'd', 'z', 'nope', '\ud800'])
      for (const limit of [undefined, 1, 2, 3, 1000])
        for (const after of limit === undefined ? [undefined] : afters) {
          const req = { limit, after, prefix };
          const page = selectPage(view.labels, req);
          const cut = rowsText(view, page.start, page.labels.length);
          const rowsOfPage = rows.slice(page.start, page.start + page.labels.length);
          expect(JSON.parse(`[${cut}]`)).toEqual(rowsOfPage);
          expect(renderPageText(page, cut, req, view.whole.etag)).toEqual(
            renderPage(page, rowsOfPage, req, view.whole.etag),
          );
        }
  });
});
