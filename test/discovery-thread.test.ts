/**
 * Discovery with the getProgramAccounts reply decoded in the discovery thread: every failure keeps
 * the shape, the retry behaviour and the per-round-trip metrics it had when the reply was parsed
 * on the main thread, and the thread itself survives being closed under a task.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { createMetrics, type Metrics } from '../src/core/metrics.js';
import { RpcCallError, RpcClient } from '../worker/rpc/client.js';
import type { RpcEndpoint } from '../src/core/rpc/endpoint.js';
import { Agents } from '../worker/rpc/transport.js';
import { classifyProgramAccounts, SCAN_SLICE } from '../worker/sns/discovery-decode.js';
import {
  domainKey,
  hashName,
  nameAccountKey,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  toBase58,
} from '../src/core/sns/pda.js';
import { DecodeThread } from '../worker/sns/decode-thread.js';
import { warmUp, warmUpReply } from '../worker/sns/warm-up.js';
import { unpackMembers } from './support/packed-members.js';
import type { ThreadParts } from '../worker/sns/discovery-thread.js';
import { laneRpc } from '../worker/follow/lane-rpc.js';
import { HEAD_SLICE, NAME_PROGRAM } from '../worker/follow/name-program.js';
import { SlotClock } from '../src/core/rpc/slot.js';
import { discoverSubdomains, type DiscoveryLane } from '../worker/sns/subdomain-discovery.js';
import { streamSubdomains } from '../worker/sns/stream-discovery.js';
import type { ScannedMember } from '../src/core/cache/subdomain-cache.js';
import type { PackedMembers } from '../src/core/cache/packed-members.js';

type Account = { pubkey: unknown; account: { data: unknown } } | null;
type Handler = (params: unknown[], id: unknown) => string | Promise<string>;

const PARENT = 'threadparent';
const parentKey = domainKey(PARENT);
const b64 = (bytes: Buffer) => [bytes.toString('base64'), 'base64'];

/** A header as {@link SCAN_SLICE} cuts it: the parent's last byte, the owner, the class. */
const sliceHead = (owner: Buffer, nameClass: Buffer) =>
  Buffer.concat([parentKey.subarray(31), owner, nameClass]);
const OWNER = Buffer.alloc(32, 7);
/** A subdomain's name account as getProgramAccounts slices it (base64 data). */
const nameSlice = () =>
  b64(
    Buffer.concat([sliceHead(OWNER, Buffer.alloc(32)), Buffer.alloc(SCAN_SLICE.length)]).subarray(
      0,
      SCAN_SLICE.length,
    ),
  );

/** A subdomain and its reverse record as getProgramAccounts slices them, and the record's data. */
function subdomain(label: string) {
  const child = toBase58(nameAccountKey(hashName(`\0${label}`), undefined, parentKey));
  const reverse = toBase58(reverseKeyFromDomainKey(child, parentKey));
  const text = Buffer.from(`\0${label}`);
  const data = Buffer.alloc(4 + text.length);
  data.writeUInt32LE(text.length, 0);
  text.copy(data, 4);
  return {
    label,
    child,
    reverse,
    data,
    accounts: [
      { pubkey: child, account: { data: nameSlice() } },
      {
        pubkey: reverse,
        account: {
          data: b64(
            Buffer.concat([sliceHead(Buffer.alloc(32), REVERSE_LOOKUP_CLASS), data]).subarray(
              0,
              SCAN_SLICE.length,
            ),
          ),
        },
      },
    ] as Account[],
  };
}

const reply = (id: unknown, result: unknown) => JSON.stringify({ jsonrpc: '2.0', id, result });
const withContext = (value: unknown) => ({ context: { slot: 42 }, value });

type TaskOf<K> = Extract<Parameters<DecodeThread['run']>[0], { kind: K }>;
type Kind = Parameters<DecodeThread['run']>[0]['kind'];

/** A decode thread that says when a task has been handed to it (posted to the thread). */
class WatchedThread extends DecodeThread {
  onTask: (() => void) | undefined;
  override run<K extends Kind>(
    task: TaskOf<K>,
    signal?: AbortSignal,
    onPart?: (part: ThreadParts[K]) => void,
  ) {
    const running = super.run<K>(task, signal, onPart);
    this.onTask?.();
    return running;
  }
}

describe("the decode thread's warm-up", () => {
  it('classifies a made-up reply holding every kind of subdomain a scan meets', () => {
    const { body, parentKey } = warmUpReply(130);
    const found = classifyProgramAccounts('getProgramAccounts', body, 1, parentKey);
    expect(found.accounts).toBe(260);
    // Every 64th label is longer than the inline text: its record waits for a completion.
    expect(found.waiting).toHaveLength(3);
    expect(found.truncated).toHaveLength(3);
    expect(found.labels).toHaveLength(127);
    expect(found.labels).toContain('w1');
    expect(new Set(found.owners).size).toBe(1);
    // What the thread runs before it says it is ready: it throws if a round lists anything else.
    expect(() => warmUp(130, 2)).not.toThrow();
  });
});

describe('discovery through the discovery thread', () => {
  let server: http.Server;
  let endpoint: RpcEndpoint;
  let agents: Agents;
  let metrics: Metrics;
  let rpc: RpcClient;
  let lane: DiscoveryLane;
  const thread = new WatchedThread({ heapMb: 128, taskMs: 10_000 });
  /** The params of each call, by method, in order. */
  const paramsOf = new Map<string, unknown[][]>();
  const handlers = new Map<string, Handler[]>();
  const calls: string[] = [];
  /** Texts getMultipleAccounts returns, by reverse key (null: the record is gone). */
  let records = new Map<string, Buffer | null>();

  /** Answers `method` with `handler` for the next calls (the last one stays). */
  const on = (method: string, ...list: Handler[]) => handlers.set(method, list);

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { id, method, params } = JSON.parse(Buffer.concat(chunks).toString()) as {
          id: unknown;
          method: string;
          params: unknown[];
        };
        calls.push(method);
        paramsOf.set(method, [...(paramsOf.get(method) ?? []), params]);
        const list = handlers.get(method) ?? [];
        const handler = list.length > 1 ? list.shift() : list[0];
        void Promise.resolve(handler ? handler(params, id) : reply(id, null)).then((body) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(body);
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    endpoint = { kind: 'default', url, id: 'thread-test' };
    agents = new Agents();
  });
  afterAll(async () => {
    await thread.close();
    agents.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    handlers.clear();
    calls.length = 0;
    paramsOf.clear();
    records = new Map();
    thread.onTask = undefined;
    on('getMultipleAccounts', (params, id) => {
      const keys = params[0] as string[];
      const { length } = (params[1] as { dataSlice: { length: number } }).dataSlice;
      const value = keys.map((k) => {
        const data = records.get(k);
        return data
          ? { data: b64(Buffer.concat([REVERSE_LOOKUP_CLASS, data]).subarray(0, length)) }
          : null;
      });
      return reply(id, withContext(value));
    });
    metrics = createMetrics(new Registry(), { defaultMetrics: false });
    rpc = new RpcClient({
      metrics,
      agents,
      timeoutMs: 5_000,
      retries: 3,
      maxResponseBytes: 64 * 1024 * 1024,
      isTrusted: () => true,
      costs: loadConfig({}).RPC_CREDITS,
      minBackoffMs: 1,
    });
    lane = { rpc, thread, maxLabelBytes: 1024 * 1024, maxAnswerBytes: 64 * 1024 * 1024 };
  });

  const count = async (name: string, labels: Record<string, string>) =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values
      .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
      .reduce((sum, v) => sum + v.value, 0) ?? 0;
  const gpa = (accounts: Account[]) => (_: unknown[], id: unknown) =>
    reply(id, withContext(accounts));
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('resolved');
      },
      (err: unknown) => err as Error,
    );

  it('lists labels, completes long reverse texts, drops orphans and missing reverses', async () => {
    const short = subdomain('short');
    const long = subdomain(`long-${'y'.repeat(60)}`);
    const unicode = subdomain('ünïcödé-中文-🦀');
    const gone = subdomain(`gone-${'z'.repeat(40)}`);
    const noReverse = subdomain('noreverse');
    const orphan = subdomain('orphan');
    for (const s of [long, gone]) records.set(s.reverse, s === gone ? null : s.data);
    const accounts = [
      ...short.accounts,
      ...long.accounts,
      ...unicode.accounts,
      ...gone.accounts,
      noReverse.accounts[0] as Account,
      orphan.accounts[1] as Account,
    ];
    on('getProgramAccounts', gpa(accounts));
    const found = await discoverSubdomains(lane, endpoint, PARENT);
    // The owner in each subdomain's header, as the scan's slice carries it.
    const owner = toBase58(OWNER);
    expect(found).toEqual({
      labels: [short.label, long.label, unicode.label].sort(),
      members: {
        [short.child]: [short.label, owner],
        [long.child]: [long.label, owner],
        [unicode.child]: [unicode.label, owner],
      },
      // Found among the reply's accounts, the keys the SDK's derivation gives.
      reverses: new Map([short, long, unicode].map((s) => [s.child, s.reverse])),
      slot: 42,
      accounts: accounts.length,
    });
    expect(calls).toEqual(['getProgramAccounts', 'getMultipleAccounts']);
    expect(await count('sns_rpc_requests_total', { outcome: 'ok' })).toBe(2);
    expect(await count('sns_rpc_credits_total', { method: 'getProgramAccounts' })).toBe(10);
  });

  it('streams the same members in parts, the first before the reply is decoded whole', async () => {
    const many = Array.from({ length: 7 }, (_, i) => subdomain(`many${i}`));
    const long = subdomain(`long-${'y'.repeat(60)}`);
    const gone = subdomain(`gone-${'z'.repeat(40)}`);
    for (const s of [long, gone]) records.set(s.reverse, s === gone ? null : s.data);
    const accounts = [...long.accounts, ...many.flatMap((s) => s.accounts), ...gone.accounts];
    on('getProgramAccounts', gpa(accounts));
    const whole = await discoverSubdomains(lane, endpoint, PARENT);
    calls.length = 0;
    const parts: Array<{ slot: number | undefined; members: ScannedMember[] }> = [];
    let decoded = false;
    const head = await streamSubdomains(lane, endpoint, PARENT, {
      partMembers: 3,
      add: (slot, members) => {
        parts.push({ slot, members: unpackMembers(members) });
        // Each part comes from the thread while it goes on, the members left after its answer.
        if (parts.length === 1) decoded = calls.includes('getMultipleAccounts');
      },
    });
    expect(decoded).toBe(false);
    expect(head).toEqual({ slot: 42, accounts: accounts.length, listed: 8 });
    // Parts of 3 from the thread, then the 1 left, then the completed text.
    expect(parts.map((p) => p.members.length)).toEqual([3, 3, 1, 1]);
    expect(parts.every((p) => p.slot === 42)).toBe(true);
    const streamed = parts.flatMap((p) => p.members);
    expect(
      Object.fromEntries(streamed.map(([label, child, owner]) => [child, [label, owner]])),
    ).toEqual(whole.members);
    expect(new Map(streamed.map(([, child, , reverse]) => [child, reverse]))).toEqual(
      whole.reverses,
    );
  });

  it('completes the cut texts a streamed scan hands over in batches, each once', async () => {
    const long = Array.from({ length: 150 }, (_, i) => subdomain(`long${i}-${'y'.repeat(40)}`));
    for (const s of long) records.set(s.reverse, s.data);
    const short = subdomain('short');
    const accounts = [...long.flatMap((s) => s.accounts), ...short.accounts];
    on('getProgramAccounts', gpa(accounts));
    // The thread hands the first 100 cut records over as soon as it has claimed them.
    const parts: Array<{ cut: string[]; waiting: number }> = [];
    classifyProgramAccounts(
      'getProgramAccounts',
      Buffer.from(reply(1, withContext(accounts))),
      1,
      parentKey,
      undefined,
      { size: 1_000, cutBatch: 100, emit: ({ cut, waiting }) => parts.push({ cut, waiting }) },
    );
    // The rest comes as a last part, with the one subdomain whose text came whole.
    expect(parts).toEqual([
      { cut: long.slice(0, 100).map((s) => s.reverse), waiting: 100 },
      { cut: long.slice(100).map((s) => s.reverse), waiting: 150 },
    ]);
    const whole = await discoverSubdomains(lane, endpoint, PARENT);
    calls.length = 0;
    paramsOf.clear();
    const streamed: ScannedMember[] = [];
    const head = await streamSubdomains(lane, endpoint, PARENT, {
      partMembers: 1_000,
      add: (_slot, members) => streamed.push(...unpackMembers(members)),
    });
    expect(head.listed).toBe(151);
    expect(
      Object.fromEntries(streamed.map(([label, child, owner]) => [child, [label, owner]])),
    ).toEqual(whole.members);
    // A call per batch of 100, each record in one, at the scan's slot or later.
    const batches = (paramsOf.get('getMultipleAccounts') ?? []).map((p) => p[0] as string[]);
    expect(batches.map((b) => b.length)).toEqual([100, 50]);
    expect(batches.flat().sort()).toEqual(long.map((s) => s.reverse).sort());
    expect(
      (paramsOf.get('getMultipleAccounts') ?? []).every(
        (p) => (p[1] as { minContextSlot?: number }).minContextSlot === 42,
      ),
    ).toBe(true);
  });

  it("hands the members whose texts were completed over in parts no larger than the thread's", async () => {
    // The write stages each part it is handed as it comes, whole: one part of every completed
    // member would be one script of them all, however many.
    const long = Array.from({ length: 150 }, (_, i) => subdomain(`long${i}-${'y'.repeat(40)}`));
    for (const s of long) records.set(s.reverse, s.data);
    const short = subdomain('short');
    on('getProgramAccounts', gpa([...long.flatMap((s) => s.accounts), ...short.accounts]));
    const sizes: number[] = [];
    const streamed: ScannedMember[] = [];
    const head = await streamSubdomains(lane, endpoint, PARENT, {
      partMembers: 40,
      add: (_slot, members) => {
        sizes.push(members.count);
        streamed.push(...unpackMembers(members));
      },
    });
    expect(head.listed).toBe(151);
    expect(sizes).toEqual([1, 40, 40, 40, 30]);
    expect(new Set(streamed.map(([, child]) => child)).size).toBe(151);
  });

  it("starts a large reply's parts small, doubling up to the part size, and says so", async () => {
    const many = Array.from({ length: 40 }, (_, i) => subdomain(`ramp${i}`));
    const long = subdomain(`ramp-long-${'y'.repeat(60)}`);
    records.set(long.reverse, long.data);
    on('getProgramAccounts', gpa([...many.flatMap((s) => s.accounts), ...long.accounts]));
    const parts: Array<{ count: number; eager: boolean }> = [];
    const streamed: ScannedMember[] = [];
    const sink = (partMembers: number) => ({
      partMembers,
      firstPartMembers: 2,
      add: (_slot: unknown, members: PackedMembers, eager: boolean) => {
        parts.push({ count: members.count, eager });
        streamed.push(...unpackMembers(members));
      },
    });
    // 82 accounts: at least four parts' worth of 8, so the parts start at 2; the completed
    // member comes last, eager too.
    expect((await streamSubdomains(lane, endpoint, PARENT, sink(8))).listed).toBe(41);
    expect(parts).toEqual([2, 4, 8, 8, 8, 8, 2, 1].map((count) => ({ count, eager: true })));
    expect(new Set(streamed.map(([, child]) => child)).size).toBe(41);
    // Fewer accounts than four parts' worth of 30: parts of 30, none eager.
    parts.length = 0;
    await streamSubdomains(lane, endpoint, PARENT, sink(30));
    expect(parts).toEqual([30, 10, 1].map((count) => ({ count, eager: false })));
  });

  it('keeps a reply of many accounts but fewer members than a part whole, not eager', async () => {
    // Subdomains without reverse records are accounts of the reply but no members: a scan of
    // fewer members than a chunk is written by the commit's one script (ScanWrite), which an
    // eager part defeats (it is staged at once, however small).
    const bare = Array.from({ length: 37 }, (_, i) => subdomain(`bare${i}`).accounts[0] as Account);
    const listed = Array.from({ length: 3 }, (_, i) => subdomain(`listed${i}`));
    on('getProgramAccounts', gpa([...bare, ...listed.flatMap((s) => s.accounts)]));
    const parts: Array<{ count: number; eager: boolean }> = [];
    const head = await streamSubdomains(lane, endpoint, PARENT, {
      partMembers: 8,
      firstPartMembers: 2,
      add: (_slot, members, eager) => parts.push({ count: members.count, eager }),
    });
    expect(head.listed).toBe(3);
    expect(parts.filter((p) => p.eager)).toEqual([]);
  });

  it('fails a streamed scan past the answer bound, and one whose sink throws', async () => {
    const some = Array.from({ length: 4 }, (_, i) => subdomain(`some${i}`));
    on('getProgramAccounts', gpa(some.flatMap((s) => s.accounts)));
    const taken: ScannedMember[] = [];
    const sink = {
      partMembers: 2,
      add: (_: unknown, m: PackedMembers) => taken.push(...unpackMembers(m)),
    };
    const err = await failure(
      streamSubdomains({ ...lane, maxAnswerBytes: 20 }, endpoint, PARENT, sink),
    );
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err.message).toMatch(/an answer over 20 bytes/);
    expect(taken.length).toBeLessThan(4);
    const refused = new Error('refused');
    expect(
      await failure(
        streamSubdomains(lane, endpoint, PARENT, {
          partMembers: 2,
          add: () => {
            throw refused;
          },
        }),
      ),
    ).toBe(refused);
  });

  it("lists a reverse record whose own reverse record exists, as the SDK's rule does", async () => {
    // The SDK derives a reverse key for every child, reverse records included: one with a reverse
    // record of its own (made by hand; the registrar never makes one) is a subdomain too.
    const plain = subdomain('plain');
    const nested = subdomain('nested');
    const inner = toBase58(reverseKeyFromDomainKey(plain.reverse, parentKey));
    const innerAccount = { ...(nested.accounts[1] as object), pubkey: inner } as Account;
    const accounts = [...plain.accounts, innerAccount];
    on('getProgramAccounts', gpa(accounts));
    const found = await discoverSubdomains(lane, endpoint, PARENT);
    expect(found.labels).toEqual(['nested', 'plain']);
    expect(found.reverses).toEqual(
      new Map([
        [plain.child, plain.reverse],
        [plain.reverse, inner],
      ]),
    );
    // Without the extra record, every reverse record is claimed and none is looked at as a child.
    on('getProgramAccounts', gpa(plain.accounts));
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual(['plain']);
  });

  it('decodes a body small enough to sit in the shared buffer pool without harming it', async () => {
    const neighbour = Buffer.from('neighbour');
    on('getProgramAccounts', (_p, id) => reply(id, []));
    expect(await discoverSubdomains(lane, endpoint, PARENT)).toEqual({
      labels: [],
      members: {},
      reverses: new Map(),
      slot: undefined,
      accounts: 0,
    });
    expect(neighbour.toString()).toBe('neighbour');
  });

  it('retries a garbage body and a wrong id as http_error, once per round trip', async () => {
    const s = subdomain('after');
    on(
      'getProgramAccounts',
      () => 'not json at all',
      (_p, id) => reply(Number(id) + 1000, []),
      gpa(s.accounts),
    );
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual(['after']);
    expect(calls).toEqual(['getProgramAccounts', 'getProgramAccounts', 'getProgramAccounts']);
    expect(await count('sns_rpc_requests_total', { outcome: 'http_error' })).toBe(2);
    expect(await count('sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
    expect(await count('sns_rpc_retries_total', {})).toBe(2);
    expect(await count('sns_rpc_credits_total', {})).toBe(30);
  });

  it('keeps JSON-RPC errors rpc_error, retrying only the transient codes', async () => {
    const error = (code: number) => (_p: unknown[], id: unknown) =>
      JSON.stringify({ jsonrpc: '2.0', id, error: { code, message: 'nope' } });
    on('getProgramAccounts', error(-32005), error(-32602));
    const err = await failure(discoverSubdomains(lane, endpoint, PARENT));
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({
      outcome: 'rpc_error',
      retryable: false,
      message: 'getProgramAccounts: JSON-RPC error -32602 nope',
    });
    expect(calls).toHaveLength(2);
    expect(await count('sns_rpc_requests_total', { outcome: 'rpc_error' })).toBe(2);
  });

  /** Expects `promise` to fail with a malformed-reply error, after one round trip. */
  const refusesMalformed = async (promise: Promise<unknown>, message: string | RegExp) => {
    const err = await failure(promise);
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({ outcome: 'http_error', retryable: false });
    expect(err.message).toMatch(message);
    expect(calls).toEqual(['getProgramAccounts']);
    expect(await count('sns_rpc_retries_total', {})).toBe(0);
  };
  const key = subdomain('key').accounts[0]?.pubkey as string;

  it('fails a reply without an account list at once, not retried, counted as an http_error', async () => {
    on('getProgramAccounts', (_p, id) => reply(id, { context: { slot: 1 } }));
    await refusesMalformed(
      discoverSubdomains(lane, endpoint, PARENT),
      'getProgramAccounts: no account list',
    );
    expect(await count('sns_rpc_requests_total', { outcome: 'http_error' })).toBe(1);
  });

  it('fails account data that is not base64 before completing any reverse text', async () => {
    const long = subdomain(`long-${'q'.repeat(50)}`);
    records.set(long.reverse, long.data);
    on('getProgramAccounts', gpa([...long.accounts, { pubkey: key, account: { data: 'raw' } }]));
    await refusesMalformed(
      discoverSubdomains(lane, endpoint, PARENT),
      'account data is not base64',
    );
  });

  it('fails an account without a pubkey before completing any reverse text', async () => {
    const long = subdomain(`long-${'w'.repeat(50)}`);
    records.set(long.reverse, long.data);
    const noKey = { pubkey: 7, account: { data: b64(Buffer.alloc(SCAN_SLICE.length)) } };
    on('getProgramAccounts', gpa([...long.accounts, noKey]));
    await refusesMalformed(
      discoverSubdomains(lane, endpoint, PARENT),
      'getProgramAccounts: account without a pubkey',
    );
  });

  it.each([
    ['a null account entry', [null], 'an account entry is not an object'],
    ['a null account', [{ pubkey: key, account: null }], 'account without data'],
    ['numeric data', [{ pubkey: key, account: { data: 42 } }], 'account data is not base64'],
    [
      'nested arrays as data',
      [{ pubkey: key, account: { data: [['AAAA', 'base64']] } }],
      'account data is not base64',
    ],
  ])('fails %s as malformed, not retried', async (_name, accounts, message) => {
    on('getProgramAccounts', gpa(accounts as Account[]));
    await refusesMalformed(discoverSubdomains(lane, endpoint, PARENT), message);
  });

  it('fails a reply whose provider ignored dataSlice instead of reading it as no subdomains', async () => {
    // Whole accounts: a 96-byte header, then the reverse record's data.
    const s = subdomain('whole');
    const whole = Buffer.concat([Buffer.alloc(64), REVERSE_LOOKUP_CLASS, s.data]);
    const accounts = [
      { pubkey: s.accounts[0]?.pubkey, account: { data: b64(Buffer.alloc(96)) } },
      { pubkey: s.reverse, account: { data: b64(whole) } },
    ] as Account[];
    on('getProgramAccounts', gpa(accounts));
    await refusesMalformed(discoverSubdomains(lane, endpoint, PARENT), /longer than .* sliced/);
  });

  it('fails a completion whose provider ignored dataSlice', async () => {
    const long = subdomain(`long-${'v'.repeat(50)}`);
    on('getProgramAccounts', gpa(long.accounts));
    on('getMultipleAccounts', (_p, id) =>
      // The whole account: its parent first, not the reverse-lookup class.
      reply(
        id,
        withContext([{ data: b64(Buffer.concat([parentKey, Buffer.alloc(64), long.data])) }]),
      ),
    );
    const err = await failure(discoverSubdomains(lane, endpoint, PARENT));
    expect(err).toMatchObject({ retryable: false });
    expect(err.message).toMatch(/not a reverse record's slice|longer than/);
  });

  it("the follower's account read: a null entry is gone, a short or empty list is refused", async () => {
    const follow = laneRpc(lane, endpoint, new SlotClock());
    const named = subdomain('named');
    const keys = [named.child, named.reverse];
    const head = Buffer.alloc(HEAD_SLICE.length, 3);
    const account = { owner: NAME_PROGRAM, data: b64(head) };
    on('getMultipleAccounts', (_p, id) => reply(id, withContext([account, null])));
    const read = await follow.accounts(keys);
    expect(read.accounts).toEqual([{ owner: NAME_PROGRAM, head }, null]);
    for (const value of [[account], null, [account, 7]]) {
      calls.length = 0;
      on('getMultipleAccounts', (_p, id) => reply(id, withContext(value)));
      const err = await failure(follow.accounts(keys));
      expect(err).toBeInstanceOf(RpcCallError);
      expect(err).toMatchObject({ outcome: 'http_error', retryable: false });
      expect(calls).toEqual(['getMultipleAccounts']);
    }
    calls.length = 0;
    on('getMultipleAccounts', (_p, id) => reply(id, null));
    await expect(follow.accounts(keys)).rejects.toThrow('wrong account list');
  });

  it('reads long reverse texts at the slot of the scan or later (minContextSlot)', async () => {
    const long = subdomain(`long-${'u'.repeat(50)}`);
    records.set(long.reverse, long.data);
    on('getProgramAccounts', gpa(long.accounts));
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual([long.label]);
    const [params] = paramsOf.get('getMultipleAccounts') ?? [];
    expect(params?.[1]).toMatchObject({ minContextSlot: 42 });
  });

  it.each([
    ['arrays built to be expensive', () => `[${'[],'.repeat(200_000)}[]]`, /values in/],
    ['deep nesting', () => `${'['.repeat(64)}${']'.repeat(64)}`, /nested deeper than/],
  ])('refuses %s before parsing them, not retried', async (_name, result, message) => {
    on(
      'getProgramAccounts',
      (_p, id) => `{"jsonrpc":"2.0","id":${String(id)},"result":${result()}}`,
    );
    await refusesMalformed(discoverSubdomains(lane, endpoint, PARENT), message);
  });

  it('completes only the cut reverse texts some subdomain points at', async () => {
    // Reverse records with long texts and no subdomain under the parent: nothing to list.
    const orphans = Array.from({ length: 250 }, (_, i) =>
      subdomain(`orphan-${'o'.repeat(40)}${i}`),
    );
    on('getProgramAccounts', gpa(orphans.map((o) => o.accounts[1] as Account)));
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual([]);
    expect(calls).toEqual(['getProgramAccounts']);
  });

  it('fails at once when the cut texts cannot fit the answer, before any follow-up call', async () => {
    const longs = Array.from({ length: 5 }, (_, i) => subdomain(`long-${'p'.repeat(40)}${i}`));
    for (const l of longs) records.set(l.reverse, l.data);
    on('getProgramAccounts', gpa(longs.flatMap((l) => l.accounts)));
    const err = await failure(
      discoverSubdomains({ ...lane, maxAnswerBytes: 100 }, endpoint, PARENT),
    );
    expect(err).toMatchObject({
      retryable: false,
      final: true,
      message: 'an answer over 100 bytes',
    });
    expect(calls).toEqual(['getProgramAccounts']);
  });

  it('fails a label or an answer past the lane bounds', async () => {
    const long = subdomain(`long-${'t'.repeat(50)}`);
    records.set(long.reverse, long.data);
    on('getProgramAccounts', gpa([...long.accounts, ...subdomain('short').accounts]));
    const labelBound = { ...lane, maxLabelBytes: 20 };
    const err = await failure(discoverSubdomains(labelBound, endpoint, PARENT));
    expect(err).toMatchObject({ retryable: false });
    expect(err.message).toBe('getMultipleAccounts: a reverse text longer than 21 bytes');
    const answerBound = { ...lane, maxAnswerBytes: 40 };
    const err2 = await failure(discoverSubdomains(answerBound, endpoint, PARENT));
    expect(err2).toMatchObject({ retryable: false, message: 'an answer over 40 bytes' });
  });

  /** Enough accounts that the thread is still at work well after the reply has arrived. */
  let manyAccounts: Account[] | undefined;
  const many = () =>
    (manyAccounts ??= Array.from(
      { length: 5000 },
      (_, i) => subdomain(`many${i}`).accounts,
    ).flat());
  /**
   * Accounts each costing the thread a whole program-address search, curve checks included (no
   * reverse record ends one early): a decode that takes many times any small budget, however fast
   * the machine and however warm the thread.
   */
  const costly = () =>
    Array.from({ length: 60_000 }, () => ({
      pubkey: toBase58(randomBytes(32)),
      account: { data: nameSlice() },
    }));
  /** Resolves once the next reply has been handed to the thread, which is then at work on it. */
  const decoding = () =>
    new Promise<void>((resolve) => {
      thread.onTask = () => {
        thread.onTask = undefined;
        resolve();
      };
    });

  it('stops waiting for the thread on abort', async () => {
    on('getProgramAccounts', gpa(many()));
    const controller = new AbortController();
    void decoding().then(() => controller.abort());
    const err = await failure(discoverSubdomains(lane, endpoint, PARENT, controller.signal));
    expect(err.name).toBe('AbortError');
    // The thread is still there for the next discovery.
    on('getProgramAccounts', gpa(subdomain('next').accounts));
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual(['next']);
  });

  it('abandons a decode past its time budget, not retried, and decodes the next in a new thread', async () => {
    const quick = new DecodeThread({ heapMb: 64, taskMs: 100 });
    const quickLane = { ...lane, thread: quick };
    try {
      on('getProgramAccounts', gpa(costly()), gpa(subdomain('after').accounts));
      const err = await failure(discoverSubdomains(quickLane, endpoint, PARENT));
      expect(err).toMatchObject({ retryable: false, message: 'reply decode over 100 ms' });
      expect(calls).toEqual(['getProgramAccounts']);
      expect((await discoverSubdomains(quickLane, endpoint, PARENT)).labels).toEqual(['after']);
    } finally {
      await quick.close();
    }
  });

  /**
   * A heap budget small enough to pass quickly, yet one a thread of every supported Node line can
   * start in: the newer lines' threads need more than 8 MiB of old generation before any task.
   */
  const SMALL_HEAP_MB = 24;

  it('fails a decode past its heap budget, not retried, and the thread comes back', async () => {
    const small = new DecodeThread({ heapMb: SMALL_HEAP_MB, taskMs: 30_000 });
    try {
      on('getProgramAccounts', gpa(Array.from({ length: SMALL_HEAP_MB }, many).flat()));
      const err = await failure(discoverSubdomains({ ...lane, thread: small }, endpoint, PARENT));
      expect(err).toMatchObject({
        retryable: false,
        message: `reply decode over ${SMALL_HEAP_MB} MiB`,
      });
      on('getProgramAccounts', gpa(subdomain('small').accounts));
      expect(
        (await discoverSubdomains({ ...lane, thread: small }, endpoint, PARENT)).labels,
      ).toEqual(['small']);
    } finally {
      await small.close();
    }
  });

  it('refuses a reply with one string past the heap budget before building it', async () => {
    // One allocation past the limit would abort the whole process, not fail the thread.
    const small = new DecodeThread({ heapMb: SMALL_HEAP_MB, taskMs: 30_000 });
    try {
      const body = Buffer.from(reply(1, { value: [['A'.repeat(40 * 1024 * 1024), 'base64']] }));
      const err = await failure(
        small.run({
          kind: 'envelope',
          method: 'getAccountInfo',
          id: 1,
          body: DecodeThread.transferable(body),
        }),
      );
      expect(err).toMatchObject({
        retryable: false,
        message: `reply decode over ${SMALL_HEAP_MB} MiB`,
      });
      const ok = Buffer.from(reply(2, { value: 'fits' }));
      await expect(
        small.run({
          kind: 'envelope',
          method: 'getAccountInfo',
          id: 2,
          body: DecodeThread.transferable(ok),
        }),
      ).resolves.toEqual({ value: 'fits' });
    } finally {
      await small.close();
    }
  });

  it('fails a task whose thread is closed under it, and starts a new thread for the next', async () => {
    on('getProgramAccounts', gpa(many()));
    const busy = decoding();
    const pending = failure(discoverSubdomains(lane, endpoint, PARENT));
    await busy;
    await thread.close();
    expect((await pending).message).toBe('discovery thread closed');
    on('getProgramAccounts', gpa(subdomain('again').accounts));
    expect((await discoverSubdomains(lane, endpoint, PARENT)).labels).toEqual(['again']);
  });
});
