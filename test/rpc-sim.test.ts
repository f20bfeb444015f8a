import { randomBytes } from 'node:crypto';
import {
  CENTRAL_STATE,
  NAME_PROGRAM_ID,
  NameRegistryState,
  REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT,
  deserializeReverse,
  findSubdomains,
  getAllDomains,
  getDomainKeySync,
  getReverseKeySync,
  reverseLookup,
  reverseLookupBatch,
} from '@bonfida/spl-name-service';
import { Connection, PublicKey, SolanaJSONRPCError } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  DEFAULT_SIM_OWNER,
  SimChain,
  ZERO_KEY,
  encodeNameAccount,
  rentExemptLamports,
  seedDemoChain,
  startRpcSimulator,
} from '../tools/rpc-sim/index.js';
import type { RpcSimulator, SeededDomain, SimAccount } from '../tools/rpc-sim/index.js';
import { elapse } from './support/wait.js';

// ---- helpers ---------------------------------------------------------------------------

interface WireResponse {
  status: number;
  headers: Headers;
  text: string;
}

interface RpcReply {
  jsonrpc: string;
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

interface WireAccount {
  data: [string, string];
  executable: boolean;
  lamports: number;
  owner: string;
  rentEpoch: number;
  space: number;
}

interface KeyedWireAccount {
  pubkey: string;
  account: WireAccount;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = { 'Content-Type': 'application/json' },
): Promise<WireResponse> {
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

let nextId = 1;

/** Sends one JSON-RPC call and returns the parsed reply (asserting HTTP 200). */
async function rpc(url: string, method: string, params?: unknown[]): Promise<RpcReply> {
  const id = nextId++;
  const res = await post(url, { jsonrpc: '2.0', id, method, params });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  const reply = JSON.parse(res.text) as RpcReply;
  expect(reply.id).toBe(id);
  return reply;
}

async function result<T>(url: string, method: string, params?: unknown[]): Promise<T> {
  const reply = await rpc(url, method, params);
  expect(reply.error).toBeUndefined();
  return reply.result as T;
}

async function errorOf(url: string, method: string, params?: unknown[]): Promise<number> {
  const reply = await rpc(url, method, params);
  expect(reply.result).toBeUndefined();
  return reply.error?.code ?? 0;
}

function connect(sim: RpcSimulator): Connection {
  return new Connection(sim.url, { commitment: 'confirmed', disableRetryOnRateLimit: true });
}

const sorted = (names: string[]): string[] => [...names].sort();

const b64 = (data: Uint8Array): string => Buffer.from(data).toString('base64');

/** The stored account at `key`; fails the test if there is none. */
function must(chain: SimChain, key: PublicKey): SimAccount {
  const account = chain.getAccount(key);
  if (!account) throw new Error(`no account at ${key.toBase58()}`);
  return account;
}

// ---- chain layout ----------------------------------------------------------------------

describe('SimChain layout', () => {
  it('lays a subdomain and its reverse record out as createSubdomain does', () => {
    const chain = new SimChain();
    const parentKey = chain.addDomain('67679');
    const { subKey, reverseKey } = chain.addSubdomain('67679', 'bullish');

    expect(subKey.equals(getDomainKeySync('bullish.67679').pubkey)).toBe(true);
    expect(reverseKey.equals(getReverseKeySync('bullish.67679', true))).toBe(true);

    const sub = must(chain, subKey);
    expect(sub.owner.equals(NAME_PROGRAM_ID)).toBe(true);
    expect(sub.data.length).toBe(96 + 2000);
    const subHeader = NameRegistryState.deserialize(sub.data);
    expect(subHeader.parentName.equals(parentKey)).toBe(true);
    expect(subHeader.owner.equals(DEFAULT_SIM_OWNER)).toBe(true);
    expect(subHeader.class.equals(ZERO_KEY)).toBe(true);

    const reverse = must(chain, reverseKey);
    expect(reverse.owner.equals(NAME_PROGRAM_ID)).toBe(true);
    const reverseHeader = NameRegistryState.deserialize(reverse.data);
    expect(reverseHeader.parentName.equals(parentKey)).toBe(true);
    expect(reverseHeader.owner.equals(CENTRAL_STATE)).toBe(true);
    expect(reverseHeader.class.equals(REVERSE_LOOKUP_CLASS)).toBe(true);
    const body = reverse.data.subarray(96);
    expect(body.toString('hex')).toBe('08000000' + Buffer.from('\0bullish').toString('hex'));
    expect(deserializeReverse(body, true)).toBe('bullish');
    expect(deserializeReverse(body)).toBe('\0bullish');
    expect(sub.lamports).toBe(rentExemptLamports(96 + 2000));
  });

  it('lays a top-level domain and its reverse record out as the registrar does', () => {
    const chain = new SimChain();
    const owner = new PublicKey(randomBytes(32));
    const key = chain.addDomain('bonfida.sol', owner);
    expect(key.equals(getDomainKeySync('bonfida').pubkey)).toBe(true);
    const domain = must(chain, key);
    expect(domain.data.length).toBe(96 + 1000);
    const header = NameRegistryState.deserialize(domain.data);
    expect(header.parentName.equals(ROOT_DOMAIN_ACCOUNT)).toBe(true);
    expect(header.owner.equals(owner)).toBe(true);
    expect(header.class.equals(ZERO_KEY)).toBe(true);

    const reverse = must(chain, getReverseKeySync('bonfida'));
    const reverseHeader = NameRegistryState.deserialize(reverse.data);
    expect(reverseHeader.parentName.equals(ZERO_KEY)).toBe(true);
    expect(reverseHeader.class.equals(REVERSE_LOOKUP_CLASS)).toBe(true);
    expect(deserializeReverse(reverse.data.subarray(96))).toBe('bonfida');
  });

  it('creates a missing parent, inherits its owner, honours options', () => {
    const chain = new SimChain();
    const owner = new PublicKey(randomBytes(32));
    chain.addDomain('mine', owner);
    const { subKey } = chain.addSubdomain('mine', 'a', { space: 10, reverse: false });
    expect(chain.getAccount(subKey)?.data.length).toBe(106);
    expect(NameRegistryState.deserialize(must(chain, subKey).data).owner.equals(owner)).toBe(true);
    expect(chain.size).toBe(3); // mine, its reverse record, mine/a

    const { parentKey } = chain.addSubdomain('fresh', 'b');
    expect(chain.getAccount(parentKey)).toBeDefined();
    expect(chain.size).toBe(3 + 4);
  });

  it('addOrphanReverse leaves no name account', () => {
    const chain = new SimChain();
    const { subKey } = chain.addSubdomain('p', 'gone');
    const orphan = chain.addOrphanReverse('p', 'gone');
    expect(orphan.subKey.equals(subKey)).toBe(true);
    expect(chain.getAccount(subKey)).toBeUndefined();
    expect(chain.getAccount(orphan.reverseKey)).toBeDefined();
  });

  it('advances the slot on mutations, copies data, rejects bad names', () => {
    const chain = new SimChain({ slot: 10 });
    const key = new PublicKey(randomBytes(32));
    const data = Buffer.from([1, 2, 3]);
    chain.setAccount(key, { data, lamports: 5 });
    expect(chain.slot).toBe(11);
    data[0] = 9;
    const copy = chain.getAccount(key);
    expect(copy?.data).toEqual(Buffer.from([1, 2, 3]));
    expect(copy?.lamports).toBe(5);
    expect([...chain.accounts()]).toHaveLength(1);
    expect(chain.deleteAccount(key)).toBe(true);
    expect(chain.deleteAccount(key)).toBe(false);
    expect(chain.slot).toBe(12);
    expect(() => chain.addDomain('a.b')).toThrow(/top-level/);
    expect(() => chain.addSubdomain('a', 'b.c')).toThrow(/without dots/);
    expect(() => chain.addSubdomain('a', '')).toThrow(/without dots/);
  });
});

// ---- SDK and web3.js against the simulator ---------------------------------------------

describe('web3.js Connection and the SNS SDK against the simulator', () => {
  let sim: RpcSimulator;
  let connection: Connection;
  let seeded: SeededDomain[];

  beforeAll(async () => {
    const chain = new SimChain();
    seeded = seedDemoChain(chain);
    sim = await startRpcSimulator({ chain });
    connection = connect(sim);
  });
  afterAll(() => sim.close());

  it('findSubdomains(67679) gives the mainnet subdomains', async () => {
    sim.resetCalls();
    const subs = await findSubdomains(connection, getDomainKeySync('67679').pubkey);
    expect(sorted(subs)).toEqual(['bullish', 'hollaaa', 'testing']);
    expect(sim.callCount('getProgramAccounts')).toBe(2);
    expect(sim.callCount()).toBe(2);
  });

  it('findSubdomains skips subdomains without reverse record and orphan reverse records', async () => {
    for (const domain of seeded) {
      const subs = await findSubdomains(connection, domain.key);
      expect(sorted(subs), domain.name).toEqual(domain.expectedSubdomains);
    }
    const demo = seeded.find((d) => d.name === 'demo');
    expect(demo?.withoutReverse).toEqual(['noreverse']);
    expect(demo?.orphanReverses).toEqual(['ghost']);
    // The accounts are there all the same.
    const noreverse = getDomainKeySync('noreverse.demo').pubkey;
    expect(await connection.getAccountInfo(noreverse)).not.toBeNull();
    const ghost = getDomainKeySync('ghost.demo').pubkey;
    expect(await connection.getAccountInfo(ghost)).toBeNull();
    expect(await connection.getAccountInfo(getReverseKeySync('ghost.demo', true))).not.toBeNull();
  });

  it('reverseLookup, getAllDomains and reverseLookupBatch work', async () => {
    expect(await reverseLookup(connection, getDomainKeySync('bonfida').pubkey)).toBe('bonfida');
    const sub = getDomainKeySync('hollaaa.67679');
    expect(await reverseLookup(connection, sub.pubkey, sub.parent)).toBe('hollaaa');
    const { registry } = await NameRegistryState.retrieve(connection, sub.pubkey);
    expect(registry.parentName.equals(getDomainKeySync('67679').pubkey)).toBe(true);

    const domains = await getAllDomains(connection, DEFAULT_SIM_OWNER);
    const names = await reverseLookupBatch(connection, domains);
    expect(sorted(names.map(String))).toEqual(['67679', 'bonfida', 'demo', 'empty']);
  });

  it('findSubdomains works for a parent with 1000 subdomains', { timeout: 60_000 }, async () => {
    const labels = Array.from({ length: 1000 }, (_, i) => `sub${i}`);
    for (const label of labels) sim.chain.addSubdomain('thousand', label);
    const subs = await findSubdomains(connection, getDomainKeySync('thousand').pubkey);
    expect(sorted(subs)).toEqual(sorted(labels));
  });

  it('answers getProgramAccounts with memcmp, dataSlice and withContext', async () => {
    const parent = getDomainKeySync('demo').pubkey;
    const withContext = await connection.getProgramAccounts(NAME_PROGRAM_ID, {
      filters: [{ memcmp: { offset: 0, bytes: parent.toBase58() } }],
      dataSlice: { offset: 64, length: 32 },
      withContext: true,
    });
    expect(withContext.context.slot).toBeGreaterThan(0);
    // alpha, beta, gamma, noreverse + reverse records of alpha, beta, gamma, ghost
    expect(withContext.value).toHaveLength(8);
    const classes = withContext.value.map((a) => new PublicKey(a.account.data).toBase58());
    expect(classes.filter((c) => c === REVERSE_LOOKUP_CLASS.toBase58())).toHaveLength(4);
    expect(classes.filter((c) => c === ZERO_KEY.toBase58())).toHaveLength(4);
    for (const { account } of withContext.value) {
      expect(account.owner.equals(NAME_PROGRAM_ID)).toBe(true);
      expect(account.executable).toBe(false);
    }

    const plain = await connection.getProgramAccounts(NAME_PROGRAM_ID, {
      filters: [
        { memcmp: { offset: 0, bytes: parent.toBase58() } },
        { memcmp: { offset: 64, bytes: REVERSE_LOOKUP_CLASS.toBase58() } },
      ],
    });
    expect(
      sorted(plain.map((a) => String(deserializeReverse(a.account.data.subarray(96), true)))),
    ).toEqual(['alpha', 'beta', 'gamma', 'ghost']);
  });

  it('answers getMultipleAccounts and getAccountInfo', async () => {
    const present = getDomainKeySync('bonfida').pubkey;
    const missing = new PublicKey(randomBytes(32));
    const infos = await connection.getMultipleAccountsInfo([present, missing, present], {
      dataSlice: { offset: 32, length: 32 },
    });
    expect(infos[1]).toBeNull();
    expect(infos[0]?.data.equals(DEFAULT_SIM_OWNER.toBuffer())).toBe(true);
    expect(infos[2]?.data.equals(DEFAULT_SIM_OWNER.toBuffer())).toBe(true);
    expect(await connection.getAccountInfo(missing)).toBeNull();
    const full = await connection.getAccountInfo(present);
    expect(full?.data.length).toBe(1096);
    expect(full?.lamports).toBe(rentExemptLamports(1096));
    const slot = await connection.getSlot();
    expect(await connection.getSlot()).toBeGreaterThan(slot);
    expect((await connection.getVersion())['solana-core']).toBe('2.2.0');
  });
});

// ---- wire format -----------------------------------------------------------------------

describe('JSON-RPC wire format', () => {
  let sim: RpcSimulator;
  const program = new PublicKey(randomBytes(32));
  const keys = Array.from({ length: 3 }, () => new PublicKey(randomBytes(32)));
  const datas = [Buffer.from('aaaabbbbcccc'), Buffer.from('aaaaxxxx'), Buffer.from('zz')];

  beforeAll(async () => {
    const chain = new SimChain();
    keys.forEach((key, i) =>
      chain.setAccount(key, { data: datas[i] ?? Buffer.alloc(0), owner: program, lamports: 7 }),
    );
    chain.addDomain('other-program'); // owned by the name program: never listed below
    sim = await startRpcSimulator({ chain, maxBodyBytes: 8192 });
  });
  afterAll(() => sim.close());

  const gpa = (config: Record<string, unknown>): Promise<KeyedWireAccount[]> =>
    result<KeyedWireAccount[]>(sim.url, 'getProgramAccounts', [program.toBase58(), config]);
  const pubkeysOf = (list: KeyedWireAccount[]): string[] => sorted(list.map((a) => a.pubkey));

  it('answers getProgramAccounts with the real account shape', async () => {
    const res = await post(sim.url, {
      jsonrpc: '2.0',
      id: 'abc',
      method: 'getProgramAccounts',
      params: [program.toBase58(), { encoding: 'base64' }],
    });
    expect(res.text).toContain('"rentEpoch":18446744073709551615');
    const reply = JSON.parse(res.text) as RpcReply;
    expect(reply.id).toBe('abc');
    const list = reply.result as KeyedWireAccount[];
    expect(pubkeysOf(list)).toEqual(sorted(keys.map((k) => k.toBase58())));
    const first = list.find((a) => a.pubkey === keys[0]?.toBase58());
    expect(first?.account).toEqual({
      data: [b64(Buffer.from('aaaabbbbcccc')), 'base64'],
      executable: false,
      lamports: 7,
      owner: program.toBase58(),
      rentEpoch: 2 ** 64, // what JSON.parse makes of u64::MAX
      space: 12,
    });
  });

  it('filters by memcmp (base58 and base64) and dataSize', async () => {
    const aaaa = pubkeysOf(
      await gpa({
        filters: [{ memcmp: { offset: 0, bytes: b64(Buffer.from('aaaa')), encoding: 'base64' } }],
      }),
    );
    expect(aaaa).toEqual(sorted([keys[0], keys[1]].map((k) => k?.toBase58() ?? '')));
    const xxxx = await gpa({
      filters: [{ memcmp: { offset: 4, bytes: b64(Buffer.from('xxxx')), encoding: 'base64' } }],
    });
    expect(xxxx.map((a) => a.pubkey)).toEqual([keys[1]?.toBase58()]);
    const bySize = await gpa({ filters: [{ dataSize: 2 }] });
    expect(bySize.map((a) => a.pubkey)).toEqual([keys[2]?.toBase58()]);
    // A memcmp reaching past the end of the data does not match.
    const pastEnd = await gpa({
      filters: [{ memcmp: { offset: 1, bytes: b64(Buffer.from('zz')), encoding: 'base64' } }],
    });
    expect(pastEnd).toEqual([]);
    const both = await gpa({
      filters: [
        { dataSize: 8 },
        { memcmp: { offset: 0, bytes: b64(Buffer.from('aaaa')), encoding: 'base64' } },
      ],
    });
    expect(both.map((a) => a.pubkey)).toEqual([keys[1]?.toBase58()]);
    // Base58 memcmp bytes (web3.js' default encoding, also when `encoding` is left out).
    for (const encoding of ['base58', undefined]) {
      const list = await gpa({ filters: [{ memcmp: { offset: 4, bytes: '45bymq', encoding } }] });
      expect(list.map((a) => a.pubkey)).toEqual([keys[1]?.toBase58()]); // '45bymq' = base58("xxxx")
    }
  });

  it('cuts data with dataSlice, clamped to the data, and reports the full space', async () => {
    const list = await gpa({ dataSlice: { offset: 4, length: 6 } });
    const byKey = new Map(list.map((a) => [a.pubkey, a.account]));
    expect(byKey.get(keys[0]?.toBase58() ?? '')?.data).toEqual([
      b64(Buffer.from('bbbbcc')),
      'base64',
    ]);
    expect(byKey.get(keys[1]?.toBase58() ?? '')?.data).toEqual([
      b64(Buffer.from('xxxx')),
      'base64',
    ]);
    expect(byKey.get(keys[2]?.toBase58() ?? '')?.data).toEqual(['', 'base64']);
    expect(byKey.get(keys[0]?.toBase58() ?? '')?.space).toBe(12);
  });

  it('wraps results in a context with withContext', async () => {
    const value = await result<{ context: { slot: number; apiVersion: string }; value: unknown[] }>(
      sim.url,
      'getProgramAccounts',
      [program.toBase58(), { withContext: true, filters: [{ dataSize: 2 }] }],
    );
    expect(value.context.apiVersion).toBe('2.2.0');
    expect(value.context.slot).toBeGreaterThan(0);
    expect(value.value).toHaveLength(1);
  });

  it('serves base58 encoding for small data and refuses it for data over 128 bytes', async () => {
    const list = await gpa({ encoding: 'base58', filters: [{ dataSize: 2 }] });
    expect(list[0]?.account.data).toEqual(['AKb', 'base58']); // base58("zz")
    const big = new PublicKey(randomBytes(32));
    sim.chain.setAccount(big, { data: Buffer.alloc(200), owner: new PublicKey(randomBytes(32)) });
    expect(await errorOf(sim.url, 'getAccountInfo', [big.toBase58(), { encoding: 'base58' }])).toBe(
      -32600,
    );
    const sliced = await result<{ value: WireAccount }>(sim.url, 'getAccountInfo', [
      big.toBase58(),
      { encoding: 'base58', dataSlice: { offset: 0, length: 3 } },
    ]);
    expect(sliced.value.data).toEqual(['111', 'base58']);
  });

  it('answers getMultipleAccounts in order with nulls for missing accounts', async () => {
    const missing = new PublicKey(randomBytes(32)).toBase58();
    const value = await result<{ context: { slot: number }; value: (WireAccount | null)[] }>(
      sim.url,
      'getMultipleAccounts',
      [
        [keys[2]?.toBase58(), missing, keys[0]?.toBase58()],
        { encoding: 'base64', dataSlice: { offset: 0, length: 1 } },
      ],
    );
    expect(value.context.slot).toBeGreaterThan(0);
    expect(value.value.map((a) => a?.data[0] ?? null)).toEqual([
      b64(Buffer.from('z')),
      null,
      b64(Buffer.from('a')),
    ]);
    const tooMany = Array.from({ length: 101 }, () => missing);
    expect(await errorOf(sim.url, 'getMultipleAccounts', [tooMany])).toBe(-32602);
  });

  it('answers getSlot, getHealth, getVersion', async () => {
    const slot = await result<number>(sim.url, 'getSlot');
    expect(await result<number>(sim.url, 'getSlot', [{ commitment: 'finalized' }])).toBeGreaterThan(
      slot,
    );
    expect(await result<string>(sim.url, 'getHealth')).toBe('ok');
    expect(await result<unknown>(sim.url, 'getVersion')).toEqual({
      'solana-core': '2.2.0',
      'feature-set': 1,
    });
  });

  it('answers JSON-RPC errors for unknown methods, bad params and bad bodies', async () => {
    expect(await errorOf(sim.url, 'getBlock', [1])).toBe(-32601);
    const reply = await rpc(sim.url, 'sendTransaction', []);
    expect(reply).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not found' },
    });
    expect(await errorOf(sim.url, 'getAccountInfo', ['not-a-key'])).toBe(-32602);
    expect(await errorOf(sim.url, 'getAccountInfo', [])).toBe(-32602);
    expect(
      await errorOf(sim.url, 'getProgramAccounts', [
        program.toBase58(),
        { encoding: 'base64+zstd' },
      ]),
    ).toBe(-32602);
    const fiveFilters = Array.from({ length: 5 }, () => ({ dataSize: 1 }));
    expect(
      await errorOf(sim.url, 'getProgramAccounts', [program.toBase58(), { filters: fiveFilters }]),
    ).toBe(-32602);
    expect(
      await errorOf(sim.url, 'getProgramAccounts', [
        program.toBase58(),
        { filters: [{ memcmp: { offset: 0, bytes: '0OIl' } }] },
      ]),
    ).toBe(-32602);
    expect(await errorOf(sim.url, 'getSlot', [{ commitment: 'soon' }])).toBe(-32602);
    expect(await errorOf(sim.url, 'getSlot', [{ minContextSlot: 1e12 }])).toBe(-32016);

    const parse = await post(sim.url, '{"jsonrpc":"2.0",');
    expect(parse.status).toBe(200);
    expect(JSON.parse(parse.text)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
    });
    const invalid = JSON.parse(
      (await post(sim.url, { id: 3, method: 'getSlot' })).text,
    ) as RpcReply;
    expect(invalid.error?.code).toBe(-32600);
    expect(invalid.id).toBe(3);
  });

  it('serves batches, one call record per element', async () => {
    sim.resetCalls();
    const res = await post(sim.url, [
      { jsonrpc: '2.0', id: 1, method: 'getSlot' },
      { jsonrpc: '2.0', id: 'two', method: 'getHealth' },
      { jsonrpc: '2.0', id: 3, method: 'noSuchMethod' },
      { jsonrpc: '2.0', id: 4, method: 'getAccountInfo', params: [keys[2]?.toBase58()] },
      { jsonrpc: '2.0', method: 'getHealth' }, // notification: no answer
    ]);
    const replies = JSON.parse(res.text) as RpcReply[];
    expect(replies.map((r) => r.id)).toEqual([1, 'two', 3, 4]);
    expect(replies[1]?.result).toBe('ok');
    expect(replies[2]?.error?.code).toBe(-32601);
    expect((replies[3]?.result as { value: WireAccount }).value.data).toEqual([
      b64(Buffer.from('zz')),
      'base64',
    ]);
    expect(sim.calls.map((c) => c.method)).toEqual([
      'getSlot',
      'getHealth',
      'noSuchMethod',
      'getAccountInfo',
      'getHealth',
    ]);
    expect(sim.callCount('getHealth')).toBe(2);
    expect(sim.calls[3]?.params).toEqual([keys[2]?.toBase58()]);
    // Each row holds its own element's bytes: body = rows + commas + brackets.
    const rowBytes = sim.calls.reduce((sum, c) => sum + c.responseBytes, 0);
    expect(Buffer.byteLength(res.text)).toBe(rowBytes + 3 + 2);
    expect(sim.calls[4]?.responseBytes).toBe(0);

    const empty = JSON.parse((await post(sim.url, [])).text) as RpcReply;
    expect(empty.error?.code).toBe(-32600);

    sim.resetCalls();
    const single = await post(sim.url, { jsonrpc: '2.0', id: 9, method: 'getHealth' });
    expect(sim.calls).toEqual([
      {
        method: 'getHealth',
        params: undefined,
        responseBytes: Buffer.byteLength(single.text),
        fault: undefined,
      },
    ]);
  });

  it('answers HTTP-level errors: 405, GET /health, 415, 413', async () => {
    const get = await fetch(sim.url);
    expect(get.status).toBe(405);
    await get.text();
    const health = await fetch(`${sim.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe('ok');
    const wrongType = await post(
      sim.url,
      { jsonrpc: '2.0', id: 1, method: 'getSlot' },
      { 'Content-Type': 'text/plain' },
    );
    expect(wrongType.status).toBe(415);
    const tooBig = await post(sim.url, {
      jsonrpc: '2.0',
      id: 1,
      method: 'getSlot',
      params: ['x'.repeat(10_000)],
    });
    expect(tooBig.status).toBe(413);
    // Any path works.
    expect(
      JSON.parse(
        (await post(`${sim.url}/some/path?x=1`, { jsonrpc: '2.0', id: 1, method: 'getHealth' }))
          .text,
      ),
    ).toMatchObject({ result: 'ok' });
  });
});

// ---- faults ----------------------------------------------------------------------------

describe('fault injection', () => {
  let sim: RpcSimulator;
  const call = { jsonrpc: '2.0', id: 1, method: 'getSlot' };

  beforeAll(async () => {
    sim = await startRpcSimulator();
  });
  afterAll(() => sim.close());

  it('rpc-error answers HTTP 200 with a JSON-RPC error', async () => {
    sim.setFaults([
      { kind: 'rpc-error', code: -32005, message: 'Node is behind by 42 slots', times: 1 },
    ]);
    const res = await post(sim.url, call);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32005, message: 'Node is behind by 42 slots' },
      id: 1,
    });
    expect(await result<number>(sim.url, 'getSlot')).toBeGreaterThan(0); // times: 1 used up

    sim.setFaults([{ kind: 'rpc-error' }]);
    const error = await connect(sim)
      .getSlot()
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(SolanaJSONRPCError);
    expect((error as SolanaJSONRPCError).code).toBe(-32603);
    sim.setFaults([]);
  });

  it('http answers the status, Retry-After and body', async () => {
    sim.setFaults([{ kind: 'http', status: 429, retryAfterSeconds: 7, times: 2 }]);
    for (let i = 0; i < 2; i++) {
      const res = await post(sim.url, call);
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(res.text).toBe('Too Many Requests');
    }
    expect((await post(sim.url, call)).status).toBe(200);

    sim.setFaults([
      { kind: 'http', status: 503, body: 'upstream down', times: 1 },
      { kind: 'http', status: 500, times: 1 },
    ]);
    const first = await post(sim.url, call);
    expect([first.status, first.text, first.headers.get('retry-after')]).toEqual([
      503,
      'upstream down',
      null,
    ]);
    const second = await post(sim.url, call);
    expect([second.status, second.text]).toEqual([500, 'Internal Server Error']);
    expect((await post(sim.url, call)).status).toBe(200);
  });

  it('web3.js retries a 429 and fails on 5xx', async () => {
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      sim.setFaults([{ kind: 'http', status: 429, retryAfterSeconds: 1, times: 1 }]);
      const retrying = new Connection(sim.url, 'confirmed');
      expect(await retrying.getSlot()).toBeGreaterThan(0);
      expect(quiet).toHaveBeenCalledWith(expect.stringContaining('429'));
    } finally {
      quiet.mockRestore();
    }
    sim.setFaults([{ kind: 'http', status: 503, times: 1 }]);
    await expect(connect(sim).getSlot()).rejects.toThrow(/503/);
  });

  it('garbage answers HTTP 200 with a body that is not JSON', async () => {
    sim.setFaults([{ kind: 'garbage', times: 1 }]);
    const res = await post(sim.url, call);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(() => JSON.parse(res.text) as unknown).toThrow();
    sim.setFaults([{ kind: 'garbage', times: 1 }]);
    await expect(connect(sim).getSlot()).rejects.toThrow();
  });

  it('delay answers normally after the delay', async () => {
    sim.resetCalls();
    sim.setFaults([{ kind: 'delay', ms: 200, times: 1 }]);
    const started = performance.now();
    const pending = post(sim.url, call);
    // The call is recorded when it is answered, not while the delay runs.
    await elapse(100);
    expect(sim.callCount()).toBe(0);
    const res = await pending;
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(JSON.parse(res.text)).toMatchObject({ id: 1, result: expect.any(Number) as unknown });
    expect(sim.calls).toStrictEqual([
      {
        method: 'getSlot',
        params: undefined,
        responseBytes: Buffer.byteLength(res.text),
        fault: 'delay',
      },
    ]);
  });

  it('reset destroys the connection', async () => {
    sim.setFaults([{ kind: 'reset', times: 1 }]);
    await expect(post(sim.url, call)).rejects.toThrow();
    expect((await post(sim.url, call)).status).toBe(200);
  });

  it('scopes faults by method and times, also inside batches', async () => {
    sim.resetCalls();
    sim.setFaults([
      { kind: 'rpc-error', code: -32009, message: 'scoped', method: 'getAccountInfo', times: 2 },
    ]);
    const key = new PublicKey(randomBytes(32)).toBase58();
    expect(await result<number>(sim.url, 'getSlot')).toBeGreaterThan(0); // other methods pass
    expect(await errorOf(sim.url, 'getAccountInfo', [key])).toBe(-32009);
    // A batch matches if one element does; only that element gets the error.
    const res = await post(sim.url, [
      { jsonrpc: '2.0', id: 1, method: 'getHealth' },
      { jsonrpc: '2.0', id: 2, method: 'getAccountInfo', params: [key] },
    ]);
    const replies = JSON.parse(res.text) as RpcReply[];
    expect(replies[0]?.result).toBe('ok');
    expect(replies[1]?.error?.code).toBe(-32009);
    // times: 2 used up.
    expect(await result<{ value: null }>(sim.url, 'getAccountInfo', [key])).toMatchObject({
      value: null,
    });
    expect(sim.calls.map((c) => c.fault)).toEqual([
      undefined,
      'rpc-error',
      'rpc-error',
      'rpc-error',
      undefined,
    ]);

    // A whole-request fault hits the whole batch.
    sim.setFaults([{ kind: 'http', status: 500, method: 'getHealth' }]);
    expect((await post(sim.url, [call, { ...call, method: 'getHealth' }])).status).toBe(500);
    expect((await post(sim.url, call)).status).toBe(200);
    sim.setFaults([]);
    expect((await post(sim.url, { ...call, method: 'getHealth' })).status).toBe(200);
  });

  it('rejects invalid faults', () => {
    expect(() => sim.setFaults([{ kind: 'http', status: 99 }])).toThrow(TypeError);
    expect(() => sim.setFaults([{ kind: 'hang', times: 0 }])).toThrow(TypeError);
    expect(() => sim.setFaults([{ kind: 'delay', ms: -1 }])).toThrow(TypeError);
  });

  it('hang never answers, and close() ends the request', async () => {
    const own = await startRpcSimulator();
    own.setFaults([{ kind: 'hang' }]);
    const pending = post(own.url, call);
    let settledAs = 'pending';
    const outcome = pending.then(
      () => (settledAs = 'answered'),
      () => (settledAs = 'failed'),
    );
    await vi.waitFor(() => expect(own.callCount('getSlot')).toBe(1));
    // Time is the subject: nothing may come back while the hang lasts.
    await elapse(200);
    expect(settledAs).toBe('pending');
    const started = performance.now();
    await own.close();
    expect(await outcome).toBe('failed');
    expect(performance.now() - started).toBeLessThan(1000);
    expect(own.calls[0]).toMatchObject({ method: 'getSlot', responseBytes: 0, fault: 'hang' });
    await own.close(); // idempotent
  });
});

// ---- large reads -------------------------------------------------------------------------
// How fast the simulator answers is a benchmark's figure, not a test's: here, that it answers a
// large program whole and that a filtered read walks the parent's accounts only (the field index
// that keeps the benches' reads cheap), not the whole program.

describe('large reads', () => {
  it(
    "answers getProgramAccounts over 20,000 accounts, a filtered read walking one parent's",
    { timeout: 60_000 },
    async () => {
      const chain = new SimChain();
      const parents = Array.from({ length: 20 }, () => new PublicKey(randomBytes(32)));
      for (let i = 0; i < 20_000; i++) {
        const parent = parents[i % parents.length] ?? ZERO_KEY;
        const nameClass = Math.floor(i / parents.length) % 2 ? REVERSE_LOOKUP_CLASS : ZERO_KEY;
        chain.setAccount(new PublicKey(randomBytes(32)), {
          data: encodeNameAccount(
            { parent, owner: DEFAULT_SIM_OWNER, nameClass },
            Buffer.alloc(200),
          ),
        });
      }
      const parent = parents[0] ?? ZERO_KEY;
      const program = NAME_PROGRAM_ID.toBase58();
      // The accounts the filtered read below walks: the parent's 1,000 (of which 500 of the
      // reverse-lookup class pass), never the 20,000.
      const walked = [
        ...chain.candidates(program, [
          { offset: 0, bytes: parent.toBuffer() },
          { offset: 64, bytes: REVERSE_LOOKUP_CLASS.toBuffer() },
        ]),
      ];
      expect(walked).toHaveLength(1000);
      const sim = await startRpcSimulator({ chain });
      try {
        const read = (config: Record<string, unknown>) =>
          result<unknown[]>(sim.url, 'getProgramAccounts', [program, config]);
        const filtered = await read({
          encoding: 'base64',
          filters: [
            { memcmp: { offset: 0, bytes: parent.toBase58(), encoding: 'base58' } },
            { memcmp: { offset: 64, bytes: REVERSE_LOOKUP_CLASS.toBase58() } },
          ],
        });
        expect(filtered).toHaveLength(500);
        expect(await read({ dataSlice: { offset: 0, length: 0 } })).toHaveLength(20_000);
        expect(await read({})).toHaveLength(20_000);
      } finally {
        await sim.close();
      }
    },
  );
});
