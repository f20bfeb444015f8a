import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * At `preClose`, destroys connections that never sent a byte (spare ones browsers and load
 * balancers open): neither idle nor in flight, they would hold `app.close()` forever. Uses the
 * socket's byte count: a `'data'` listener takes the socket off Node's native parser
 * (BENCHMARKS.md, "Costs the code's comments refer to"). fastify-plugin: applies server-wide.
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
