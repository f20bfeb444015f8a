/** The simulator's HTTP plumbing: reading a request body as the real RPC does, answering. */
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Reads a POST body, or answers itself: GET /health 200 "ok" (as the real RPC), other methods
 * 405, non-JSON 415, over `maxBodyBytes` 413 (connection closed).
 */
export function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBodyBytes: number,
  onBody: (text: string) => void,
): void {
  if (req.method === 'GET' && req.url?.split('?')[0] === '/health') {
    send(res, 200, 'ok', { 'Content-Type': 'text/plain' });
    return;
  }
  if (req.method !== 'POST') {
    send(res, 405, 'Used HTTP Method is not allowed. POST is required', {
      'Content-Type': 'text/plain',
      Allow: 'POST',
    });
    req.resume();
    return;
  }
  const contentType = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (contentType !== 'application/json') {
    send(
      res,
      415,
      'Supplied content type is not allowed. Content-Type: application/json is required',
      {
        'Content-Type': 'text/plain',
      },
    );
    req.resume();
    return;
  }
  const tooLarge = (): void => {
    send(res, 413, 'Request body too large', { 'Content-Type': 'text/plain', Connection: 'close' });
    req.resume(); // drain what the client still sends; the socket closes after the answer
  };
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > maxBodyBytes) {
    tooLarge();
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let rejected = false;
  req.on('data', (chunk: Buffer) => {
    if (rejected) return;
    size += chunk.length;
    if (size > maxBodyBytes) {
      rejected = true;
      chunks.length = 0;
      tooLarge();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!rejected) onBody(Buffer.concat(chunks).toString('utf8'));
  });
  req.on('error', () => req.socket.destroy());
}

/** `application/json` for text that parses as JSON, else `text/plain`. */
export function contentTypeOf(text: string): string {
  try {
    JSON.parse(text);
    return 'application/json';
  } catch {
    return 'text/plain';
  }
}

/** Answers `status` with `text` unless an answer went already (or the socket is gone). */
export function send(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>>,
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
