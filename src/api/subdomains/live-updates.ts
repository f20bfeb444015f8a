import type { CacheEntry, SubdomainCache } from '../../core/cache/subdomain-cache.js';
import { OverloadedError, RateLimitedError, ShuttingDownError } from '../../core/errors.js';
import { waitKey, type RefreshListener } from '../../core/queue/refresh-events.js';
import type { RpcEndpoint } from '../../core/rpc/endpoint.js';
import type { HotParentCounter } from '../../core/cache/hot-parents.js';
import { parentIdOf, REGISTRY_EVENTS } from '../../core/cache/registry-index.js';
import { domainKey, toBase58 } from '../../core/sns/pda.js';
import type { RegistrySource } from './registry-source.js';

/** Where a stream's bytes go: a `ServerResponse` whose headers are sent. */
export type StreamSink = {
  write(chunk: string): unknown;
  /** Bytes written but not yet taken by the client (the response's and its socket's buffers). */
  readonly writableLength: number;
  end(): unknown;
  destroy(): unknown;
};

export type LiveUpdatesOptions = {
  cache: SubdomainCache;
  /** The refresh events every API process already listens to: how a change is learnt of. */
  listener: RefreshListener;
  /**
   * Open streams count their client here at every heartbeat (once per window, as a request does),
   * so the worker follows a parent that enough clients watch.
   */
  hotParents?: HotParentCounter;
  /**
   * Records a use of a watched parent's entry at every heartbeat (throttled by the caller), so a
   * parent only watched stays cached and followed on the chain.
   */
  touch?: (parent: string) => void;
  /** Streams one client address may hold open (`SSE_MAX_PER_CLIENT`). */
  maxPerClient: number;
  /** Streams this process holds open (`SSE_MAX_STREAMS`). */
  maxStreams: number;
  /**
   * The registry index (`SUBDOMAIN_INDEX=registry`): while it answers (it serves, or the stream
   * heals a gap: `RegistrySource.answers`), the configured endpoint's lists are read from it, and
   * its change events (parent ids) reach the parents' streams.
   */
  registry?: RegistrySource;
  /** Milliseconds between heartbeat comments (15 s; tests shorten it). */
  heartbeatMs?: number;
  /**
   * Bytes a stream may hold unsent before a write; past it the client is not reading and the
   * stream is dropped, so a stalled client holds at most this plus one event.
   */
  maxBufferedBytes?: number;
};

/** The SSE event that carries a list: its name (`event:`) in every frame. */
const LIST_EVENT = 'subdomains';
/** How often an open stream gets a `: ping` comment, in ms (keeps proxies from closing it). */
export const HEARTBEAT_MS = 15_000;
const MAX_BUFFERED_BYTES = 1024 * 1024;
const PING = ': ping\n\n';

/** One frame of the list event: `data:` holds the success envelope, one line (JSON escapes `\n`). */
export const listFrame = (labels: readonly string[]): string =>
  `event: ${LIST_EVENT}\ndata: ${JSON.stringify({ s: 'ok', result: labels })}\n\n`;

const sameLabels = (a: readonly string[], b: readonly string[]) =>
  a === b || (a.length === b.length && a.every((label, i) => label === b[i]));

type Stream = {
  client: string;
  topic: Topic;
  /** Null until the first event is sent: the stream receives nothing before. */
  sink: StreamSink | null;
  /** The labels this stream last sent. */
  sent: readonly string[];
  done: boolean;
};

/** The streams of one (endpoint, parent), and the one read of its entry they share. */
type Topic = {
  key: string;
  endpoint: RpcEndpoint;
  parent: string;
  /** The parent's id in the registry index (configured endpoint only, with an index). */
  registryId?: string;
  streams: Set<Stream>;
  /** The last labels read, and their frame: rendered once for every stream. */
  current: { labels: readonly string[]; frame: string } | undefined;
  reading: boolean;
  /** An event came while a read was under way: read once more after it. */
  again: boolean;
  /** Refresh events seen, so a stream opened before its first event can tell it missed one. */
  events: number;
  /** The subscription dropped since the last read: events may have been lost. */
  missed: boolean;
};

/** A stream admitted but not started: its first event is still being looked up. */
export type PendingStream = {
  /**
   * Sends the first event (`labels`, from the same lookup as `GET /subdomains/:parent`) and
   * starts delivering changes.
   *
   * @param begin sends the response's headers and returns where the stream's bytes go; called
   *   once admitted, before the first event.
   * @throws ShuttingDownError when shutdown began during the lookup (`begin` is not called).
   */
  start(labels: readonly string[], begin: () => StreamSink): void;
  /** Ends the stream (the client went away, or the lookup failed) and frees its slots. */
  close(): void;
};

/**
 * Server-Sent Events of subdomain lists (docs/design.md, "Live updates"): a stream never reads the
 * RPC; it learns of changes from the refresh events, one entry read serves every stream of its
 * (endpoint, parent), and heartbeats count the parent as requested so the worker keeps following
 * it. Bounded per client, per process, in unsent bytes, and one timer for all streams.
 */
export class LiveUpdates {
  private readonly topics = new Map<string, Topic>();
  private readonly perClient = new Map<string, number>();
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly heartbeatMs: number;
  private readonly maxBuffered: number;

  constructor(private readonly opts: LiveUpdatesOptions) {
    this.heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
    this.maxBuffered = opts.maxBufferedBytes ?? MAX_BUFFERED_BYTES;
    opts.listener.onRefreshed((endpointId, parent) => {
      if (endpointId === REGISTRY_EVENTS) {
        // The index changed the parent whose id is `parent`: its streams read it again.
        for (const topic of this.topics.values()) {
          if (topic.registryId !== parent) continue;
          topic.events++;
          this.read(topic);
        }
        return;
      }
      const topic = this.topics.get(`${endpointId} ${parent}`);
      if (!topic) return;
      topic.events++;
      this.read(topic);
    });
    opts.listener.onLost(() => {
      for (const topic of this.topics.values()) topic.missed = true;
    });
  }

  /** Streams open (or admitted and waiting for their first event). */
  get size(): number {
    return this.count;
  }

  /**
   * Admits a stream of (`endpoint`, `parent`) for `client` and starts listening for its changes,
   * before the caller looks the first list up, so a change during that lookup is not lost.
   *
   * @param client the client's key, as the per-client cold-miss limit takes it (`req.client`: an
   *   IPv4 address, or an IPv6 /64).
   * @throws RateLimitedError past `maxPerClient` streams of `client`.
   * @throws OverloadedError past `maxStreams` streams in all.
   * @throws ShuttingDownError once {@link close} has run.
   */
  open(client: string, endpoint: RpcEndpoint, parent: string): PendingStream {
    if (this.closed) throw new ShuttingDownError('live updates closed', 1);
    const held = this.perClient.get(client) ?? 0;
    if (held >= this.opts.maxPerClient) {
      throw new RateLimitedError(`client holds ${held} streams`, 5, {
        reason: 'stream_limit',
        detail: `at most ${this.opts.maxPerClient} open event streams per client (SSE_MAX_PER_CLIENT): close one first`,
      });
    }
    if (this.count >= this.opts.maxStreams) {
      throw new OverloadedError(`${this.count} streams open`, 5, {
        detail: 'this instance holds as many event streams as it may: retry later',
      });
    }
    this.perClient.set(client, held + 1);
    this.count++;
    const key = waitKey(endpoint.id, parent);
    let topic = this.topics.get(key);
    if (!topic) {
      topic = {
        key,
        endpoint,
        parent,
        streams: new Set(),
        current: undefined,
        reading: false,
        again: false,
        events: 0,
        missed: false,
        ...(this.opts.registry && endpoint.kind === 'default'
          ? { registryId: parentIdOf(toBase58(domainKey(parent))) }
          : {}),
      };
      this.topics.set(key, topic);
    }
    const stream: Stream = { client, topic, sink: null, sent: [], done: false };
    topic.streams.add(stream);
    const eventsBefore = topic.events;
    this.timer ??= setInterval(() => this.heartbeat(), this.heartbeatMs).unref();
    return {
      start: (labels, begin) => {
        if (stream.done || this.closed) {
          this.finish(stream);
          throw new ShuttingDownError('live updates closed', 1);
        }
        stream.sink = begin();
        stream.sent = labels;
        this.send(stream, listFrame(labels));
        // A change written while the first list was looked up: that lookup may predate it.
        if (topic.events !== eventsBefore) this.read(topic);
      },
      close: () => this.finish(stream),
    };
  }

  /**
   * Ends every stream (the response ends, and its connection with it, so the server's close is
   * not held up) and refuses new ones. Called when the HTTP server begins to close.
   */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const topic of [...this.topics.values()]) {
      for (const stream of [...topic.streams]) {
        const sink = stream.sink;
        this.finish(stream);
        sink?.end();
      }
    }
  }

  /** Reads the topic's entry, once however many events come meanwhile, then delivers it. */
  private read(topic: Topic): void {
    if (topic.reading) {
      topic.again = true;
      return;
    }
    topic.reading = true;
    topic.missed = false;
    const { cache, registry } = this.opts;
    const fromIndex =
      topic.registryId !== undefined && registry !== undefined && registry.answers() !== undefined;
    (fromIndex
      ? registry.read(topic.parent).then((r) => r.entry)
      : cache.get(cache.keyOf(topic.endpoint, topic.parent))
    )
      .then(
        (entry) => this.deliver(topic, entry),
        // Redis fault: the streams keep what they have; the next event or a lost-event
        // heartbeat reads again.
        () => {
          topic.missed = true;
        },
      )
      .finally(() => {
        topic.reading = false;
        if (topic.again && this.topics.get(topic.key) === topic) {
          topic.again = false;
          this.read(topic);
        }
      });
  }

  private deliver(topic: Topic, entry: CacheEntry | null): void {
    // Gone (expired, evicted): nothing to tell; a refresh will write it again.
    if (!entry) return;
    if (!topic.current || !sameLabels(topic.current.labels, entry.labels)) {
      topic.current = { labels: entry.labels, frame: listFrame(entry.labels) };
    }
    const { labels, frame } = topic.current;
    for (const stream of [...topic.streams]) {
      if (!stream.sink || stream.sent === labels) continue;
      const changed = !sameLabels(stream.sent, labels);
      stream.sent = labels;
      if (changed) this.send(stream, frame);
    }
  }

  private heartbeat(): void {
    for (const topic of [...this.topics.values()]) {
      if (topic.missed && this.opts.listener.live) this.read(topic);
      for (const stream of [...topic.streams]) {
        if (!stream.sink) continue;
        if (topic.endpoint.kind === 'default') {
          this.opts.hotParents?.hit(topic.parent, stream.client);
          this.opts.touch?.(topic.parent);
        }
        this.send(stream, PING);
      }
    }
  }

  /** Writes `chunk`, unless the client left that many bytes unread: then the stream is dropped. */
  private send(stream: Stream, chunk: string): void {
    const sink = stream.sink;
    if (!sink || stream.done) return;
    if (sink.writableLength > this.maxBuffered) {
      this.finish(stream);
      sink.destroy();
      return;
    }
    sink.write(chunk);
  }

  /** Frees the stream's slots; idempotent. */
  private finish(stream: Stream): void {
    if (stream.done) return;
    stream.done = true;
    const { topic, client } = stream;
    topic.streams.delete(stream);
    if (topic.streams.size === 0 && this.topics.get(topic.key) === topic) {
      this.topics.delete(topic.key);
    }
    const held = (this.perClient.get(client) ?? 1) - 1;
    if (held > 0) this.perClient.set(client, held);
    else this.perClient.delete(client);
    this.count--;
    if (this.count === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
