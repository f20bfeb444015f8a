import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/**
 * The worker's own `/metrics` (and `/healthz`) on `WORKER_METRICS_PORT`, for Prometheus. A plain
 * node:http server: the worker has no other HTTP surface.
 *
 * @returns the server, listening, and the port it got (useful with port 0 in tests).
 */
export async function startMetricsServer(
  registry: Registry,
  port: number,
  host: string,
): Promise<{ server: http.Server; port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () =>
          res
            .writeHead(500, { 'content-type': 'application/json' })
            .end('{"s":"error","result":"Internal error"}'),
      );
    } else if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"s":"ok","result":"live"}');
    } else {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end('{"s":"error","result":"Not found"}');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
