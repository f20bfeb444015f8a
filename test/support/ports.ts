import { createServer } from 'node:net';

/**
 * A loopback TCP port nothing listened on a moment ago: for child processes (nginx, Prometheus,
 * redis-server, the entry file) that cannot be told to pick one and report it.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
