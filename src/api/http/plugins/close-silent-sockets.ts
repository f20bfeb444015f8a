import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Destroys, when closing begins (`preClose`), every connection that has not sent a byte yet.
 * Browsers and load balancers open such spare connections; they are neither idle keep-alives
 * (which `server.close()` ends) nor in flight, so `app.close()` would wait for them forever.
 *
 * Tells them apart by the byte count every socket keeps anyway: a `'data'` listener would take
 * the socket off Node's native HTTP parsing and slow every request (BENCHMARKS.md, "Costs the
 * code's comments refer to").
 * Wrapped with fastify-plugin, so its hook applies to the whole server.
 */
export const closeSilentSockets = fp(
  async (app: FastifyInstance) => {
    const sockets = new Set<Socket>();
    app.server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    app.addHook('preClose', async () => {
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    });
  },
  { name: 'close-silent-sockets' },
);
