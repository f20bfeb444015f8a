import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { createLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { ProgramSubscriber } from '../src/worker/freshness/program-subscriber.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ProgramSubscriber', () => {
  it('leaves no socket open behind when closed during the handshake', async () => {
    const wss = new WebSocketServer({
      port: 0,
      host: '127.0.0.1',
      // The upgrade is answered 400 ms late, like a slow provider.
      verifyClient: (_info, done) => void setTimeout(() => done(true), 400),
    });
    await new Promise((r) => wss.once('listening', r));
    const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    const sub = new ProgramSubscriber({
      url,
      metrics: createMetrics(new Registry()),
      logger: createLogger('silent'),
      costs: {},
      pingMs: 1_000,
      onNotification: () => undefined,
      onSubscribed: () => undefined,
      onDisconnected: () => undefined,
      onRefused: () => undefined,
    });
    sub.start();
    await sleep(50);
    await sub.close();
    await sleep(600);
    const open = wss.clients.size;
    // The leaked client has no 'error' listener: an invalid frame from the server is thrown.
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.prependListener('uncaughtException', onUncaught);
    for (const c of wss.clients) {
      (c as unknown as { _socket: { write(b: Buffer): void } })._socket.write(
        Buffer.from([0x8f, 0x00]),
      );
    }
    await sleep(200);
    process.off('uncaughtException', onUncaught);
    for (const c of wss.clients) c.terminate();
    wss.close();
    expect(open).toBe(0);
    expect(uncaught).toEqual([]);
  });
});
