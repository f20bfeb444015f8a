import { createSocket, type Socket } from 'node:dgram';

/** A loopback DNS server (UDP) for tests of the `?rpc=` host check. */
export type DnsServer = {
  /** `127.0.0.1:<port>`, for `dnsResolver({ servers: [...] })`. */
  readonly address: string;
  /** The names asked, with their type (`A`, `AAAA`, ...), in order of arrival. */
  readonly queries: { name: string; type: string }[];
  close(): Promise<void>;
};

const TYPES: Record<number, string> = { 1: 'A', 28: 'AAAA' };

/** The question of a query (RFC 1035 §4.1.2): its name, type, and where it ends. */
function question(msg: Buffer): { name: string; type: string; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (let len = msg[at] ?? 0; len > 0; len = msg[at] ?? 0) {
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'));
    at += 1 + len;
  }
  const code = msg.readUInt16BE(at + 1);
  return { name: labels.join('.').toLowerCase(), type: TYPES[code] ?? String(code), end: at + 5 };
}

/**
 * Starts a DNS server on 127.0.0.1. With `answers`, an A query for a listed name gets its IPv4
 * address, AAAA queries get no records (NODATA), and unlisted names NXDOMAIN. With `'silent'`,
 * queries are swallowed: a server that never answers.
 */
export async function startDnsServer(
  answers: Record<string, string> | 'silent',
): Promise<DnsServer> {
  const socket: Socket = createSocket('udp4');
  const queries: DnsServer['queries'] = [];
  socket.on('message', (msg, peer) => {
    const q = question(msg);
    queries.push({ name: q.name, type: q.type });
    if (answers === 'silent') return;
    const address = answers[q.name];
    const withAnswer = address !== undefined && q.type === 'A';
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0); // the query's id
    // A response, recursion desired and available; NXDOMAIN for an unknown name.
    header.writeUInt16BE(0x8180 | (address === undefined ? 3 : 0), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(withAnswer ? 1 : 0, 6);
    const parts = [header, msg.subarray(12, q.end)];
    if (withAnswer) {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(1, 2); // A
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6); // TTL
      rr.writeUInt16BE(4, 10);
      address.split('.').forEach((octet, i) => rr.writeUInt8(Number(octet), 12 + i));
      parts.push(rr);
    }
    socket.send(Buffer.concat(parts), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
