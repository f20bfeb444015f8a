/**
 * A loopback JSON-RPC server that answers as a hostile `?rpc=` target would, one attack per path
 * (`/junk`, `/deep`, ...): what a hostile review of the gateway sent. Used by
 * test/hostile-overrides.test.ts and `npm run bench:hostile`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';

const MiB = 1024 * 1024;

/** Peak resident memory of a process so far (`VmHWM` of /proc), in bytes. */
export function peakRss(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) * 1024;
}

/** A JSON-RPC reply whose `result` is `result` (raw JSON text). */
const rpcReply = (id: unknown, result: string) =>
  `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}`;

/** Replies by path; each is an attack seen in a hostile review. */
const ATTACKS: Record<string, (res: http.ServerResponse, id: unknown) => void> = {
  // Millions of tiny arrays within the reply bound: cheap to send, expensive to parse.
  junk: (res, id) => res.end(rpcReply(id, `[${'[],'.repeat(2 * MiB)}[]]`)),
  // Objects of one distinct key each, as many as the value bound lets through, padded with a
  // long string to 8 MiB: the most heap a body within the bounds can cost to parse.
  dense: (res, id) => {
    const objects: string[] = [];
    for (let i = 0, bytes = 0; bytes < 3.9 * MiB; i++) {
      const object = `{"${i.toString(36)}":0.5}`;
      objects.push(object);
      bytes += object.length + 1;
    }
    const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":[${objects.join(',')}],"pad":"`;
    res.end(`${head}${'x'.repeat(8 * MiB - head.length - 64)}"}`);
  },
  // Nesting as deep as the bytes allow.
  deep: (res, id) => res.end(rpcReply(id, `${'['.repeat(MiB)}${']'.repeat(MiB)}`)),
  // Larger than any override reply may be, sent as fast as the socket takes it.
  huge: (res, id) => {
    res.write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":[`);
    const chunk = Buffer.from('{"pubkey":"x","account":{"data":["","base64"]}},'.repeat(20_000));
    let sent = 0;
    const pump = () => {
      while (sent < 200 * MiB) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end('0]}');
    };
    pump();
  },
  // A byte now and then, never the end.
  endless: (res) => {
    res.write('{"jsonrpc":"2.0","result":[');
    const timer = setInterval(() => res.write(' '), 200);
    res.once('close', () => clearInterval(timer));
  },
  // Accounts that are not accounts.
  malformed: (res, id) =>
    res.end(rpcReply(id, '{"context":{"slot":1},"value":[null,{"account":{"data":7}},[[1]]]}')),
  // "Come back in 30 s", forever.
  wait: (res) =>
    res
      .writeHead(429, { 'retry-after': '30', 'content-type': 'application/json' })
      .end('{"jsonrpc":"2.0","error":{"code":429,"message":"slow down"}}'),
};

/** The attacks, by the path that serves each. */
export const ATTACK_NAMES = Object.keys(ATTACKS);

export type HostileRpc = {
  readonly url: string;
  /** Requests received so far for `attack` (its path), answered or not yet. */
  received(attack: string): number;
  close(): Promise<void>;
};

/** Starts the hostile server on an ephemeral loopback port. */
export async function startHostileRpc(): Promise<HostileRpc> {
  const received = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').slice(1);
    received.set(path, (received.get(path) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let id: unknown = 1;
      try {
        id = (JSON.parse(Buffer.concat(chunks).toString()) as { id?: unknown }).id;
      } catch {
        // answer anyway
      }
      const attack = ATTACKS[path];
      if (!attack) return void res.writeHead(404).end();
      res.statusCode = 200;
      res.setHeader('content-type', 'application/json');
      attack(res, id);
    });
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: (attack) => received.get(attack) ?? 0,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
