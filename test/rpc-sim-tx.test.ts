/**
 * The simulator's transactions: name-program writes as transactions with the program's logs,
 * logsSubscribe, getTransaction (json, jsonParsed, lagging node), getSignaturesForAddress, a
 * whole-program programSubscribe, and background writes.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import bs58 from 'bs58';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  FINALIZED_DEPTH,
  NAME_HEADER_LEN,
  SimChain,
  seedDemoChain,
  startRpcSimulator,
  transactionJson,
} from '../tools/rpc-sim/index.js';
import type { RpcSimulator } from '../tools/rpc-sim/index.js';
import { WsClient, post, until } from './support/sim-ws.js';
import type { KeyedValue, Notification } from './support/sim-ws.js';
import { elapse } from './support/wait.js';

const PROGRAM = NAME_PROGRAM_ID.toBase58();
const SYSTEM = '11111111111111111111111111111111';
const invoke = (depth: number): string => `Program ${PROGRAM} invoke [${depth}]`;
const success = `Program ${PROGRAM} success`;

/** The name program's lines for one instruction, between its invoke and its consumed line. */
const programLines = (instruction: string): string[] => [
  'Program log: Entrypoint',
  'Program log: Beginning processing',
  'Program log: Instruction unpacked',
  `Program log: ${instruction}`,
];

interface LogsValue {
  signature: string;
  err: unknown;
  logs: string[];
}

const logsOf = (n: Notification | undefined): LogsValue => n?.params.result.value as LogsValue;

/** Confirmed commitment and the v0 version flag, as a follower asks. */
const CONFIRMED = { commitment: 'confirmed', maxSupportedTransactionVersion: 0 };

interface JsonTx {
  slot: number;
  blockTime: number;
  version?: string;
  transaction: {
    signatures: string[];
    message: {
      header: {
        numRequiredSignatures: number;
        numReadonlySignedAccounts: number;
        numReadonlyUnsignedAccounts: number;
      };
      accountKeys: string[];
      recentBlockhash: string;
      instructions: Array<{
        programIdIndex: number;
        accounts: number[];
        data: string;
        stackHeight: null;
      }>;
    };
  };
  meta: {
    err: unknown;
    status: unknown;
    fee: number;
    preBalances: number[];
    postBalances: number[];
    logMessages: string[];
    loadedAddresses: { writable: string[]; readonly: string[] };
    innerInstructions: Array<{
      index: number;
      instructions: Array<{
        programIdIndex: number;
        accounts: number[];
        data: string;
        stackHeight: number;
      }>;
    }>;
  };
}

interface ParsedTx {
  transaction: {
    message: {
      accountKeys: Array<{ pubkey: string; writable: boolean; signer: boolean; source: string }>;
      instructions: Array<Record<string, unknown>>;
    };
  };
  meta: { innerInstructions: Array<{ index: number; instructions: Record<string, unknown>[] }> };
}

/** The first data byte of a base58 instruction data string: the name program's tag. */
const tagOf = (data: string): number | undefined => bs58.decode(data)[0];

describe('name-program transactions and logsSubscribe', () => {
  let sim: RpcSimulator;
  const clients: WsClient[] = [];
  const open = async (): Promise<WsClient> => {
    const client = await WsClient.open(sim.wsUrl);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    sim = await startRpcSimulator({ chain });
  });
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });
  afterAll(() => sim.close());

  it('create, transfer and delete each send a logsNotification with the program logs', async () => {
    const client = await open();
    const sub = await client.subscribe('logsSubscribe', [
      { mentions: [PROGRAM] },
      { commitment: 'confirmed' },
    ]);

    const created = sim.chain.addSubdomain('demo', 'logged');
    const [create] = await client.waitFor(sub, 1);
    expect(create?.method).toBe('logsNotification');
    expect(create?.params.subscription).toBe(sub);
    const createTx = sim.chain.getTransaction(created.signature ?? '');
    expect(createTx).toBeDefined();
    expect(create?.params.result.context.slot).toBe(createTx?.slot);
    expect(logsOf(create)).toEqual({
      signature: created.signature,
      err: null,
      logs: createTx?.logs,
    });
    const createLogs = logsOf(create).logs;
    // The subdomain's Create, top-level, funding the account through the system program...
    expect(createLogs.slice(0, 6)).toEqual([
      invoke(1),
      ...programLines('Instruction: Create'),
      `Program ${SYSTEM} invoke [2]`,
    ]);
    expect(createLogs[11]).toMatch(
      new RegExp(`^Program ${PROGRAM} consumed \\d+ of 400000 compute units$`),
    );
    expect(createLogs[12]).toBe(success);
    // ...then the reverse record's Create and Update inside the registrar's call.
    expect(createLogs).toContain(invoke(2));
    expect(createLogs).toContain('Program log: Instruction: Update Data');
    expect(createLogs.at(-1)).toMatch(
      /^Program jCebN34bUfdeUYJT13J1yG16XWQpt5PDx6Mse9GUqhR success$/,
    );

    const newOwner = new PublicKey(randomBytes(32));
    const moved = sim.chain.transferSubdomain('demo', 'logged', newOwner);
    const [, transfer] = await client.waitFor(sub, 2);
    expect(logsOf(transfer).signature).toBe(moved.signature);
    expect(logsOf(transfer).logs).toEqual([
      invoke(1),
      ...programLines('Instruction: Transfer Ownership'),
      expect.stringMatching(
        new RegExp(`^Program ${PROGRAM} consumed \\d+ of 200000 compute units$`),
      ),
      success,
    ]);
    const account = sim.chain.getAccount(created.subKey);
    expect(account?.data.subarray(32, 64)).toEqual(newOwner.toBuffer());

    expect(sim.chain.deleteSubdomain('demo', 'logged')).toBe(true);
    const [, , deletion] = await client.waitFor(sub, 3);
    const deleteLogs = logsOf(deletion).logs;
    expect(
      deleteLogs.filter((line) => line === 'Program log: Instruction: Delete Name'),
    ).toHaveLength(2);
    expect(deleteLogs.slice(0, 5)).toEqual([
      invoke(1),
      ...programLines('Instruction: Delete Name'),
    ]);
    expect(logsOf(deletion).signature).toBe(sim.chain.lastTransaction?.signature);
    expect(sim.chain.getAccount(created.subKey)).toBeUndefined();
    expect(sim.chain.getAccount(created.reverseKey)).toBeUndefined();
  });

  it('a failed Delete: logs with err and the runtime failure, nothing deleted', async () => {
    const client = await open();
    const sub = await client.subscribe('logsSubscribe', [{ mentions: [PROGRAM] }]);
    const keys = sim.chain.addSubdomain('demo', 'kept');
    const thief = new PublicKey(randomBytes(32));
    const signature = sim.chain.failedDelete(keys.subKey, thief);
    const [, failed] = await client.waitFor(sub, 2);
    const error = { InstructionError: [0, 'InvalidArgument'] };
    expect(logsOf(failed).signature).toBe(signature);
    expect(logsOf(failed).err).toEqual(error);
    expect(logsOf(failed).logs).toEqual([
      invoke(1),
      ...programLines('Instruction: Delete Name'),
      'Program log: The given name owner is incorrect or not a signer.',
      expect.stringMatching(
        new RegExp(`^Program ${PROGRAM} consumed \\d+ of 200000 compute units$`),
      ),
      `Program ${PROGRAM} failed: invalid program argument`,
    ]);
    expect(sim.chain.getAccount(keys.subKey)).toBeDefined();
    const tx = (await post(sim.url, 'getTransaction', [signature, CONFIRMED])).result as JsonTx;
    expect(tx.meta.err).toEqual(error);
    expect(tx.meta.status).toEqual({ Err: error });
    expect(tx.meta.preBalances[0]).toBe((tx.meta.postBalances[0] ?? 0) + tx.meta.fee);
  });

  it("'all' hears every transaction, mentions only its own; unsubscribe stops; one address only", async () => {
    const client = await open();
    const all = await client.subscribe('logsSubscribe', ['all']);
    const stranger = await client.subscribe('logsSubscribe', [
      { mentions: [new PublicKey(randomBytes(32)).toBase58()] },
    ]);
    const owner = new PublicKey(randomBytes(32));
    const mine = await client.subscribe('logsSubscribe', [{ mentions: [owner.toBase58()] }]);

    sim.chain.addSubdomain('demo', 'heard', { owner });
    const [note] = await client.waitFor(all, 1);
    const [ownNote] = await client.waitFor(mine, 1);
    expect(logsOf(ownNote)).toEqual(logsOf(note));

    expect((await client.call('logsUnsubscribe', [all])).result).toBe(true);
    expect((await client.call('logsUnsubscribe', [all])).error?.code).toBe(-32602);
    sim.chain.transferSubdomain('demo', 'heard', new PublicKey(randomBytes(32)));
    // The owner signs the transfer: its subscription hears it; the closed one does not.
    await client.waitFor(mine, 2);
    expect(client.notifications(all)).toHaveLength(1);
    expect(client.notifications(stranger)).toHaveLength(0);

    const two = await client.call('logsSubscribe', [{ mentions: [PROGRAM, SYSTEM] }]);
    expect(two.error).toEqual({
      code: -32602,
      message: 'Invalid Request: Only 1 address supported',
    });
    expect((await client.call('logsSubscribe', ['everything'])).error?.code).toBe(-32602);
    expect((await client.call('logsSubscribe', [{ mentions: ['nope'] }])).error?.code).toBe(-32602);
  });

  it('whole-program programSubscribe with dataSlice: every write, nothing for a Delete', async () => {
    const client = await open();
    const sub = await client.subscribe('programSubscribe', [
      PROGRAM,
      { encoding: 'base64', commitment: 'confirmed', dataSlice: { offset: 0, length: 32 } },
    ]);
    const one = sim.chain.addSubdomain('demo', 'whole');
    const other = sim.chain.addSubdomain('bonfida', 'elsewhere');
    const notes = await client.waitFor(sub, 4);
    expect(notes.map((n) => (n.params.result.value as KeyedValue).pubkey)).toEqual([
      one.subKey.toBase58(),
      one.reverseKey.toBase58(),
      other.subKey.toBase58(),
      other.reverseKey.toBase58(),
    ]);
    // The slice: the header's parent key only.
    const first = notes[0]?.params.result.value as KeyedValue;
    expect(first.account.data).toEqual([one.parentKey.toBuffer().toString('base64'), 'base64']);
    expect(first.account.space).toBe(NAME_HEADER_LEN + 2000);

    // As agave: a deleted account ends with 0 lamports and the system program as owner, so a
    // subscription to the name program is not told. The next notification is the next write.
    sim.chain.deleteSubdomain('demo', 'whole');
    const after = sim.chain.addSubdomain('demo', 'after');
    const all = await client.waitFor(sub, 6);
    expect(all.slice(4).map((n) => (n.params.result.value as KeyedValue).pubkey)).toEqual([
      after.subKey.toBase58(),
      after.reverseKey.toBase58(),
    ]);
  });
});

describe('getTransaction', () => {
  let sim: RpcSimulator;
  beforeAll(async () => {
    const chain = new SimChain();
    seedDemoChain(chain);
    sim = await startRpcSimulator({ chain });
  });
  afterAll(() => sim.close());

  it('json: the real result shape, the Create and Update of a subdomain with inner instructions', async () => {
    const created = sim.chain.addSubdomain('demo', 'shaped');
    const reply = await post(sim.url, 'getTransaction', [
      created.signature,
      { encoding: 'json', ...CONFIRMED },
    ]);
    const tx = reply.result as JsonTx;
    expect(Object.keys(tx)).toEqual(['slot', 'transaction', 'meta', 'version', 'blockTime']);
    expect(tx.version).toBe('legacy');
    expect(tx.slot).toBe(sim.chain.getTransaction(created.signature ?? '')?.slot);
    expect(Math.abs(tx.blockTime - Date.now() / 1000)).toBeLessThan(60);
    const { message, signatures } = tx.transaction;
    expect(signatures[0]).toBe(created.signature);
    expect(signatures).toHaveLength(message.header.numRequiredSignatures);
    for (const s of signatures) expect(bs58.decode(s)).toHaveLength(64);
    expect(bs58.decode(message.recentBlockhash)).toHaveLength(32);
    const keys = message.accountKeys;
    // Top level: the name program's Create (tag 0) of the subdomain account.
    const [create, reverse] = message.instructions;
    expect(keys[create?.programIdIndex ?? -1]).toBe(PROGRAM);
    expect(tagOf(create?.data ?? '')).toBe(0);
    expect(keys[create?.accounts[2] ?? -1]).toBe(created.subKey.toBase58());
    expect(create?.stackHeight).toBeNull();
    expect(keys[reverse?.programIdIndex ?? -1]).toBe('jCebN34bUfdeUYJT13J1yG16XWQpt5PDx6Mse9GUqhR');
    // Inner: the reverse record's Create (tag 0) and Update (tag 1), at stack height 2.
    const inner = tx.meta.innerInstructions.find((group) => group.index === 1)?.instructions ?? [];
    const nameCalls = inner.filter((ix) => keys[ix.programIdIndex] === PROGRAM);
    expect(nameCalls.map((ix) => [tagOf(ix.data), ix.stackHeight])).toEqual([
      [0, 2],
      [1, 2],
    ]);
    expect(keys[nameCalls[0]?.accounts[2] ?? -1]).toBe(created.reverseKey.toBase58());
    expect(tx.meta).toMatchObject({
      err: null,
      status: { Ok: null },
      fee: 5000 * message.header.numRequiredSignatures,
      loadedAddresses: { writable: [], readonly: [] },
    });
    expect(tx.meta.logMessages).toEqual(sim.chain.getTransaction(created.signature ?? '')?.logs);
    // Balances line up with the keys; the new accounts went from 0 to rent-exempt.
    expect(tx.meta.preBalances).toHaveLength(keys.length);
    const at = keys.indexOf(created.subKey.toBase58());
    expect(tx.meta.preBalances[at]).toBe(0);
    expect(tx.meta.postBalances[at]).toBe(sim.chain.getAccount(created.subKey)?.lamports);
  });

  it('jsonParsed: account keys as objects, unparsed programs as {programId, accounts, data}', async () => {
    const created = sim.chain.addSubdomain('demo', 'parsed');
    const reply = await post(sim.url, 'getTransaction', [
      created.signature,
      { encoding: 'jsonParsed', ...CONFIRMED },
    ]);
    const tx = reply.result as ParsedTx;
    const { accountKeys, instructions } = tx.transaction.message;
    expect(accountKeys[0]).toEqual({
      pubkey: expect.any(String) as string,
      writable: true,
      signer: true,
      source: 'transaction',
    });
    expect(accountKeys.find((k) => k.pubkey === created.subKey.toBase58())).toMatchObject({
      writable: true,
      signer: false,
    });
    expect(instructions[0]).toEqual({
      programId: PROGRAM,
      accounts: expect.arrayContaining([created.subKey.toBase58()]) as string[],
      data: expect.any(String) as string,
      stackHeight: null,
    });
    // System-program calls are parsed, as agave parses them.
    const systemCalls = tx.meta.innerInstructions[0]?.instructions ?? [];
    expect(systemCalls.map((ix) => (ix.parsed as { type: string }).type)).toEqual([
      'transfer',
      'allocate',
      'assign',
    ]);
    expect(systemCalls[2]).toEqual({
      program: 'system',
      programId: SYSTEM,
      parsed: { info: { account: created.subKey.toBase58(), owner: PROGRAM }, type: 'assign' },
      stackHeight: 2,
    });
  });

  it('a Delete through another program is an inner instruction whose first account is the name', async () => {
    const wrapper = new PublicKey(randomBytes(32));
    const keys = sim.chain.addSubdomain('demo', 'viacpi');
    expect(sim.chain.deleteSubdomain('demo', 'viacpi', { via: wrapper })).toBe(true);
    const signature = sim.chain.lastTransaction?.signature;
    const tx = (
      await post(sim.url, 'getTransaction', [signature, { encoding: 'json', ...CONFIRMED }])
    ).result as JsonTx;
    const accountKeys = tx.transaction.message.accountKeys;
    expect(tx.transaction.message.instructions.map((ix) => accountKeys[ix.programIdIndex])).toEqual(
      [wrapper.toBase58()],
    );
    const deletes = (tx.meta.innerInstructions[0]?.instructions ?? []).filter(
      (ix) => accountKeys[ix.programIdIndex] === PROGRAM && tagOf(ix.data) === 3,
    );
    expect(deletes.map((ix) => accountKeys[ix.accounts[0] ?? -1])).toEqual([
      keys.subKey.toBase58(),
      keys.reverseKey.toBase58(),
    ]);
    expect(deletes.every((ix) => ix.stackHeight === 2)).toBe(true);
    expect(tx.meta.logMessages[0]).toBe(`Program ${wrapper.toBase58()} invoke [1]`);
    expect(tx.meta.logMessages[1]).toBe(invoke(2));
    expect(tx.meta.logMessages).toContain('Program log: Instruction: Delete Name');
    // The deleted accounts end with no lamports.
    expect(tx.meta.postBalances[accountKeys.indexOf(keys.subKey.toBase58())]).toBe(0);

    // The same over HTTP, for curl.
    sim.chain.addSubdomain('demo', 'viacurl');
    const deleted = await post(sim.url, 'simDeleteSubdomain', [
      'demo',
      'viacurl',
      { via: wrapper.toBase58() },
    ]);
    expect(deleted.result).toBe(true);
    expect(sim.chain.lastTransaction?.logs[0]).toBe(`Program ${wrapper.toBase58()} invoke [1]`);
    const bad = await post(sim.url, 'simDeleteSubdomain', ['demo', 'x', { via: 'nope' }]);
    expect(bad.error?.code).toBe(-32602);
  });

  it('null while the node lags, then the transaction; commitment rules as agave', async () => {
    sim.setTransactionLagMs(400);
    try {
      const created = sim.chain.addSubdomain('demo', 'lagged');
      const started = performance.now();
      const ask = async (): Promise<unknown> =>
        (await post(sim.url, 'getTransaction', [created.signature, CONFIRMED])).result;
      expect(await ask()).toBeNull();
      const found = await until(async () => (await ask()) ?? undefined, 'the transaction');
      expect(performance.now() - started).toBeGreaterThanOrEqual(390);
      expect((found as JsonTx).transaction.signatures[0]).toBe(created.signature);
    } finally {
      sim.setTransactionLagMs(0);
    }

    const created = sim.chain.addSubdomain('demo', 'finality');
    const processed = await post(sim.url, 'getTransaction', [
      created.signature,
      { commitment: 'processed' },
    ]);
    expect(processed.error).toEqual({
      code: -32602,
      message: 'Method does not support commitment below `confirmed`',
    });
    // The default commitment is finalized: null until the slot is 32 deep.
    expect((await post(sim.url, 'getTransaction', [created.signature])).result).toBeNull();
    for (let i = 0; i < FINALIZED_DEPTH; i++) sim.chain.advanceSlot();
    expect((await post(sim.url, 'getTransaction', [created.signature])).result).not.toBeNull();

    const unknown = bs58.encode(randomBytes(64));
    expect((await post(sim.url, 'getTransaction', [unknown, CONFIRMED])).result).toBeNull();
    expect((await post(sim.url, 'getTransaction', ['abc', CONFIRMED])).error?.code).toBe(-32602);
    expect(
      (await post(sim.url, 'getTransaction', [created.signature, { encoding: 'base64' }])).error
        ?.code,
    ).toBe(-32602);
  });

  it('the HTTP lag hides transactions as it hides their accounts', async () => {
    sim.setHttpLagMs(300);
    try {
      const created = sim.chain.addSubdomain('demo', 'httplag');
      const ask = async (): Promise<unknown> =>
        (await post(sim.url, 'getTransaction', [created.signature, CONFIRMED])).result;
      expect(await ask()).toBeNull();
      await until(async () => (await ask()) ?? undefined, 'the transaction');
    } finally {
      sim.setHttpLagMs(0);
    }
  });
});

describe('getSignaturesForAddress', () => {
  let sim: RpcSimulator;
  beforeAll(async () => {
    sim = await startRpcSimulator({ chain: new SimChain() });
  });
  afterAll(() => sim.close());

  it('pages newest first with before and until; the real row shape', async () => {
    const owner = new PublicKey(randomBytes(32));
    sim.chain.addDomain('paging', owner);
    const signatures: string[] = [];
    for (let i = 0; i < 5; i++) {
      signatures.push(sim.chain.addSubdomain('paging', `s${i}`).signature ?? '');
    }
    // Another owner's transactions under another parent do not mention `owner`.
    sim.chain.addSubdomain('unrelated', 'x');
    const newestFirst = [...signatures].reverse();
    const list = async (config: Record<string, unknown>): Promise<string[]> => {
      const reply = await post(sim.url, 'getSignaturesForAddress', [
        owner.toBase58(),
        { commitment: 'confirmed', ...config },
      ]);
      expect(reply.error).toBeUndefined();
      return (reply.result as Array<{ signature: string }>).map((row) => row.signature);
    };
    const all = await list({});
    expect(all.slice(0, 5)).toEqual(newestFirst);
    expect(all).toHaveLength(6); // and the parent's creation

    const page1 = await list({ limit: 2 });
    expect(page1).toEqual(newestFirst.slice(0, 2));
    const page2 = await list({ limit: 2, before: page1.at(-1) });
    expect(page2).toEqual(newestFirst.slice(2, 4));
    expect(await list({ until: signatures[1] })).toEqual(newestFirst.slice(0, 3));
    expect(await list({ before: signatures[4], until: signatures[1] })).toEqual([
      signatures[3],
      signatures[2],
    ]);
    // An unknown `before` gives nothing; an unknown `until` reaches back as far as kept.
    const unknown = bs58.encode(randomBytes(64));
    expect(await list({ before: unknown })).toEqual([]);
    expect(await list({ until: unknown })).toEqual(all);

    const rows = (
      await post(sim.url, 'getSignaturesForAddress', [
        NAME_PROGRAM_ID.toBase58(),
        { commitment: 'confirmed', limit: 1 },
      ])
    ).result as unknown[];
    const last = sim.chain.lastTransaction;
    expect(rows).toEqual([
      {
        signature: last?.signature,
        slot: last?.slot,
        err: null,
        memo: null,
        blockTime: last?.blockTime,
        confirmationStatus: 'confirmed',
      },
    ]);
  });

  it('as a stingy provider, answers at most the page cap whatever limit asked', async () => {
    const owner = new PublicKey(randomBytes(32));
    sim.chain.addDomain('capped', owner);
    for (let i = 0; i < 5; i++) sim.chain.addSubdomain('capped', `c${i}`);
    const count = async (config: Record<string, unknown>) =>
      (
        (await post(sim.url, 'getSignaturesForAddress', [owner.toBase58(), config]))
          .result as unknown[]
      ).length;
    sim.setSignaturesPageCap(3);
    try {
      expect(await count({ commitment: 'confirmed', limit: 10 })).toBe(3);
      expect(await count({ commitment: 'confirmed', limit: 2 })).toBe(2);
      expect(await count({ commitment: 'confirmed' })).toBe(3);
      expect(() => sim.setSignaturesPageCap(0)).toThrow(TypeError);
    } finally {
      sim.setSignaturesPageCap(Infinity);
    }
    expect(await count({ commitment: 'confirmed', limit: 10 })).toBe(6);
  });

  it('under a page cap still refuses a limit the node refuses, rather than cap it', async () => {
    const owner = new PublicKey(randomBytes(32));
    sim.chain.addDomain('strict', owner);
    for (let i = 0; i < 4; i++) sim.chain.addSubdomain('strict', `s${i}`);
    const call = (limit: unknown) =>
      post(sim.url, 'getSignaturesForAddress', [
        owner.toBase58(),
        { commitment: 'confirmed', limit },
      ]);
    sim.setSignaturesPageCap(3);
    try {
      for (const limit of [0, -1, 2.5, 1001, 1e9]) {
        const reply = await call(limit);
        expect(reply.result, `limit ${limit}`).toBeUndefined();
        expect(reply.error, `limit ${limit}`).toEqual({
          code: -32602,
          message: 'Invalid limit; max 1000',
        });
      }
      // Not a number: the node's params fail to parse.
      expect((await call('10')).error?.code).toBe(-32602);
      // A valid limit is what the cap cuts; null is no limit, so the default, cut too.
      expect((await call(1000)).result).toHaveLength(3);
      expect((await call(null)).result).toHaveLength(3);
    } finally {
      sim.setSignaturesPageCap(Infinity);
    }
  });

  it('limits, commitment and minContextSlot as agave', async () => {
    const address = NAME_PROGRAM_ID.toBase58();
    const call = (config: Record<string, unknown>) =>
      post(sim.url, 'getSignaturesForAddress', [address, config]);
    expect((await call({ limit: 0 })).error).toEqual({
      code: -32602,
      message: 'Invalid limit; max 1000',
    });
    expect((await call({ limit: 1001 })).error?.code).toBe(-32602);
    expect((await call({ commitment: 'processed' })).error?.message).toBe(
      'Method does not support commitment below `confirmed`',
    );
    const ahead = await call({ commitment: 'confirmed', minContextSlot: sim.chain.slot + 100 });
    expect(ahead.error?.code).toBe(-32016);
    expect((await call({ before: 'x' })).error?.code).toBe(-32602);
    // Finalized (the default) leaves out what is less than 32 slots deep.
    sim.chain.addSubdomain('fin', 'recent');
    const recent = sim.chain.lastTransaction?.signature;
    const finalized = (await call({})).result as Array<{ signature: string }>;
    expect(finalized.map((row) => row.signature)).not.toContain(recent);
  });

  it('a lagging node leaves out transactions younger than the lag', async () => {
    sim.setTransactionLagMs(300);
    try {
      const signature = sim.chain.addSubdomain('lagging', 'young').signature;
      const listed = async (): Promise<string[]> =>
        (
          (
            await post(sim.url, 'getSignaturesForAddress', [
              NAME_PROGRAM_ID.toBase58(),
              { commitment: 'confirmed', limit: 5 },
            ])
          ).result as Array<{ signature: string }>
        ).map((row) => row.signature);
      expect(await listed()).not.toContain(signature);
      await until(
        async () => ((await listed()).includes(signature ?? '') ? true : undefined),
        'the signature to be listed',
      );
    } finally {
      sim.setTransactionLagMs(0);
    }
  });
});

describe('background writes', () => {
  it('writes at the configured rate, each a transaction with logs and a program notification', async () => {
    const sim = await startRpcSimulator({ chain: new SimChain() });
    const client = await WsClient.open(sim.wsUrl);
    try {
      const program = await client.subscribe('programSubscribe', [
        PROGRAM,
        { encoding: 'base64', dataSlice: { offset: 0, length: 0 } },
      ]);
      const logs = await client.subscribe('logsSubscribe', [{ mentions: [PROGRAM] }]);
      const before = sim.chain.transactionCount;
      sim.setBackgroundWrites(100);
      const parents = sim.chain.transactionCount - before; // made at once
      const started = performance.now();
      await elapse(1000);
      sim.setBackgroundWrites(0);
      const seconds = (performance.now() - started) / 1000;
      const writes = sim.backgroundWrites;
      expect(writes).toBeGreaterThanOrEqual(Math.floor(100 * seconds * 0.7));
      expect(writes).toBeLessThanOrEqual(Math.ceil(100 * seconds) + 1);
      expect(sim.chain.transactionCount - before).toBe(parents + writes);
      // Stopped: nothing more.
      await elapse(100);
      expect(sim.backgroundWrites).toBe(writes);
      expect(sim.chain.transactionCount - before).toBe(parents + writes);

      await client.waitFor(logs, parents + writes);
      const programNotes = client.notifications(program);
      // At least one program notification per write (a creation writes two accounts).
      expect(programNotes.length).toBeGreaterThanOrEqual(writes + parents);
      const kinds = new Set(
        client
          .notifications(logs)
          .map((n) => logsOf(n).logs.find((line) => line.startsWith('Program log: Instruction: ')))
          .filter((line) => line !== undefined),
      );
      expect([...kinds].sort()).toEqual([
        'Program log: Instruction: Create',
        'Program log: Instruction: Transfer Ownership',
        'Program log: Instruction: Update Data',
      ]);
    } finally {
      client.close();
      await sim.close();
    }
  });
});

describe('SimChain transactions', () => {
  it('bare writes of name accounts are Create, Transfer, Update and Delete transactions', () => {
    const chain = new SimChain({ slot: 10 });
    const key = new PublicKey(randomBytes(32));
    const owner = new PublicKey(randomBytes(32));
    const header = Buffer.concat([Buffer.alloc(32), owner.toBuffer(), Buffer.alloc(32)]);
    const line = (): string | undefined =>
      chain.lastTransaction?.logs.find((l) => l.startsWith('Program log: Instruction: '));

    chain.setAccount(key, { data: Buffer.concat([header, Buffer.alloc(8)]) });
    expect(line()).toBe('Program log: Instruction: Create');
    expect(chain.lastTransaction?.slot).toBe(11);
    expect(chain.slot).toBe(11);

    const next = new PublicKey(randomBytes(32));
    const moved = Buffer.from(chain.getAccount(key)?.data ?? []);
    next.toBuffer().copy(moved, 32);
    chain.setAccount(key, { data: moved });
    expect(line()).toBe('Program log: Instruction: Transfer Ownership');
    expect(chain.lastTransaction?.accountKeys[0]).toBe(next.toBase58());

    const updated = Buffer.from(moved);
    updated[NAME_HEADER_LEN + 3] = 7;
    chain.setAccount(key, { data: updated });
    expect(line()).toBe('Program log: Instruction: Update Data');
    const data = Buffer.from(
      bs58.decode(
        (transactionJsonOf(chain) as JsonTx).transaction.message.instructions[0]?.data ?? '',
      ),
    );
    expect([data[0], data.readUInt32LE(1)]).toEqual([1, 3]); // Update at offset 3

    expect(chain.deleteAccount(key)).toBe(true);
    expect(line()).toBe('Program log: Instruction: Delete Name');
    expect(chain.slot).toBe(14);
    expect(chain.transactionCount).toBe(4);

    // Accounts of other programs are plain writes: no transaction.
    chain.setAccount(new PublicKey(randomBytes(32)), { data: Buffer.alloc(1), owner });
    expect(chain.transactionCount).toBe(4);
    expect(chain.slot).toBe(15);
  });

  it('genesis writes make no transactions; kept transactions are bounded', () => {
    const chain = new SimChain({ maxTransactions: 3 });
    chain.genesis(() => seedDemoChain(chain));
    expect(chain.transactionCount).toBe(0);
    expect(chain.size).toBeGreaterThan(10);
    const signatures = ['a', 'b', 'c', 'd'].map((l) => chain.addSubdomain('demo', l).signature);
    expect(chain.transactionCount).toBe(4);
    expect(chain.getTransaction(signatures[0] ?? '')).toBeUndefined();
    expect([...chain.transactionsNewestFirst()].map((tx) => tx.signature)).toEqual(
      signatures.slice(1).reverse(),
    );
    expect(() => new SimChain({ maxTransactions: 0 })).toThrow(TypeError);
  });
});

describe('npm run rpc:sim options', () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    spawn(process.execPath, ['--import', 'tsx', 'tools/rpc-sim/cli.ts', ...args], {
      env: { ...process.env, RPC_SIM_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  it('--background-writes (or RPC_SIM_BACKGROUND_WRITES) turns background writes on', async () => {
    for (const [args, env] of [
      [['--background-writes', '40', '--tx-lag-ms', '250'], {}],
      [[], { RPC_SIM_BACKGROUND_WRITES: '40', RPC_SIM_TX_LAG_MS: '250' }],
    ] as const) {
      const child = cli([...args], env);
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      try {
        await until(() => (out.includes('Ctrl-C') ? true : undefined), 'the banner', 30_000);
        expect(out).toContain('Background: 40 unrelated name-program writes a second');
        expect(out).toContain('Transactions unknown to HTTP reads for 250 ms');
        const url = /listening on (http:\/\/\S+)/.exec(out)?.[1] ?? '';
        // Background transactions show up in the name program's history.
        await until(
          async () => {
            const reply = await post(url, 'getSignaturesForAddress', [
              PROGRAM,
              { commitment: 'confirmed', limit: 50 },
            ]);
            return (reply.result as unknown[]).length >= 40 ? true : undefined;
          },
          'background transactions',
          10_000,
        );
      } finally {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    }
  }, 60_000);

  it('refuses a rate that is not a number', async () => {
    const child = cli(['--background-writes', 'fast']);
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).not.toBe(0);
    expect(err).toContain('--background-writes / RPC_SIM_BACKGROUND_WRITES must be a number >= 0');
  }, 30_000);
});

/** getTransaction's json of the chain's newest transaction. */
function transactionJsonOf(chain: SimChain): unknown {
  const tx = chain.lastTransaction;
  if (!tx) throw new Error('no transaction');
  return transactionJson(tx, 'json', true);
}
