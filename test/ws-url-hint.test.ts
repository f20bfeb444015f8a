import { afterEach, describe, expect, it } from 'vitest';
import { wsUpgradeRefusedMessage } from '../worker/rpc/ws-url-hint.js';
import { FOLLOW, PARENT } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';

/**
 * A refused websocket upgrade says what was tried and what to set: the usual cause is RPC_WS_URL
 * derived from RPC_URL as port + 1 landing on a plain HTTP port (405).
 */

describe('wsUpgradeRefusedMessage', () => {
  it('names the endpoint tried, the status and the settings that fix it', () => {
    expect(wsUpgradeRefusedMessage('ws://127.0.0.1:8900/', 405)).toBe(
      'websocket upgrade refused by ws://127.0.0.1:8900 (HTTP 405): RPC_WS_URL, when unset, is ' +
        "derived from RPC_URL as ws(s) and its port + 1; set RPC_WS_URL to the provider's " +
        'websocket URL, or RPC_WS=off to refresh by the clock',
    );
  });

  it('never repeats credentials, a path or a query (where API keys live)', () => {
    const text = wsUpgradeRefusedMessage(
      'wss://user:secret@rpc.example.com:8443/v2/KEY123?api-key=KEY456',
      403,
    );
    expect(text).toMatch(
      /^websocket upgrade refused by wss:\/\/rpc\.example\.com:8443 \(HTTP 403\)/,
    );
    for (const secret of ['user', 'secret', 'KEY123', 'KEY456', '/v2']) {
      expect(text).not.toContain(secret);
    }
  });

  it('still says what to set when the URL does not parse', () => {
    expect(wsUpgradeRefusedMessage('not a url', 400)).toMatch(
      /^websocket upgrade refused by the configured RPC_WS_URL \(HTTP 400\): .*set RPC_WS_URL/,
    );
  });
});

describe('a worker whose RPC_WS_URL is a plain HTTP port', () => {
  let sim: RpcSimulator | undefined;
  let gw: Gateway | undefined;
  afterEach(async () => {
    await gw?.close();
    await sim?.close();
    gw = undefined;
    sim = undefined;
  });

  it('logs the hint, naming the address it tried', async () => {
    // What a wrong RPC_URL port gives: its port + 1 is the simulator's JSON-RPC port (405).
    sim = await startRpcSimulator({ chain: seedDemo() });
    const tried = `ws://127.0.0.1:${new URL(sim.url).port}`;
    gw = await startGateway({ sim, env: { ...FOLLOW, RPC_WS_URL: `${tried}/` } });
    // The parent turns hot, so the worker opens the websocket to follow it.
    for (let i = 0; i < 3; i++) expect((await gw.get(`/subdomains/${PARENT}`)).status).toBe(200);
    const expected = wsUpgradeRefusedMessage(`${tried}/`, 405);
    await waitFor(() => gw!.logs.some((l) => l.includes(expected)), 15_000);
    expect(expected).toContain(`refused by ${tried} (HTTP 405)`);
  });
});
