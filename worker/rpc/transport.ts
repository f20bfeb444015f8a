import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from 'request-filtering-agent';

/** One HTTP round trip's reply. */
export type HttpReply = { status: number; headers: http.IncomingHttpHeaders; body: Buffer };

/** The transport failed before a full reply. */
export class TransportError extends Error {
  override readonly name = 'TransportError';
  constructor(
    message: string,
    readonly kind: 'timeout' | 'network' | 'too_large',
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * Agents for the two trust levels: `trusted` (configured, allowlisted) reach any address;
 * `filtered` refuse private and metadata addresses at connect time, after DNS, so rebinding
 * cannot reach them. Keep-alive saves a TLS handshake per call.
 */
export class Agents {
  readonly trusted: { http: http.Agent; https: https.Agent };
  readonly filtered: { http: http.Agent; https: https.Agent };

  /** @param opts.lookup DNS for every connection (tests stage rebinding with a stub). */
  constructor(opts: { lookup?: LookupFunction } = {}) {
    const base = { keepAlive: true, ...(opts.lookup ? { lookup: opts.lookup } : {}) };
    this.trusted = { http: new http.Agent(base), https: new https.Agent(base) };
    this.filtered = {
      http: new RequestFilteringHttpAgent(base),
      https: new RequestFilteringHttpsAgent(base),
    };
  }

  pick(url: URL, trusted: boolean): http.Agent {
    const set = trusted ? this.trusted : this.filtered;
    return url.protocol === 'https:' ? set.https : set.http;
  }

  destroy(): void {
    for (const agent of [
      this.trusted.http,
      this.trusted.https,
      this.filtered.http,
      this.filtered.https,
    ]) {
      agent.destroy();
    }
  }
}

/** Replies declaring more bytes than this are read into one buffer (see {@link postJson}). */
const WHOLE_FROM_BYTES = 64 * 1024;

/**
 * POSTs JSON and reads the whole reply; no redirects. `timeoutMs` bounds connect, upload and
 * download; past `maxBytes` (declared or read) the socket closes.
 *
 * @throws TransportError (`timeout`, `network`, `too_large`); HTTP error statuses are returned.
 */
export function postJson(
  url: URL,
  body: string,
  opts: { agent: http.Agent; timeoutMs: number; maxBytes: number; signal?: AbortSignal },
): Promise<HttpReply> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<HttpReply>((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | null, reply?: HttpReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) {
        req.destroy();
        reject(err);
      } else resolve(reply as HttpReply);
    };
    const onAbort = () =>
      finish(new TransportError('aborted', 'network', { cause: opts.signal?.reason }));
    const timer = setTimeout(
      () => finish(new TransportError(`no reply within ${opts.timeoutMs} ms`, 'timeout')),
      opts.timeoutMs,
    );
    const req = transport.request(url, {
      method: 'POST',
      agent: opts.agent,
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        accept: 'application/json',
        'accept-encoding': 'identity',
      },
    });
    req.on('error', (err) => finish(new TransportError(err.message, 'network', { cause: err })));
    req.on('response', (res) => {
      const tooLarge = () => new TransportError(`reply over ${opts.maxBytes} bytes`, 'too_large');
      const declared = Number(res.headers['content-length']);
      const length = Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined;
      if (length !== undefined && length > opts.maxBytes) {
        finish(tooLarge());
        return;
      }
      // A declared length is read into one buffer of its own as the bytes come (transferred to the
      // decode thread as it is): gathering chunks and joining them held the body twice.
      const whole =
        length !== undefined && length > WHOLE_FROM_BYTES
          ? Buffer.allocUnsafeSlow(length)
          : undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBytes || (whole && size > whole.length)) {
          finish(tooLarge());
          return;
        }
        if (whole) chunk.copy(whole, size - chunk.length);
        else chunks.push(chunk);
      });
      res.on('error', (err) => finish(new TransportError(err.message, 'network', { cause: err })));
      res.on('aborted', () => finish(new TransportError('reply aborted', 'network')));
      res.on('end', () =>
        finish(null, {
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: whole ? whole.subarray(0, size) : Buffer.concat(chunks, size),
        }),
      );
    });
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    req.end(body);
  });
}
