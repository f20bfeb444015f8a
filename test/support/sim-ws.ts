/**
 * Helpers for the simulator's own tests: a websocket JSON-RPC client that keeps every frame, an
 * HTTP JSON-RPC call, and polling (./wait.ts).
 */
import { expect } from 'vitest';
import WebSocket from 'ws';
import { until } from './wait.js';

export { until };

export interface WireAccount {
  data: [string, string] | string;
  executable: boolean;
  lamports: number;
  owner: string;
  rentEpoch: number;
  space: number;
}

export interface Notification {
  jsonrpc: string;
  method: string;
  params: {
    result: { context: { slot: number }; value: unknown };
    subscription: number;
  };
}

export interface Reply {
  jsonrpc: string;
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export interface KeyedValue {
  pubkey: string;
  account: WireAccount;
}

export const SYSTEM_PROGRAM = '11111111111111111111111111111111';

/** A websocket JSON-RPC client that keeps every frame it receives. */
export class WsClient {
  readonly frames: unknown[] = [];
  bytesReceived = 0;
  #nextId = 1;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const text = data.toString('utf8');
      this.bytesReceived += Buffer.byteLength(text);
      this.frames.push(JSON.parse(text));
    });
  }

  static async open(url: string): Promise<WsClient> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new WsClient(ws);
  }

  /** Sends raw text and returns the next answer frame (one with an `id` key). */
  async raw(text: string): Promise<Reply> {
    const seen = this.frames.length;
    this.ws.send(text);
    return until(
      () => this.frames.slice(seen).find((f): f is Reply => isReply(f)),
      `an answer to ${text}`,
    );
  }

  async call(method: string, params?: unknown[]): Promise<Reply> {
    const id = this.#nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return until(
      () => this.frames.find((f): f is Reply => isReply(f) && f.id === id),
      `the answer to ${method}`,
    );
  }

  /** Subscribes and returns the subscription id (fails on an error answer). */
  async subscribe(method: string, params: unknown[]): Promise<number> {
    const reply = await this.call(method, params);
    expect(reply.error).toBeUndefined();
    expect(typeof reply.result).toBe('number');
    return reply.result as number;
  }

  notifications(subscription?: number): Notification[] {
    return this.frames.filter(
      (f): f is Notification =>
        isNotification(f) && (subscription === undefined || f.params.subscription === subscription),
    );
  }

  /** Waits until `count` notifications of `subscription` have arrived; returns them all. */
  async waitFor(subscription: number, count: number): Promise<Notification[]> {
    return until(() => {
      const list = this.notifications(subscription);
      return list.length >= count ? list : undefined;
    }, `${count} notifications of subscription ${subscription}`);
  }

  close(): void {
    this.ws.terminate();
  }
}

export function isReply(frame: unknown): frame is Reply {
  return typeof frame === 'object' && frame !== null && 'id' in frame;
}

export function isNotification(frame: unknown): frame is Notification {
  return typeof frame === 'object' && frame !== null && 'method' in frame && !('id' in frame);
}

/** One JSON-RPC call over HTTP; expects HTTP 200. */
export async function post(url: string, method: string, params?: unknown[]): Promise<Reply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Reply;
}
