import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
import { PublicKey } from '@solana/web3.js';
import { REVERSE_LOOKUP_CLASS } from '../src/core/sns/pda.js';
import { FOLLOW, keepAsking, labels, PARENT, watched } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';
import { encodeNameAccount, encodeReverseData } from '../tools/rpc-sim/index.js';
import { elapse } from './support/wait.js';

const REVERSE_LOOKUP_CLASS_KEY = new PublicKey(REVERSE_LOOKUP_CLASS);

/**
 * Races of change-driven freshness (docs/design.md, "Freshness"), each found by a review and
 * failing before its fix: lagging nodes, deduplicated re-reads, patches past a pending re-read,
 * changes only a scan settles, refused subscriptions. Each asserts what the SDK would list.
 */

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

const LONG = 'a-label-longer-than-the-inline-slice-of-thirty-bytes';
/** Short windows: existence checks every half second. */
const QUICK = { ...FOLLOW, CACHE_FRESH_SECONDS: '3' };
/**
 * Windows for the clock's refreshes ahead, which begin a scan interval (a sixth of the window) or
 * two before expiry: 2 s for a refresh to end in, room on a loaded machine (a 3 s window left
 * 0.5 s, and a refresh ended late under load).
 */
const AHEAD = { ...FOLLOW, CACHE_FRESH_SECONDS: '12' };
/** Past a window of {@link AHEAD}: its entry was refreshed ahead at least once meanwhile. */
const PAST_A_WINDOW_MS = 14_000;

describe('freshness under races', () => {
  it('keeps a subdomain the websocket added when the deletion check reaches a lagging node', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    sim.setHttpLagMs(3_000);
    sim.chain.addSubdomain(PARENT, 'fresh');
    await waitFor(async () => (await labels(gw as Gateway)).includes('fresh'));
    // The next existence check runs within a window, on a node 3 s behind.
    await keepAsking(gw, 3_500);
    sim.setHttpLagMs(0);
    await keepAsking(gw, 6_000); // two more windows, the node caught up
    // On chain (and for the SDK) 'fresh' exists.
    expect(await labels(gw)).toContain('fresh');
  });

  it('shows a change whose re-read joined a scan already under way (deduplicated) that read too early', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    // Scans now answer 2 s late, from the chain as it was when they were asked.
    sim.setHttpLagMs(2_000);
    sim.setFaults([{ kind: 'delay', ms: 2_000, method: 'getProgramAccounts' }]);
    const accepted = sim.wsStats().accepted;
    sim.dropSockets(); // the reconnect's re-read is the scan in flight
    await waitFor(() => sim.wsStats().accepted > accepted && sim.wsStats().subscriptions >= 1);
    await elapse(400);
    const long = LONG;
    sim.chain.addSubdomain(PARENT, long); // unproven: re-read at its slot... deduplicated
    await elapse(2_500);
    sim.setFaults([]);
    sim.setHttpLagMs(0);
    // Two windows on a quiet machine; the bound allows for a loaded one (CI under a full run).
    await waitFor(async () => (await labels(gw as Gateway)).includes(long), 20_000);
  });

  it("keeps the scan of a pending re-read when a later patch raised the entry's slot past it", async () => {
    // A long window: no existence check runs during the test (the lagging check is the first test).
    gw = await startGateway({ env: { ...FOLLOW, CACHE_FRESH_SECONDS: '30' } });
    const { sim } = gw;
    await watched(gw, sim);
    sim.setHttpLagMs(1_500);
    const long = LONG;
    sim.chain.addSubdomain(PARENT, long); // unproven: re-read at slot M
    await elapse(1_200);
    sim.chain.addSubdomain(PARENT, 'short'); // patched at slot N > M
    await waitFor(async () => (await labels(gw as Gateway)).includes('short'));
    await keepAsking(gw, 3_000);
    sim.setHttpLagMs(0);
    await keepAsking(gw, 3_000);
    expect(await labels(gw)).toContain(long);
  });

  it("drops a label whose reverse record's text was emptied (the SDK lists no empty text)", async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const keys = sim.chain.addSubdomain(PARENT, 'emptied');
    await waitFor(async () => (await labels(gw as Gateway)).includes('emptied'));
    sim.chain.setAccount(keys.reverseKey, {
      data: encodeNameAccount(
        {
          parent: keys.parentKey,
          owner: REVERSE_LOOKUP_CLASS_KEY,
          nameClass: REVERSE_LOOKUP_CLASS_KEY,
        },
        encodeReverseData(''),
      ),
    });
    await keepAsking(gw, 6_000);
    expect(await labels(gw)).not.toContain('emptied');
  });

  it('lists a subdomain name account re-created under a reverse record that stayed', async () => {
    gw = await startGateway({ env: QUICK });
    const { sim } = gw;
    await watched(gw, sim);
    const keys = sim.chain.addSubdomain(PARENT, 'again');
    await waitFor(async () => (await labels(gw as Gateway)).includes('again'));
    const account = sim.chain.getAccount(keys.subKey);
    sim.chain.deleteAccount(keys.subKey);
    await waitFor(async () => !(await labels(gw as Gateway)).includes('again'));
    sim.chain.setAccount(keys.subKey, { data: Buffer.from(account?.data ?? []) });
    await keepAsking(gw, 6_000);
    expect(await labels(gw)).toContain('again');
  });

  it('gives a parent whose programSubscribe is refused back to the clock: never served stale', async () => {
    // A provider that opens websockets but refuses (or never answers) subscriptions, e.g. past its
    // per-connection subscription limit.
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((r) => wss.once('listening', r));
    wss.on('connection', (ws) =>
      ws.on('message', (data) => {
        const { id } = JSON.parse((data as Buffer).toString()) as { id: number };
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message: 'limit' } }));
      }),
    );
    const wsUrl = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    try {
      gw = await startGateway({ env: { ...AHEAD, RPC_WS_URL: wsUrl } });
      await labels(gw);
      const states = await keepAsking(gw, PAST_A_WINDOW_MS);
      // As with RPC_WS=off (hot-parent scans ahead of expiry), a hot parent is never served stale.
      expect(states).not.toContain('STALE');
    } finally {
      for (const c of wss.clients) c.terminate();
      wss.close();
    }
  }, 60_000);

  it('never serves a hot parent stale without a websocket either', async () => {
    gw = await startGateway({ env: { ...AHEAD, RPC_WS: 'off' } });
    await labels(gw);
    const states = await keepAsking(gw, PAST_A_WINDOW_MS);
    expect(states).not.toContain('STALE');
  }, 60_000);
});
