import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { createMetrics, type Metrics } from '../src/core/metrics.js';
import { costOf, parseRetryAfter, RpcCallError, RpcClient } from '../worker/rpc/client.js';
import { endpointId, type RpcEndpoint } from '../src/core/rpc/endpoint.js';
import { Agents } from '../worker/rpc/transport.js';
import { DecodeThread } from '../worker/sns/decode-thread.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';

describe('RpcClient against the simulator', () => {
  let sim: RpcSimulator;
  let agents: Agents;
  let metrics: Metrics;
  let rpc: RpcClient;
  let endpoint: RpcEndpoint;
  const thread = new DecodeThread({ heapMb: 64, taskMs: 5_000 });
  const decode = thread.envelope();

  beforeAll(async () => {
    sim = await startRpcSimulator();
    agents = new Agents();
    endpoint = { kind: 'default', url: sim.url, id: endpointId(sim.url) };
  });
  afterAll(async () => {
    agents.destroy();
    await thread.close();
    await sim.close();
  });
  beforeEach(() => {
    sim.resetCalls();
    sim.setFaults([]);
    metrics = createMetrics(new Registry(), { defaultMetrics: false });
    rpc = new RpcClient({
      metrics,
      agents,
      timeoutMs: 300,
      retries: 3,
      maxResponseBytes: 1024 * 1024,
      isTrusted: () => true,
      costs: loadConfig({}).RPC_CREDITS,
      minBackoffMs: 10,
    });
  });

  const value = async (name: string, labels: Record<string, string>) =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) =>
      Object.entries(labels).every(([k, l]) => v.labels[k] === l),
    )?.value ?? 0;

  it('returns the result and counts one round trip with its cost', async () => {
    expect(
      await rpc.call(endpoint, 'getSlot', [], { decode: thread.envelope<number>() }),
    ).toBeTypeOf('number');
    expect(
      await value('sns_rpc_requests_total', {
        method: 'getSlot',
        endpoint: 'default',
        outcome: 'ok',
      }),
    ).toBe(1);
    expect(await value('sns_rpc_credits_total', { method: 'getSlot' })).toBe(1);
    expect(await value('sns_rpc_response_bytes_total', { method: 'getSlot' })).toBeGreaterThan(0);
    expect(await value('sns_rpc_retries_total', { method: 'getSlot' })).toBe(0);
  });

  it('charges a getProgramAccountsV2 page like a getProgramAccounts by default (Helius: 10)', async () => {
    await rpc.call(
      endpoint,
      'getProgramAccountsV2',
      ['namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX', { encoding: 'base64', limit: 1 }],
      { decode },
    );
    expect(sim.callCount('getProgramAccountsV2')).toBe(1);
    expect(await value('sns_rpc_credits_total', { method: 'getProgramAccountsV2' })).toBe(10);
  });

  it('retries 503s with back-off and succeeds, counting every round trip', async () => {
    sim.setFaults([{ kind: 'http', status: 503, times: 2 }]);
    await rpc.call(endpoint, 'getSlot', [], { decode });
    expect(sim.callCount('getSlot')).toBe(3);
    expect(await value('sns_rpc_requests_total', { outcome: 'http_error' })).toBe(2);
    expect(await value('sns_rpc_requests_total', { outcome: 'ok' })).toBe(1);
    expect(await value('sns_rpc_retries_total', { method: 'getSlot' })).toBe(2);
  });

  it('honours Retry-After on 429 and bills nothing for it', async () => {
    sim.setFaults([{ kind: 'http', status: 429, retryAfterSeconds: 1, times: 1 }]);
    const started = Date.now();
    await rpc.call(endpoint, 'getSlot', [], { decode });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(await value('sns_rpc_credits_total', { method: 'getSlot' })).toBe(1);
  });

  it('does not retry a JSON-RPC error that cannot succeed', async () => {
    sim.setFaults([{ kind: 'rpc-error', code: -32602, message: 'Invalid params' }]);
    const err = await rpc.call(endpoint, 'getSlot', [], { decode }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcCallError);
    expect((err as RpcCallError).outcome).toBe('rpc_error');
    expect(sim.callCount('getSlot')).toBe(1);
  });

  it('retries a transient JSON-RPC error (-32005 node behind)', async () => {
    sim.setFaults([{ kind: 'rpc-error', code: -32005, times: 1 }]);
    await rpc.call(endpoint, 'getSlot', [], { decode });
    expect(sim.callCount('getSlot')).toBe(2);
  });

  it('times out a hanging endpoint, counting timeouts, and gives up after its retries', async () => {
    sim.setFaults([{ kind: 'hang' }]);
    const started = Date.now();
    const err = await rpc.call(endpoint, 'getSlot', [], { decode }).catch((e: unknown) => e);
    expect((err as RpcCallError).outcome).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await value('sns_rpc_requests_total', { outcome: 'timeout' })).toBe(4);
  });

  it('treats a garbage body as a retryable http_error', async () => {
    sim.setFaults([{ kind: 'garbage', times: 1 }]);
    await rpc.call(endpoint, 'getSlot', [], { decode });
    expect(await value('sns_rpc_requests_total', { outcome: 'http_error' })).toBe(1);
  });

  it('refuses a loopback address through the filtering agent for an untrusted endpoint', async () => {
    const untrusted = new RpcClient({
      metrics,
      agents,
      timeoutMs: 300,
      retries: 0,
      maxResponseBytes: 1024,
      isTrusted: () => false,
      costs: loadConfig({}).RPC_CREDITS,
    });
    const err = await untrusted
      .call({ kind: 'override', url: sim.url, id: 'x' }, 'getSlot', [], { decode })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcCallError);
    expect(sim.callCount()).toBe(0);
  });
});

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP dates (RFC 9110 §10.2.3)', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const inTwo = new Date(Date.now() + 2000).toUTCString();
    expect(parseRetryAfter(inTwo)).toBeGreaterThan(0);
  });
});

describe('costOf', () => {
  it("takes the method's cost, else the `*` one, else 1", () => {
    const costs = loadConfig({ RPC_CREDITS: 'getProgramAccounts=10,*=2' }).RPC_CREDITS;
    expect(costOf(costs, 'getProgramAccounts')).toBe(10);
    expect(costOf(costs, 'getMultipleAccounts')).toBe(2);
    expect(costOf(loadConfig({ RPC_CREDITS: 'getProgramAccounts=10' }).RPC_CREDITS, 'x')).toBe(1);
  });
});
