import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  NAME_PROGRAM_ID,
  getDomainKeySync,
  getReverseKeyFromDomainKey,
} from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  NAME_HEADER_LEN,
  SimChain,
  rentExemptLamports,
  programNotificationText,
  seedDemoChain,
  startRpcSimulator,
} from '../tools/rpc-sim/index.js';
import type { AccountWrite, RpcSimulator } from '../tools/rpc-sim/index.js';
import { SYSTEM_PROGRAM, WsClient, post, until } from './support/sim-ws.js';
import type { KeyedValue, Notification, WireAccount } from './support/sim-ws.js';
import { elapse } from './support/wait.js';

// ---- helpers ---------------------------------------------------------------------------

const keyed = (n: Notification | undefined): KeyedValue => n?.params.result.value as KeyedValue;

/** Records every chain write, so tests can compare notification slots with write slots. */
function recordWrites(chain: SimChain): AccountWrite[] {
  const writes: AccountWrite[] = [];
  chain.onWrite((w) => writes.push(w));
  return writes;
}

function slotOfWrite(writes: AccountWrite[], key: PublicKey): number {
  const write = writes.findLast((w) => w.key === key.toBase58());
  if (!write) throw new Error(`no write of ${key.toBase58()}`);
  return write.slot;
}

const demoKey = getDomainKeySync('demo').pubkey;

/** programSubscribe params: name accounts with header parent demo.sol, header bytes only. */
const demoChildrenParams = (): unknown[] => [
  NAME_PROGRAM_ID.toBase58(),
  {
    encoding: 'base64',
    commitment: 'confirmed',
    filters: [{ memcmp: { offset: 0, bytes: demoKey.toBase58() } }],
    dataSlice: { offset: 0, length: NAME_HEADER_LEN },
  },
];

// ---- subscriptions ---------------------------------------------------------------------

describe('websocket subscriptions', () => {
  let sim: RpcSimulator;
  let writes: AccountWrite[];
  const clients: WsClient[] = [];
  const open = async (): Promise<WsClient> => {
    const client = await WsClient.open(sim.wsUrl);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    writes = recordWrites(chain);
    sim = await startRpcSimulator({ chain });
  });
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });
  afterAll(() => sim.close());

  it('listens on its own port, as ws://', () => {
    expect(sim.wsUrl).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(sim.wsUrl).port).not.toBe(new URL(sim.url).port);
  });

  it('programSubscribe with memcmp + dataSlice notifies the name account and reverse record, not others', async () => {
    const client = await open();
    const sub = await client.subscribe('programSubscribe', demoChildrenParams());

    const delta = sim.chain.addSubdomain('demo', 'delta');
    const [name, reverse] = await client.waitFor(sub, 2);

    expect(name?.jsonrpc).toBe('2.0');
    expect(name?.method).toBe('programNotification');
    expect(name?.params.subscription).toBe(sub);
    expect(name?.params.result.context.slot).toBe(slotOfWrite(writes, delta.subKey));
    const nameValue = keyed(name);
    expect(nameValue.pubkey).toBe(delta.subKey.toBase58());
    const nameAccount = must(sim.chain, delta.subKey);
    expect(nameValue.account).toEqual({
      data: [nameAccount.data.subarray(0, NAME_HEADER_LEN).toString('base64'), 'base64'],
      executable: false,
      lamports: rentExemptLamports(nameAccount.data.length),
      owner: NAME_PROGRAM_ID.toBase58(),
      rentEpoch: 2 ** 64, // what JSON.parse makes of u64::MAX
      space: nameAccount.data.length,
    });

    // One transaction writes both (as createSubdomain does): one slot, the transaction's.
    expect(reverse?.params.result.context.slot).toBe(slotOfWrite(writes, delta.reverseKey));
    expect(reverse?.params.result.context.slot).toBe(name?.params.result.context.slot);
    expect(sim.chain.getTransaction(delta.signature ?? '')?.slot).toBe(
      name?.params.result.context.slot,
    );
    const reverseValue = keyed(reverse);
    expect(reverseValue.pubkey).toBe(delta.reverseKey.toBase58());
    const reverseData = must(sim.chain, delta.reverseKey).data;
    expect(reverseValue.account.data).toEqual([
      reverseData.subarray(0, NAME_HEADER_LEN).toString('base64'),
      'base64',
    ]);
    expect(reverseValue.account.space).toBe(reverseData.length);

    // A subdomain of another parent does not match; the next demo subdomain shows that
    // nothing was sent in between (notifications come in write order).
    const other = sim.chain.addSubdomain('other', 'x');
    const epsilon = sim.chain.addSubdomain('demo', 'epsilon');
    const all = await client.waitFor(sub, 4);
    expect(all.map((n) => keyed(n).pubkey)).toEqual([
      delta.subKey.toBase58(),
      delta.reverseKey.toBase58(),
      epsilon.subKey.toBase58(),
      epsilon.reverseKey.toBase58(),
    ]);
    const sent = client.notifications().map((n) => keyed(n).pubkey);
    expect(sent).not.toContain(other.subKey.toBase58());
  });

  it('deleteSubdomain: no programNotification, a closed-account accountNotification', async () => {
    const zeta = sim.chain.addSubdomain('demo', 'zeta');
    const client = await open();
    const programSub = await client.subscribe('programSubscribe', demoChildrenParams());
    const accountSub = await client.subscribe('accountSubscribe', [
      zeta.subKey.toBase58(),
      { encoding: 'base64', commitment: 'confirmed' },
    ]);

    expect(sim.chain.deleteSubdomain('demo', 'zeta')).toBe(true);
    expect(sim.chain.getAccount(zeta.subKey)).toBeUndefined();
    expect(sim.chain.getAccount(zeta.reverseKey)).toBeUndefined();
    expect(sim.chain.deleteSubdomain('demo', 'zeta')).toBe(false);

    const [closed] = await client.waitFor(accountSub, 1);
    expect(closed?.method).toBe('accountNotification');
    expect(closed?.params.result.context.slot).toBe(slotOfWrite(writes, zeta.subKey));
    expect(closed?.params.result.value).toEqual({
      data: ['', 'base64'],
      executable: false,
      lamports: 0,
      owner: SYSTEM_PROGRAM,
      rentEpoch: 0,
      space: 0,
    });

    // Barrier: the next programNotification is for a later write, so the deletes sent none.
    const eta = sim.chain.addSubdomain('demo', 'eta');
    const [first] = await client.waitFor(programSub, 1);
    expect(keyed(first).pubkey).toBe(eta.subKey.toBase58());
  });

  it('accountSubscribe follows writes, with agave default binary encoding and dataSlice', async () => {
    const { subKey } = sim.chain.addSubdomain('demo', 'theta');
    const client = await open();
    const plain = await client.subscribe('accountSubscribe', [subKey.toBase58()]);
    const sliced = await client.subscribe('accountSubscribe', [
      subKey.toBase58(),
      { encoding: 'base58', dataSlice: { offset: 32, length: 32 } },
    ]);
    const owner = new PublicKey(randomBytes(32));
    sim.chain.addSubdomain('demo', 'theta', { owner });
    const [legacy] = await client.waitFor(plain, 1);
    const [base58] = await client.waitFor(sliced, 1);
    // 2096 bytes are over base58's 128-byte cap: agave writes this text instead of data.
    expect((legacy?.params.result.value as WireAccount).data).toBe(
      'error: data too large for bs58 encoding',
    );
    expect((base58?.params.result.value as WireAccount).data).toEqual([owner.toBase58(), 'base58']);
  });

  it('unsubscribe stops notifications; unknown ids get -32602 as on agave', async () => {
    const client = await open();
    const before = sim.wsStats().subscriptions;
    const sub = await client.subscribe('programSubscribe', demoChildrenParams());
    const witness = await client.subscribe('programSubscribe', demoChildrenParams());
    expect(sim.wsStats().subscriptions).toBe(before + 2);
    expect(sub).not.toBe(witness);

    const reply = await client.call('programUnsubscribe', [sub]);
    expect(reply).toEqual({ jsonrpc: '2.0', result: true, id: reply.id });
    expect(sim.wsStats().subscriptions).toBe(before + 1);

    sim.chain.addSubdomain('demo', 'iota');
    await client.waitFor(witness, 2);
    expect(client.notifications(sub)).toHaveLength(0);

    const again = await client.call('programUnsubscribe', [sub]);
    expect(again.error).toEqual({ code: -32602, message: 'Invalid subscription id.' });
    const other = await client.call('accountUnsubscribe', [999_999]);
    expect(other.error?.code).toBe(-32602);
    // Ids belong to their connection.
    const stranger = await open();
    expect((await stranger.call('programUnsubscribe', [witness])).error?.code).toBe(-32602);
    expect(sim.wsCalls.some((c) => c.method === 'programUnsubscribe' && c.error === -32602)).toBe(
      true,
    );
  });

  it('answers JSON-RPC errors: bad JSON, unknown method, bad params, base64+zstd', async () => {
    const client = await open();
    expect(await client.raw('{"jsonrpc":"2.0",')).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
    });
    expect((await client.call('slotSubscribeNope', [])).error?.code).toBe(-32601);
    expect((await client.call('programSubscribe', ['not-a-key'])).error?.code).toBe(-32602);
    const zstd = await client.call('programSubscribe', [
      NAME_PROGRAM_ID.toBase58(),
      { encoding: 'base64+zstd' },
    ]);
    expect(zstd.error?.code).toBe(-32602);
    expect(zstd.error?.message).toMatch(/base64\+zstd/);
    const tooMany = await client.call('programSubscribe', [
      NAME_PROGRAM_ID.toBase58(),
      { filters: Array.from({ length: 5 }, () => ({ dataSize: 1 })) },
    ]);
    expect(tooMany.error?.code).toBe(-32602);
    expect(
      (await client.raw('{"jsonrpc":"1.0","id":7,"method":"programSubscribe"}')).error?.code,
    ).toBe(-32600);
  });

  it('web3.js onProgramAccountChange works against the simulator', async () => {
    const connection = new Connection(sim.url, { wsEndpoint: sim.wsUrl, commitment: 'confirmed' });
    const seen: string[] = [];
    const id = connection.onProgramAccountChange(
      NAME_PROGRAM_ID,
      (info) => seen.push(info.accountId.toBase58()),
      { filters: [{ memcmp: { offset: 0, bytes: demoKey.toBase58() } }] },
    );
    await until(() => (sim.wsStats().subscriptions > 0 ? true : undefined), 'the subscription');
    const kappa = sim.chain.addSubdomain('demo', 'kappa');
    await until(() => (seen.length >= 2 ? true : undefined), 'two notifications');
    expect(seen).toEqual([kappa.subKey.toBase58(), kappa.reverseKey.toBase58()]);
    await connection.removeProgramAccountChangeListener(id);
  });
});

// ---- provider failures -----------------------------------------------------------------

describe('websocket failures', () => {
  let sim: RpcSimulator;
  const clients: WsClient[] = [];

  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    sim = await startRpcSimulator({ chain });
  });
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });
  afterAll(() => sim.close());

  it('dropSockets closes every client abruptly', async () => {
    const a = await WsClient.open(sim.wsUrl);
    const b = await WsClient.open(sim.wsUrl);
    clients.push(a, b);
    await a.subscribe('programSubscribe', demoChildrenParams());
    const codes = [a, b].map(
      (c) => new Promise<number>((resolve) => c.ws.once('close', (code) => resolve(code))),
    );
    expect(sim.dropSockets()).toBe(2);
    expect(await Promise.all(codes)).toEqual([1006, 1006]);
    await until(
      () => (sim.wsStats().connections === 0 ? true : undefined),
      'connections to reach 0',
    );
    expect(sim.wsStats().subscriptions).toBe(0);
  });

  it('setWebsocketAvailable(false) refuses upgrades with 503, true restores', async () => {
    sim.setWebsocketAvailable(false);
    const ws = new WebSocket(sim.wsUrl);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      // With this listener, ws leaves ending the refused request to us.
      ws.once('unexpected-response', (req, res) => {
        resolve(res.statusCode);
        req.destroy();
      });
      ws.once('open', () => reject(new Error('upgrade accepted')));
      ws.once('error', reject);
    });
    expect(status).toBe(503);
    sim.setWebsocketAvailable(true);
    const client = await WsClient.open(sim.wsUrl);
    clients.push(client);
    expect(client.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('frozen sockets send nothing, pongs included; new sockets still answer', async () => {
    const frozen = await WsClient.open(sim.wsUrl);
    clients.push(frozen);
    const sub = await frozen.subscribe('programSubscribe', demoChildrenParams());
    let pongs = 0;
    frozen.ws.on('pong', () => pongs++);
    frozen.ws.ping();
    await until(() => (pongs === 1 ? true : undefined), 'a pong before freezing');

    expect(sim.freezeSockets()).toBe(1);
    const fresh = await WsClient.open(sim.wsUrl);
    clients.push(fresh);
    const freshSub = await fresh.subscribe('programSubscribe', demoChildrenParams());
    let freshPongs = 0;
    fresh.ws.on('pong', () => freshPongs++);

    const framesBefore = frozen.frames.length;
    frozen.ws.ping();
    frozen.ws.send(
      JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'programUnsubscribe', params: [sub] }),
    );
    sim.chain.addSubdomain('demo', 'frozen');
    fresh.ws.ping();
    // The fresh socket's pong and notifications arrive; in that time, and a grace period
    // after, the frozen one gets nothing.
    await until(() => (freshPongs === 1 ? true : undefined), 'the fresh socket pong');
    await fresh.waitFor(freshSub, 2);
    await elapse(300);
    expect(pongs).toBe(1);
    expect(frozen.frames.length).toBe(framesBefore);
    expect(frozen.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('wsStats counts connections, subscriptions, notifications and bytes', async () => {
    const counting = await startRpcSimulator({ chain: new SimChain() });
    try {
      const client = await WsClient.open(counting.wsUrl);
      const sub = await client.subscribe('programSubscribe', demoChildrenParams());
      await client.subscribe('accountSubscribe', [demoKey.toBase58(), { encoding: 'base64' }]);
      counting.chain.addSubdomain('demo', 'a'); // writes demo.sol (+ its reverse record) first
      counting.chain.addSubdomain('demo', 'b');
      await client.waitFor(sub, 4);
      await until(() => (client.notifications().length === 5 ? true : undefined), '5 frames');
      const stats = counting.wsStats();
      expect(stats).toEqual({
        connections: 1,
        accepted: 1,
        subscriptions: 2,
        notificationsSent: 5,
        bytesSent: client.bytesReceived,
        pings: 0, // this client sends none
      });
      expect(counting.wsCalls.map((c) => [c.method, c.subscription])).toEqual([
        ['programSubscribe', 0],
        ['accountSubscribe', 1],
      ]);
      client.close();
      await until(
        () => (counting.wsStats().connections === 0 ? true : undefined),
        'the connection to close',
      );
      expect(counting.wsStats()).toMatchObject({ accepted: 1, subscriptions: 0 });
    } finally {
      await counting.close();
    }
  });

  it('sendRaw puts a frame on the socket of a subscription as written; flood sends many', async () => {
    const client = await WsClient.open(sim.wsUrl);
    clients.push(client);
    const sub = await client.subscribe('programSubscribe', demoChildrenParams());
    expect(sim.wsSubscriptions('program')).toContain(sub);
    expect(sim.wsSubscriptions('account')).not.toContain(sub);
    const data = Buffer.from([1, 2, 3]);
    const text = programNotificationText(sub, '1e309', demoKey.toBase58(), data);
    expect(text).toContain('"context":{"slot":1e309}');
    expect(sim.wsSendRaw(sub, text)).toBe(true);
    expect(sim.wsSendRaw(sub + 1000, text)).toBe(false);
    const [note] = await client.waitFor(sub, 1);
    expect(note?.params.result.context.slot).toBe(Infinity);
    expect(keyed(note).account.data).toEqual([data.toString('base64'), 'base64']);
    expect(keyed(note).account.owner).toBe(NAME_PROGRAM_ID.toBase58());

    // Frames of 10 KiB: several times the flood's send buffer, so it has to wait for the socket.
    const count = 2_000;
    const padding = 'x'.repeat(10 * 1024);
    const flooded = await sim.wsFlood(sub, count, (i) =>
      programNotificationText(sub, i, demoKey.toBase58(), Buffer.from(`${i}${padding}`)),
    );
    expect(flooded.sent).toBe(count);
    const notes = await client.waitFor(sub, count + 1);
    expect(notes.slice(1).map((n) => n.params.result.context.slot)).toEqual(
      Array.from({ length: count }, (_, i) => i),
    );
  });

  it('close() ends open websockets', async () => {
    const closing = await startRpcSimulator();
    const client = await WsClient.open(closing.wsUrl);
    closing.freezeSockets();
    const closed = new Promise<void>((resolve) => client.ws.once('close', () => resolve()));
    await closing.close();
    await closed;
  });
});

// ---- simulator-only methods ------------------------------------------------------------

describe('simAddSubdomain and simDeleteSubdomain over HTTP', () => {
  let sim: RpcSimulator;

  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    sim = await startRpcSimulator({ chain });
  });
  afterAll(() => sim.close());

  it('adds and deletes a subdomain, notifying subscribers', async () => {
    const client = await WsClient.open(sim.wsUrl);
    try {
      const sub = await client.subscribe('programSubscribe', demoChildrenParams());
      const added = await post(sim.url, 'simAddSubdomain', ['demo', 'curl']);
      const subKey = getDomainKeySync('curl.demo').pubkey;
      expect(added.result).toEqual({
        subdomain: subKey.toBase58(),
        reverse: getReverseKeyFromDomainKey(subKey, demoKey).toBase58(),
      });
      await client.waitFor(sub, 2);
      expect((await post(sim.url, 'getAccountInfo', [subKey.toBase58()])).result).toMatchObject({
        value: { owner: NAME_PROGRAM_ID.toBase58() },
      });
      expect((await post(sim.url, 'simDeleteSubdomain', ['demo', 'curl'])).result).toBe(true);
      expect((await post(sim.url, 'simDeleteSubdomain', ['demo', 'curl'])).result).toBe(false);
      expect(sim.chain.getAccount(subKey)).toBeUndefined();
      expect((await post(sim.url, 'simAddSubdomain', ['demo', 'a.b'])).error?.code).toBe(-32602);
      expect((await post(sim.url, 'simAddSubdomain', ['demo'])).error?.code).toBe(-32602);
    } finally {
      client.close();
    }
  });
});

// ---- lagging HTTP node -----------------------------------------------------------------

describe('HTTP lag', () => {
  let sim: RpcSimulator;
  let writes: AccountWrite[];

  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    writes = recordWrites(chain);
    sim = await startRpcSimulator({ chain, httpLagMs: 300 });
  });
  afterAll(() => sim.close());

  const demoChildren = async (): Promise<{ slot: number; keys: string[] }> => {
    const reply = await post(sim.url, 'getProgramAccounts', [
      NAME_PROGRAM_ID.toBase58(),
      {
        encoding: 'base64',
        withContext: true,
        filters: [{ memcmp: { offset: 0, bytes: demoKey.toBase58() } }],
        dataSlice: { offset: 0, length: 0 },
      },
    ]);
    const result = reply.result as { context: { slot: number }; value: KeyedValue[] };
    return { slot: result.context.slot, keys: result.value.map((a) => a.pubkey) };
  };

  it('serves the chain of httpLagMs ago while websockets see writes at once', async () => {
    expect(sim.httpLagMs).toBe(300);
    const client = await WsClient.open(sim.wsUrl);
    try {
      const sub = await client.subscribe('programSubscribe', demoChildrenParams());
      const before = await demoChildren();

      // Taken before the write: the write's own time stamp is at or after it.
      const writtenAt = performance.now();
      const lambda = sim.chain.addSubdomain('demo', 'lambda');
      const writeSlot = slotOfWrite(writes, lambda.reverseKey);

      const [pushed] = await client.waitFor(sub, 1);
      expect(keyed(pushed).pubkey).toBe(lambda.subKey.toBase58());

      const stale = await demoChildren();
      expect(stale.keys).not.toContain(lambda.subKey.toBase58());
      expect(stale.keys.length).toBe(before.keys.length);
      expect(stale.slot).toBeLessThan(writeSlot);
      expect(stale.slot).toBeGreaterThanOrEqual(before.slot);
      const info = await post(sim.url, 'getAccountInfo', [lambda.subKey.toBase58()]);
      expect(info.result).toMatchObject({ value: null });
      const slot = (await post(sim.url, 'getSlot')).result as number;
      expect(slot).toBeLessThan(writeSlot);

      // minContextSlot past the lagging slot: the real -32016 with the node's slot.
      const ahead = await post(sim.url, 'getProgramAccounts', [
        NAME_PROGRAM_ID.toBase58(),
        { minContextSlot: sim.chain.slot },
      ]);
      expect(ahead.error?.code).toBe(-32016);
      expect(ahead.error?.message).toBe('Minimum context slot has not been reached');
      const contextSlot = (ahead.error?.data as { contextSlot: number }).contextSlot;
      expect(contextSlot).toBeLessThan(sim.chain.slot);
      expect(contextSlot).toBeLessThan(writeSlot);

      const fresh = await until(async () => {
        const now = await demoChildren();
        // Both writes of the transaction are visible together.
        return now.keys.includes(lambda.reverseKey.toBase58()) ? now : undefined;
      }, 'the lagging node to catch up');
      expect(performance.now() - writtenAt).toBeGreaterThanOrEqual(300);
      expect(fresh.keys).toContain(lambda.subKey.toBase58());
      expect(fresh.slot).toBeGreaterThanOrEqual(writeSlot);
    } finally {
      client.close();
    }
  });

  it('setHttpLagMs(0) serves the chain now', async () => {
    sim.setHttpLagMs(0);
    try {
      const mu = sim.chain.addSubdomain('demo', 'mu');
      expect((await demoChildren()).keys).toContain(mu.subKey.toBase58());
      expect(sim.chain.historyRetentionMs).toBe(0);
    } finally {
      sim.setHttpLagMs(300);
    }
    expect(() => sim.setHttpLagMs(-1)).toThrow(TypeError);
  });
});

// ---- chain history ---------------------------------------------------------------------

describe('SimChain history and write listeners', () => {
  it('asOf undoes later writes and reports the slot of then', () => {
    let now = 1000;
    const chain = new SimChain({ slot: 5, now: () => now });
    const program = new PublicKey(randomBytes(32));
    const [a, b, c] = Array.from({ length: 3 }, () => new PublicKey(randomBytes(32)));
    if (!a || !b || !c) throw new Error('keys');
    chain.setAccount(a, { data: Buffer.from('a1'), owner: program }); // slot 6, before history
    chain.retainHistory(500);
    now = 1100;
    chain.setAccount(b, { data: Buffer.from('b1'), owner: program }); // slot 7
    now = 1200;
    chain.setAccount(a, { data: Buffer.from('a2'), owner: program }); // slot 8
    chain.deleteAccount(b); // slot 9
    chain.setAccount(c, { data: Buffer.from('c1') }); // slot 10, another owner
    now = 1300;
    chain.advanceSlot(); // slot 11

    const owned = (view: ReturnType<SimChain['asOf']>): string[] =>
      [...view.ownedBy(program.toBase58())].map((s) => s.data.toString()).sort();

    expect(chain.asOf(0)).toBe(chain);
    const at1150 = chain.asOf(150);
    expect(at1150.slot).toBe(7);
    expect(owned(at1150)).toEqual(['a1', 'b1']);
    expect(at1150.lookup(c.toBase58())).toBeUndefined();
    const at1050 = chain.asOf(250);
    expect(at1050.slot).toBe(6);
    expect(owned(at1050)).toEqual(['a1']);
    const at1250 = chain.asOf(50);
    expect(at1250.slot).toBe(10);
    expect(owned(at1250)).toEqual(['a2']);
    expect(at1250.lookup(c.toBase58())?.data.toString()).toBe('c1');

    // Entries older than the retention are pruned; older ages see the oldest known state.
    now = 2000;
    chain.advanceSlot(); // slot 12
    expect(chain.asOf(400).slot).toBe(11);
    expect(chain.asOf(900).slot).toBe(11);
    expect(owned(chain.asOf(900))).toEqual(['a2']);
    chain.retainHistory(0);
    expect(chain.asOf(100)).toBe(chain);
  });

  it('onWrite reports writes in order, with the slot of their transaction; unsubscribes', () => {
    const chain = new SimChain({ slot: 1 });
    const seen: Array<[string, boolean, number]> = [];
    const off = chain.onWrite((w) => seen.push([w.key, w.account !== undefined, w.slot]));
    const keys = chain.addSubdomain('demo', 'x');
    chain.deleteSubdomain('demo', 'x');
    off();
    chain.addSubdomain('demo', 'y');
    const parentReverse = getReverseKeyFromDomainKey(demoKey).toBase58();
    // Three transactions (the parent, the subdomain, its deletion), one slot each.
    expect(seen).toEqual([
      [demoKey.toBase58(), true, 2],
      [parentReverse, true, 2],
      [keys.subKey.toBase58(), true, 3],
      [keys.reverseKey.toBase58(), true, 3],
      [keys.subKey.toBase58(), false, 4],
      [keys.reverseKey.toBase58(), false, 4],
    ]);
  });
});

function must(chain: SimChain, key: PublicKey): { data: Buffer } {
  const account = chain.getAccount(key);
  if (!account) throw new Error(`no account at ${key.toBase58()}`);
  return account;
}
