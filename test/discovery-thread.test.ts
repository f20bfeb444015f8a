/**
 * Discovery with the getProgramAccounts reply decoded in the discovery thread: every failure keeps
 * the shape, the retry behaviour and the per-round-trip metrics it had when the reply was parsed
 * on the main thread, and the thread itself survives being closed under a task.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMetrics, type Metrics } from '../src/metrics/metrics.js';
import { RpcCallError, RpcClient } from '../src/rpc/client.js';
import type { RpcEndpoint } from '../src/rpc/endpoint.js';
import { Agents } from '../src/rpc/transport.js';
import { SLICE_LEN } from '../src/sns/discovery-decode.js';
import {
  domainKey,
  hashName,
  nameAccountKey,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  toBase58,
} from '../src/sns/pda.js';
import { closeDiscovery, discoverSubdomains } from '../src/sns/subdomain-discovery.js';

type Account = { pubkey: unknown; account: { data: unknown } } | null;
type Handler = (params: unknown[], id: unknown) => string | Promise<string>;

const PARENT = 'threadparent';
const parentKey = domainKey(PARENT);
const b64 = (bytes: Buffer) => [bytes.toString('base64'), 'base64'];

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
    reverse,
    data,
    accounts: [
      { pubkey: child, account: { data: b64(Buffer.alloc(SLICE_LEN)) } },
      {
        pubkey: reverse,
        account: { data: b64(Buffer.concat([REVERSE_LOOKUP_CLASS, data]).subarray(0, SLICE_LEN)) },
      },
    ] as Account[],
  };
}

const reply = (id: unknown, result: unknown) => JSON.stringify({ jsonrpc: '2.0', id, result });
const withContext = (value: unknown) => ({ context: { slot: 42 }, value });

describe('discovery through the discovery thread', () => {
  let server: http.Server;
  let endpoint: RpcEndpoint;
  let agents: Agents;
  let metrics: Metrics;
  let rpc: RpcClient;
  const handlers = new Map<string, Handler[]>();
  const calls: string[] = [];
  /** Texts getMultipleAccounts returns, by reverse key (null: the record is gone). */
  let records = new Map<string, Buffer | null>();
  /** Called once a reply has been handed to the socket. */
  let onSent: (() => void) | undefined;

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
        const list = handlers.get(method) ?? [];
        const handler = list.length > 1 ? list.shift() : list[0];
        void Promise.resolve(handler ? handler(params, id) : reply(id, null)).then((body) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(body, () => onSent?.());
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    endpoint = { kind: 'default', url, id: 'thread-test' };
    agents = new Agents();
  });
  afterAll(async () => {
    await closeDiscovery();
    agents.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    handlers.clear();
    calls.length = 0;
    records = new Map();
    onSent = undefined;
    on('getMultipleAccounts', (params, id) => {
      const keys = params[0] as string[];
      const value = keys.map((k) => {
        const data = records.get(k);
        return data ? { data: b64(data) } : null;
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
      minBackoffMs: 1,
    });
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
    const found = await discoverSubdomains(rpc, endpoint, PARENT);
    expect(found).toEqual({
      labels: [short.label, long.label, unicode.label].sort(),
      slot: 42,
      accounts: accounts.length,
    });
    expect(calls).toEqual(['getProgramAccounts', 'getMultipleAccounts']);
    expect(await count('sns_rpc_requests_total', { outcome: 'ok' })).toBe(2);
    expect(await count('sns_rpc_credits_total', { method: 'getProgramAccounts' })).toBe(10);
  });

  it('decodes a body small enough to sit in the shared buffer pool without harming it', async () => {
    const neighbour = Buffer.from('neighbour');
    on('getProgramAccounts', (_p, id) => reply(id, []));
    expect(await discoverSubdomains(rpc, endpoint, PARENT)).toEqual({
      labels: [],
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
    expect((await discoverSubdomains(rpc, endpoint, PARENT)).labels).toEqual(['after']);
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
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT));
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({
      outcome: 'rpc_error',
      retryable: false,
      message: 'getProgramAccounts: JSON-RPC error -32602 nope',
    });
    expect(calls).toHaveLength(2);
    expect(await count('sns_rpc_requests_total', { outcome: 'rpc_error' })).toBe(2);
  });

  it('fails a reply without an account list at once, the round trip itself counted ok', async () => {
    on('getProgramAccounts', (_p, id) => reply(id, { context: { slot: 1 } }));
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT));
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({
      outcome: 'http_error',
      retryable: true,
      message: 'getProgramAccounts: no account list',
    });
    expect(calls).toEqual(['getProgramAccounts']);
    expect(await count('sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
    expect(await count('sns_rpc_retries_total', {})).toBe(0);
  });

  it('fails account data that is not base64 before completing any reverse text', async () => {
    const long = subdomain(`long-${'q'.repeat(50)}`);
    records.set(long.reverse, long.data);
    on('getProgramAccounts', gpa([...long.accounts, { pubkey: 'x', account: { data: 'raw' } }]));
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT));
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({ retryable: false, message: 'account data is not base64' });
    expect(calls).toEqual(['getProgramAccounts']);
  });

  it('completes the reverse texts, then fails an account without a pubkey', async () => {
    const long = subdomain(`long-${'w'.repeat(50)}`);
    records.set(long.reverse, long.data);
    const noKey = { pubkey: 7, account: { data: b64(Buffer.alloc(SLICE_LEN)) } };
    on('getProgramAccounts', gpa([...long.accounts, noKey]));
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT));
    expect(err).toBeInstanceOf(RpcCallError);
    expect(err).toMatchObject({
      retryable: true,
      message: 'getProgramAccounts: account without a pubkey',
    });
    expect(calls).toEqual(['getProgramAccounts', 'getMultipleAccounts']);
  });

  it('passes on what is not an RpcCallError as it is (a null account)', async () => {
    on('getProgramAccounts', gpa([null]));
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toContain('null');
  });

  /** Enough accounts that the thread is still at work well after the reply has arrived. */
  const many = () => Array.from({ length: 5000 }, (_, i) => subdomain(`many${i}`).accounts).flat();
  /** Resolves a little after the next reply has gone out, while the thread decodes it. */
  const decoding = () =>
    new Promise<void>((resolve) => {
      onSent = () => setTimeout(resolve, 30);
    });

  it('stops waiting for the thread on abort', async () => {
    on('getProgramAccounts', gpa(many()));
    const controller = new AbortController();
    void decoding().then(() => controller.abort());
    const err = await failure(discoverSubdomains(rpc, endpoint, PARENT, controller.signal));
    expect(err.name).toBe('AbortError');
    // The thread is still there for the next discovery.
    on('getProgramAccounts', gpa(subdomain('next').accounts));
    expect((await discoverSubdomains(rpc, endpoint, PARENT)).labels).toEqual(['next']);
  });

  it('fails a task whose thread is closed under it, and starts a new thread for the next', async () => {
    on('getProgramAccounts', gpa(many()));
    const busy = decoding();
    const pending = failure(discoverSubdomains(rpc, endpoint, PARENT));
    await busy;
    await closeDiscovery();
    expect((await pending).message).toBe('discovery thread closed');
    on('getProgramAccounts', gpa(subdomain('again').accounts));
    expect((await discoverSubdomains(rpc, endpoint, PARENT)).labels).toEqual(['again']);
  });
});
