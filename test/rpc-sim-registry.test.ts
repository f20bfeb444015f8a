/**
 * The simulator at registry scale: a seeded registry laid out as the SDK reads it, filtered
 * getProgramAccounts answered from the chain's indexes (the same accounts as a scan), and
 * getProgramAccountsV2 in Helius's wire format, or refused as most providers refuse it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  CENTRAL_STATE,
  NAME_PROGRAM_ID,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  findSubdomains,
  getDomainKeySync,
} from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_V2_LIMIT,
  SimChain,
  ZERO_KEY,
  seedRegistry,
  startRpcSimulator,
} from '../tools/rpc-sim/index.js';
import type { RpcSimulator, SeededRegistry } from '../tools/rpc-sim/index.js';
import { until } from './support/sim-ws.js';

const PROGRAM = NAME_PROGRAM_ID.toBase58();
const SMALL = {
  topLevel: 120,
  subdomains: 60,
  parents: 12,
  largest: 15,
  records: 40,
  v1Records: 25,
  orphanReverses: 10,
  seed: 7,
  domainSpace: 8,
  subdomainSpace: 8,
};

type Reply = { result?: unknown; error?: { code: number; message: string } };
type Keyed = { pubkey: string; account: { data: [string, string]; space: number } };
type Page = {
  accounts: Keyed[];
  paginationKey: string | null;
  totalResults?: number;
  context?: { slot: number; apiVersion: string };
};

async function call(url: string, method: string, params: unknown[]): Promise<Reply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Reply;
}

async function result<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const reply = await call(url, method, params);
  expect(reply.error).toBeUndefined();
  return reply.result as T;
}

const memcmp = (offset: number, bytes: Uint8Array) => ({
  memcmp: { offset, bytes: Buffer.from(bytes).toString('base64'), encoding: 'base64' },
});

/** Keys of the chain's name-program accounts passing `test`, by a scan of every account. */
function scanned(chain: SimChain, test: (data: Buffer) => boolean): string[] {
  const keys: string[] = [];
  for (const account of chain.accounts()) {
    if (account.owner.equals(NAME_PROGRAM_ID) && test(account.data)) {
      keys.push(account.pubkey.toBase58());
    }
  }
  return keys.sort();
}

/** Every page of a V2 walk; throws past 1,000 pages. */
async function walk(url: string, config: Record<string, unknown>): Promise<Page[]> {
  const pages: Page[] = [];
  let paginationKey: string | null = null;
  do {
    if (pages.length > 1000) throw new Error('pagination does not end');
    const page: Page = await result<Page>(url, 'getProgramAccountsV2', [
      PROGRAM,
      { ...config, ...(paginationKey === null ? {} : { paginationKey }) },
    ]);
    pages.push(page);
    paginationKey = page.paginationKey;
  } while (paginationKey !== null);
  return pages;
}

/** A simulator over a chain seeded with {@link SMALL}, the chain and what was seeded. */
async function seededSim(): Promise<{
  chain: SimChain;
  registry: SeededRegistry;
  sim: RpcSimulator;
}> {
  const chain = new SimChain();
  const registry = seedRegistry(chain, SMALL);
  return { chain, registry, sim: await startRpcSimulator({ chain }) };
}

describe('seedRegistry', () => {
  let chain: SimChain;
  let registry: SeededRegistry;
  let sim: RpcSimulator;

  beforeAll(async () => void ({ chain, registry, sim } = await seededSim()));
  afterAll(() => sim.close());

  it('writes each kind of account in the numbers asked', () => {
    expect(registry.names).toHaveLength(120);
    expect(registry.subdomains.size).toBe(12);
    const listed = [...registry.subdomains.values()].map((labels) => labels.length);
    expect(listed.reduce((a, b) => a + b, 0)).toBe(60);
    expect(Math.max(...listed)).toBe(15);
    expect(Math.min(...listed)).toBeGreaterThanOrEqual(1);
    expect(registry.subdomains.get(registry.largestParent ?? '')).toHaveLength(15);
    // 120 names and 60 subdomains with a reverse record each, 40 + 25 records, 10 orphans.
    expect(registry.accounts).toBe(2 * 120 + 2 * 60 + 40 + 25 + 10);
    expect(chain.size).toBe(registry.accounts);
    const at = (offset: number, key: PublicKey) => (data: Buffer) =>
      data.subarray(offset, offset + 32).equals(key.toBuffer());
    // Top-level reverse records: all-zero parent field, reverse-lookup class.
    const zeroParentReverses = scanned(
      chain,
      (d) => at(0, ZERO_KEY)(d) && at(64, REVERSE_LOOKUP_CLASS)(d),
    );
    expect(zeroParentReverses).toHaveLength(120);
    expect(scanned(chain, at(0, ROOT_DOMAIN_ACCOUNT))).toHaveLength(120);
    // Subdomains' reverse records and the orphans: a parent, the reverse-lookup class.
    const reverses = scanned(chain, (d) => !at(0, ZERO_KEY)(d) && at(64, REVERSE_LOOKUP_CLASS)(d));
    expect(reverses).toHaveLength(70);
  });

  it('lists, through the SDK, exactly the subdomains it says', async () => {
    const connection = new Connection(sim.url, 'confirmed');
    const parents = [...registry.subdomains.keys()].slice(0, 5);
    const without = registry.names.filter((n) => !registry.subdomains.has(n)).slice(0, 3);
    for (const name of [...parents, ...without, 'never-registered-name']) {
      const labels = await findSubdomains(connection, getDomainKeySync(name).pubkey);
      expect(labels.sort(), name).toEqual(registry.subdomains.get(name) ?? []);
    }
  });

  it('is the same registry from the same seed, another from another', () => {
    const again = seedRegistry(new SimChain(), SMALL);
    expect(again.names).toEqual(registry.names);
    expect([...again.subdomains]).toEqual([...registry.subdomains]);
    const other = seedRegistry(new SimChain(), { ...SMALL, seed: 8 });
    expect(other.names).not.toEqual(registry.names);
  });

  it('refuses counts that cannot be laid out', () => {
    expect(() => seedRegistry(new SimChain(), { topLevel: 5, subdomains: 10, parents: 6 })).toThrow(
      RangeError,
    );
    expect(() =>
      seedRegistry(new SimChain(), { topLevel: 5, subdomains: 10, parents: 3, largest: 9 }),
    ).toThrow(/largest/);
    expect(() => seedRegistry(new SimChain(), { topLevel: -1 })).toThrow(RangeError);
    expect(() => seedRegistry(new SimChain(), { topLevel: 0, records: 1 })).toThrow(RangeError);
  });
});

describe('filtered getProgramAccounts from the indexes', () => {
  let chain: SimChain;
  let registry: SeededRegistry;
  let sim: RpcSimulator;

  beforeAll(async () => void ({ chain, registry, sim } = await seededSim()));
  afterAll(() => sim.close());

  const keysOf = (list: Keyed[]) => list.map((a) => a.pubkey).sort();

  it('answers every shape of filter with the accounts a scan finds', async () => {
    const parent = getDomainKeySync(registry.largestParent ?? '').pubkey.toBuffer();
    const cases: Array<[string, unknown[], (d: Buffer) => boolean]> = [
      ['parent', [memcmp(0, parent)], (d) => d.subarray(0, 32).equals(parent)],
      [
        'parent and class',
        [memcmp(0, parent), memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())],
        (d) =>
          d.subarray(0, 32).equals(parent) &&
          d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()),
      ],
      [
        'class',
        [memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())],
        (d) => d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()),
      ],
      [
        'one-byte shard',
        [memcmp(0, parent.subarray(0, 1)), memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())],
        (d) => d[0] === parent[0] && d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()),
      ],
      [
        'two-byte shard',
        [memcmp(0, parent.subarray(0, 2))],
        (d) => d.subarray(0, 2).equals(parent.subarray(0, 2)),
      ],
      [
        'zero shard',
        [memcmp(0, Buffer.alloc(3)), memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())],
        (d) =>
          d.subarray(0, 3).equals(Buffer.alloc(3)) &&
          d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()),
      ],
      [
        'elsewhere',
        [memcmp(40, CENTRAL_STATE.toBuffer().subarray(8, 12))],
        (d) => d.subarray(40, 44).equals(CENTRAL_STATE.toBuffer().subarray(8, 12)),
      ],
      ['data size', [{ dataSize: 104 }], (d) => d.length === 104],
      [
        'class across the header',
        [
          memcmp(
            60,
            Buffer.concat([CENTRAL_STATE.toBuffer().subarray(28), REVERSE_LOOKUP_CLASS.toBuffer()]),
          ),
        ],
        (d) =>
          d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()) &&
          d.subarray(60, 64).equals(CENTRAL_STATE.toBuffer().subarray(28)),
      ],
    ];
    for (const [what, filters, test] of cases) {
      const list = await result<Keyed[]>(sim.url, 'getProgramAccounts', [
        PROGRAM,
        { encoding: 'base64', filters, dataSlice: { offset: 0, length: 0 } },
      ]);
      const expected = scanned(chain, test);
      expect(keysOf(list), what).toEqual(expected);
      expect(expected.length, what).toBeGreaterThan(0);
    }
  });

  it('reads one bucket for a parent, not the whole program', () => {
    const parent = getDomainKeySync(registry.largestParent ?? '').pubkey.toBuffer();
    const bucket = [...chain.candidates(PROGRAM, [{ offset: 0, bytes: parent }])];
    // The 15 subdomains, their 15 reverse records, and the records filed under that parent.
    expect(bucket.length).toBe(scanned(chain, (d) => d.subarray(0, 32).equals(parent)).length);
    expect(bucket.length).toBeLessThan(chain.size / 4);
    const shard = [...chain.candidates(PROGRAM, [{ offset: 0, bytes: Buffer.alloc(1) }])];
    expect(shard.length).toBeGreaterThanOrEqual(120); // every top-level reverse record
    expect(shard.length).toBeLessThan(chain.size / 2);
  });

  it('follows writes: additions, transfers and deletions move accounts between buckets', async () => {
    const parent = registry.largestParent ?? '';
    const parentKey = getDomainKeySync(parent).pubkey;
    const filters = [memcmp(0, parentKey.toBuffer()), memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())];
    const count = async () =>
      (await result<Keyed[]>(sim.url, 'getProgramAccounts', [PROGRAM, { filters }])).length;
    const before = await count();
    chain.addSubdomain(parent, 'zz-added');
    expect(await count()).toBe(before + 1);
    chain.transferSubdomain(parent, 'zz-added', new PublicKey(Buffer.alloc(32, 9)));
    expect(await count()).toBe(before + 1);
    chain.deleteSubdomain(parent, 'zz-added');
    expect(await count()).toBe(before);
  });

  it('answers as of the lag: a write younger than the HTTP lag is not seen yet', async () => {
    const lagged = await startRpcSimulator({ chain, httpLagMs: 60_000 });
    try {
      const parent = registry.largestParent ?? '';
      const parentKey = getDomainKeySync(parent).pubkey;
      const filters = [
        memcmp(0, parentKey.toBuffer()),
        memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer()),
      ];
      const before = await result<Keyed[]>(lagged.url, 'getProgramAccounts', [
        PROGRAM,
        { filters },
      ]);
      chain.addSubdomain(parent, 'zz-lagged');
      const after = await result<Keyed[]>(lagged.url, 'getProgramAccounts', [PROGRAM, { filters }]);
      expect(keysOf(after)).toEqual(keysOf(before));
      const now = await result<Keyed[]>(sim.url, 'getProgramAccounts', [PROGRAM, { filters }]);
      expect(now.length).toBe(before.length + 1);
      chain.deleteSubdomain(parent, 'zz-lagged');
    } finally {
      await lagged.close();
    }
  });
});

describe('getProgramAccountsV2', () => {
  let chain: SimChain;
  let sim: RpcSimulator;

  beforeAll(async () => void ({ chain, sim } = await seededSim()));
  afterAll(() => sim.close());

  it('pages through every account a filter passes, each once, pages never over the limit', async () => {
    const filters = [memcmp(64, REVERSE_LOOKUP_CLASS.toBuffer())];
    const pages = await walk(sim.url, { encoding: 'base64', filters, limit: 17 });
    const keys = pages.flatMap((p) => p.accounts.map((a) => a.pubkey));
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.sort()).toEqual(
      scanned(chain, (d) => d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer())),
    );
    expect(pages.length).toBeGreaterThan(5);
    for (const page of pages) {
      expect(page.accounts.length).toBeLessThanOrEqual(17);
      expect(page.totalResults).toBe(keys.length);
      expect(page.context).toBeUndefined();
    }
    expect(pages.at(-1)?.paginationKey).toBeNull();
  });

  it('keeps dataSlice, withContext and the account shape of getProgramAccounts', async () => {
    const page = await result<Page>(sim.url, 'getProgramAccountsV2', [
      PROGRAM,
      { encoding: 'base64', dataSlice: { offset: 0, length: 32 }, limit: 3, withContext: true },
    ]);
    expect(page.accounts).toHaveLength(3);
    for (const { account } of page.accounts) {
      expect(Buffer.from(account.data[0], 'base64')).toHaveLength(32);
      expect(account.data[1]).toBe('base64');
      expect(account.space).toBeGreaterThanOrEqual(96);
    }
    expect(page.context?.slot).toBeGreaterThan(0);
    expect(page.context?.apiVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(typeof page.paginationKey).toBe('string');
  });

  it('returns only accounts written after changedSinceSlot', async () => {
    const slot = chain.slot;
    const keys = chain.addSubdomain('v2-changes', 'fresh');
    const pages = await walk(sim.url, { changedSinceSlot: slot, limit: 50 });
    const changed = pages.flatMap((p) => p.accounts.map((a) => a.pubkey)).sort();
    // Pages are cut before filtering, as Helius's: pages of none go on to the end.
    expect(pages.length).toBeGreaterThan(5);
    expect(pages.slice(0, -1).some((p) => p.accounts.length === 0 && p.paginationKey)).toBe(true);
    const parentKey = getDomainKeySync('v2-changes').pubkey;
    const parentReverse = scanned(
      chain,
      (d) =>
        d.subarray(64, 96).equals(REVERSE_LOOKUP_CLASS.toBuffer()) &&
        d.subarray(100).toString() === 'v2-changes',
    );
    expect(changed).toEqual(
      [
        keys.subKey.toBase58(),
        keys.reverseKey.toBase58(),
        parentKey.toBase58(),
        ...parentReverse,
      ].sort(),
    );
  });

  it('refuses a limit outside 1..10,000 and a paginationKey that is no key', async () => {
    for (const limit of [0, MAX_V2_LIMIT + 1, 1.5, '10']) {
      const reply = await call(sim.url, 'getProgramAccountsV2', [PROGRAM, { limit }]);
      expect(reply.error?.code, String(limit)).toBe(-32602);
    }
    const reply = await call(sim.url, 'getProgramAccountsV2', [PROGRAM, { paginationKey: 'x!' }]);
    expect(reply.error?.code).toBe(-32602);
  });

  it('answers -32601 when refused, as most providers do, and again once served', async () => {
    const refusing = await startRpcSimulator({ chain, refusedMethods: ['getProgramAccountsV2'] });
    try {
      const reply = await call(refusing.url, 'getProgramAccountsV2', [PROGRAM, { limit: 1 }]);
      expect(reply.error).toEqual({ code: -32601, message: 'Method not found' });
      // getProgramAccounts still answers.
      const topLevel = await result<Keyed[]>(refusing.url, 'getProgramAccounts', [
        PROGRAM,
        { filters: [memcmp(0, ROOT_DOMAIN_ACCOUNT.toBuffer())] },
      ]);
      expect(topLevel.length).toBe(
        scanned(chain, (d) => d.subarray(0, 32).equals(ROOT_DOMAIN_ACCOUNT.toBuffer())).length,
      );
      refusing.setRefusedMethods([]);
      expect(refusing.refusedMethods).toEqual([]);
      const page = await result<Page>(refusing.url, 'getProgramAccountsV2', [
        PROGRAM,
        { limit: 1 },
      ]);
      expect(page.accounts).toHaveLength(1);
    } finally {
      await refusing.close();
    }
  });
});

describe('npm run rpc:sim registry options', () => {
  const cli = (args: string[]) =>
    spawn(process.execPath, ['--import', 'tsx', 'tools/rpc-sim/cli.ts', ...args], {
      env: { ...process.env, RPC_SIM_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  it('writes the registry the counts ask for, refuses V2 and lags', async () => {
    const child = cli([
      ...['--top-level', '80', '--subdomains', '30', '--subdomain-parents', '6'],
      ...['--largest-parent', '10', '--records', '12', '--v1-records', '6'],
      ...['--orphan-reverses', '4', '--seed', '5'],
      ...['--refuse', 'getProgramAccountsV2', '--http-lag-ms', '100'],
    ]);
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    try {
      await until(() => (out.includes('Ctrl-C') ? true : undefined), 'the banner', 60_000);
      expect(out).toContain('Registry (seed 5): 242 accounts');
      expect(out).toContain('HTTP reads see the chain as of 100 ms ago');
      expect(out).toContain('Refused with -32601 (--refuse): getProgramAccountsV2');
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1] ?? '';
      const largest = /largest parent: (\S+)\.sol \(10 subdomains\)/.exec(out)?.[1] ?? '';
      // The same seed, in this process: the CLI's registry is seedRegistry's.
      const expected = seedRegistry(new SimChain(), {
        ...{ topLevel: 80, subdomains: 30, parents: 6, largest: 10 },
        ...{ records: 12, v1Records: 6, orphanReverses: 4, seed: 5 },
      });
      expect(largest).toBe(expected.largestParent);
      const connection = new Connection(url, 'confirmed');
      const labels = await findSubdomains(connection, getDomainKeySync(largest).pubkey);
      expect(labels.sort()).toEqual(expected.subdomains.get(largest));
      const reply = await call(url, 'getProgramAccountsV2', [PROGRAM, { limit: 1 }]);
      expect(reply.error?.code).toBe(-32601);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }, 90_000);

  it('refuses a count that is not a whole number and a method it does not serve', async () => {
    for (const [args, says] of [
      [['--top-level', 'many'], '--top-level must be a whole number >= 0'],
      [['--refuse', 'simAddSubdomain'], '--refuse takes read methods'],
      [['--registry', 'huge'], '--registry takes "target"'],
    ] as const) {
      const child = cli([...args]);
      let err = '';
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const [code] = (await once(child, 'exit')) as [number];
      expect(code, says).not.toBe(0);
      expect(err).toContain(says);
    }
  }, 60_000);
});
