import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { FOLLOW, labels, PARENT, watched } from './support/freshness.js';
import {
  deletePrefix,
  seedDemo,
  startGateway,
  uniquePrefix,
  waitFor,
  type Gateway,
} from './support/gateway.js';
import { spawnMain, type MainProcess } from './support/main-process.js';
import { freePort } from './support/ports.js';
import { startRpcSimulator } from '../tools/rpc-sim/index.js';
import { hotParentsWindowKey } from '../src/core/cache/hot-parents.js';
import { LiveUpdates, type StreamSink } from '../src/api/subdomains/live-updates.js';
import type { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import type { RefreshListener } from '../src/core/queue/refresh-events.js';
import { endpointId, type RpcEndpoint } from '../src/core/rpc/endpoint.js';
import { publishRefreshEvent } from '../src/core/queue/refresh-events.js';
import { elapse } from './support/wait.js';

/**
 * Live updates (`GET /subdomains/:parent/events`, docs/design.md, "Live updates") against the
 * real worker, Redis and the simulator with websockets on: the first event, a change on chain
 * arriving as an event, heartbeats, the limits, shutdown.
 */

type SseEvent = { event: string; data: string } | { comment: string };

/** An SSE client over fetch: parses frames as they arrive, and waits for the next one. */
class SseClient {
  readonly frames: SseEvent[] = [];
  ended = false;
  private buffer = '';
  private readonly abort = new AbortController();
  private taken = 0;

  private constructor(readonly res: Response) {}

  static async open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const abort = new AbortController();
    const res = await fetch(url, { headers, signal: abort.signal });
    const client = new SseClient(res);
    Object.assign(client, { abort });
    if (res.headers.get('content-type')?.startsWith('text/event-stream')) void client.pump();
    return client;
  }

  private async pump() {
    const reader = (this.res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = this.buffer.indexOf('\n\n')) >= 0) {
          const frame = this.buffer.slice(0, cut);
          this.buffer = this.buffer.slice(cut + 2);
          if (frame.startsWith(':')) {
            this.frames.push({ comment: frame.slice(1).trim() });
            continue;
          }
          const fields = Object.fromEntries(
            frame
              .split('\n')
              .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
          ) as Record<string, string>;
          this.frames.push({ event: fields.event ?? 'message', data: fields.data ?? '' });
        }
      }
    } catch {
      // Aborted by close().
    }
    this.ended = true;
  }

  /** The next list event not taken yet, parsed, waiting at most `timeoutMs`. */
  async nextList(timeoutMs = 10_000): Promise<{ s: string; result: string[] }> {
    await waitFor(() => this.lists().length > this.taken, timeoutMs);
    const frame = this.lists()[this.taken++] as { event: string; data: string };
    expect(frame.event).toBe('subdomains');
    return JSON.parse(frame.data) as { s: string; result: string[] };
  }

  lists() {
    return this.frames.filter((f): f is { event: string; data: string } => 'event' in f);
  }

  pings() {
    return this.frames.filter((f) => 'comment' in f && f.comment === 'ping').length;
  }

  close() {
    this.abort.abort();
  }
}

let gw: Gateway | undefined;
const clients: SseClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await gw?.close();
  gw = undefined;
});

const open = async (g: Gateway, path: string, headers?: Record<string, string>) => {
  const client = await SseClient.open(g.baseUrl + path, headers);
  clients.push(client);
  return client;
};

describe('live updates', () => {
  it('sends the current list, then a subdomain created on chain as a new event', async () => {
    gw = await startGateway({ env: FOLLOW });
    const { sim } = gw;
    await watched(gw, sim);
    const stream = await open(gw, `/subdomains/${PARENT}/events`);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(stream.res.headers.get('cache-control')).toBe('no-store');
    expect(stream.res.headers.get('access-control-allow-origin')).toBe('*');
    expect(await stream.nextList()).toEqual({
      s: 'ok',
      result: ['bullish', 'hollaaa', 'testing'],
    });
    const scans = sim.callCount('getProgramAccounts');
    sim.chain.addSubdomain(PARENT, 'brandnew');
    expect(await stream.nextList()).toEqual({
      s: 'ok',
      result: ['brandnew', 'bullish', 'hollaaa', 'testing'],
    });
    // From the watcher's patch: the stream made no RPC call, and nothing scanned for it.
    expect(sim.callCount('getProgramAccounts')).toBe(scans);
  });

  it("waits for a cold parent's first refresh, and sends an event only when the labels change", async () => {
    gw = await startGateway({ env: { CACHE_FRESH_SECONDS: '1' } });
    const { sim } = gw;
    const stream = await open(gw, `/subdomains/${PARENT}/events`);
    expect(await stream.nextList()).toEqual({
      s: 'ok',
      result: ['bullish', 'hollaaa', 'testing'],
    });
    expect(sim.callCount('getProgramAccounts')).toBe(1);
    // An event about an entry whose labels did not change: re-read, and nothing sent.
    await publishRefreshEvent(gw.redis, gw.config.QUEUE_PREFIX, {
      endpointId: endpointId(sim.url),
      parent: PARENT,
      ok: true,
    });
    sim.chain.addSubdomain(PARENT, 'later');
    // Past its freshness (a second), the entry is refreshed with the new label.
    await waitFor(async () => (await labels(gw as Gateway)).includes('later'));
    expect(await stream.nextList()).toEqual({
      s: 'ok',
      result: ['bullish', 'hollaaa', 'later', 'testing'],
    });
    expect(stream.lists()).toHaveLength(2);
  });

  it("sends heartbeats and counts the stream's client once per window while the stream is open", async () => {
    // Two-second windows (the freshness lifetime): the stream is counted in windows after the one
    // its first list came in; a window's key lives two windows and a flush past its last write.
    const windowMs = 2_000;
    gw = await startGateway({
      sseHeartbeatMs: 100,
      env: { CACHE_FRESH_SECONDS: String(windowMs / 1000), CACHE_STALE_SECONDS: '600' },
    });
    const stream = await open(gw, `/subdomains/${PARENT}/events`);
    await stream.nextList();
    const later = Date.now() + windowMs;
    const window = Math.floor(later / windowMs);
    await waitFor(() => stream.pings() >= 5, 5_000);
    const score = async () =>
      Number(
        await gw!.redis.zscore(
          hotParentsWindowKey(gw!.config.QUEUE_PREFIX, windowMs, later),
          PARENT,
        ),
      );
    // Twenty heartbeats in that window, one client: counted once. The score is read until the
    // window is over and its last flush (every second) done, keeping the most it showed.
    let most = 0;
    await waitFor(async () => {
      most = Math.max(most, await score());
      return most >= 1 && Date.now() > (window + 1) * windowMs + 1_200;
    }, 15_000);
    expect(most).toBe(1);
  });

  it('refuses past SSE_MAX_PER_CLIENT streams of one client (429) and SSE_MAX_STREAMS in all (503)', async () => {
    gw = await startGateway({
      env: { SSE_MAX_PER_CLIENT: '2', SSE_MAX_STREAMS: '3', TRUST_PROXY: 'loopback' },
    });
    const as = (client: string) => ({ 'x-forwarded-for': client });
    const a1 = await open(gw, `/subdomains/${PARENT}/events`, as('203.0.113.1'));
    await a1.nextList();
    const a2 = await open(gw, `/subdomains/${PARENT}/events`, as('203.0.113.1'));
    await a2.nextList();
    const a3 = await gw.get(`/subdomains/${PARENT}/events`, { headers: as('203.0.113.1') });
    expect(a3.status).toBe(429);
    expect(a3.body).toMatchObject({ s: 'error', result: 'Too many requests' });
    expect(Number(a3.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another client (X-Forwarded-For honoured through the trusted proxy) is not limited by it...
    const b1 = await open(gw, `/subdomains/${PARENT}/events`, as('203.0.113.2'));
    await b1.nextList();
    // ...until the instance holds SSE_MAX_STREAMS.
    const c1 = await gw.get(`/subdomains/${PARENT}/events`, { headers: as('203.0.113.3') });
    expect(c1.status).toBe(503);
    expect(c1.body).toMatchObject({ s: 'error', result: 'Service overloaded' });
    // A closed stream frees its slots.
    a1.close();
    await waitFor(async () => {
      const again = await open(gw!, `/subdomains/${PARENT}/events`, as('203.0.113.1'));
      if (again.res.status === 200) return true;
      again.close();
      return false;
    }, 5_000);
  });

  it('answers an invalid parent 400 with the envelope, before any stream', async () => {
    gw = await startGateway();
    const res = await gw.get('/subdomains/67679.sol/events');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({ s: 'error', result: 'Invalid input' });
  });

  it('ends open streams on shutdown, and the server closes promptly', async () => {
    gw = await startGateway();
    const streams = await Promise.all(
      [1, 2, 3].map(() => open(gw as Gateway, `/subdomains/${PARENT}/events`)),
    );
    for (const s of streams) await s.nextList();
    const started = Date.now();
    await gw.api.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    await waitFor(() => streams.every((s) => s.ended), 2_000);
  });
});

describe('the entry file with open streams', () => {
  it('ends them on SIGTERM and exits 0 promptly', async () => {
    const sim = await startRpcSimulator({ chain: seedDemo() });
    const port = await freePort();
    const prefix = uniquePrefix();
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    let child: MainProcess | undefined;
    try {
      child = await spawnMain({
        REDIS_URL: inject('redisUrl'),
        RPC_URL: sim.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        QUEUE_PREFIX: prefix,
        ROLE: 'all',
      });
      const streams = await Promise.all(
        [1, 2].map(() => SseClient.open(`http://127.0.0.1:${port}/subdomains/${PARENT}/events`)),
      );
      clients.push(...streams);
      for (const s of streams) await s.nextList();
      const started = Date.now();
      expect((await child.kill('SIGTERM')).code).toBe(0);
      // Well within SHUTDOWN_TIMEOUT_MS (10 s): the streams did not hold the server's close.
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(child.output()).toContain('shut down cleanly');
      await waitFor(() => streams.every((s) => s.ended), 2_000);
    } finally {
      await child?.kill('SIGKILL');
      await sim.close();
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  });
});

describe('LiveUpdates', () => {
  const endpoint = { id: 'e', kind: 'default' } as RpcEndpoint;
  const hub = () => {
    let refreshed: (endpointId: string, parent: string) => void = () => undefined;
    const labels = ['a', 'b'];
    const cache = {
      keyOf: (e: RpcEndpoint, p: string) => `${e.id}:${p}`,
      get: async () => ({ labels: [...labels], fetchedAt: Date.now(), slot: 1 }),
    } as unknown as SubdomainCache;
    const listener = {
      onRefreshed: (h: typeof refreshed) => (refreshed = h),
      onLost: () => undefined,
      live: true,
    } as unknown as RefreshListener;
    const live = new LiveUpdates({
      cache,
      listener,
      maxPerClient: 10,
      maxStreams: 10,
      heartbeatMs: 20,
      maxBufferedBytes: 1000,
    });
    return { live, labels, refresh: () => refreshed('e', 'p') };
  };
  const sink = () => {
    const s = {
      written: [] as string[],
      writableLength: 0,
      destroyed: false,
      write(chunk: string) {
        s.written.push(chunk);
      },
      end() {},
      destroy() {
        s.destroyed = true;
      },
    };
    return s satisfies StreamSink;
  };

  it('drops a stream whose client does not read, and keeps the others', async () => {
    const { live } = hub();
    const slow = sink();
    const fast = sink();
    live.open('c', endpoint, 'p').start(['a', 'b'], () => slow);
    live.open('c', endpoint, 'p').start(['a', 'b'], () => fast);
    slow.writableLength = 5000;
    await waitFor(() => slow.destroyed && fast.written.length >= 3, 2_000);
    expect(live.size).toBe(1);
    const written = slow.written.length;
    // Time is the subject: nothing more reaches the dropped stream.
    await elapse(100);
    expect(slow.written.length).toBe(written);
    live.close();
  });

  it('reads once for many events and streams, and sends a change once per stream', async () => {
    const { live, labels, refresh } = hub();
    const sinks = [sink(), sink(), sink()];
    for (const s of sinks) live.open('c', endpoint, 'p').start(['a', 'b'], () => s);
    labels.push('c');
    refresh();
    refresh();
    refresh();
    await waitFor(() => sinks.every((s) => s.written.some((w) => w.includes('"c"'))), 2_000);
    // Time is the subject: no second copy of the change follows.
    await elapse(50);
    for (const s of sinks) {
      expect(s.written.filter((w) => w.startsWith('event:'))).toEqual([
        'event: subdomains\ndata: {"s":"ok","result":["a","b"]}\n\n',
        'event: subdomains\ndata: {"s":"ok","result":["a","b","c"]}\n\n',
      ]);
    }
    live.close();
  });
});
