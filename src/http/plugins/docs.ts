import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * OpenAPI 3 generated from the route schemas (@fastify/swagger), served at `/openapi.json`, with
 * a docs page at `/docs` (@fastify/swagger-ui). Registered before the routes so it sees them all.
 */
export const docsPlugin = fp(async (app: FastifyInstance) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'sns-gateway',
        version: '0.1.0',
        description:
          'Caching gateway for Solana Name Service lookups: V2 record-key derivation and subdomain lists. ' +
          'Every answer is `{ s: "ok", result }` or `{ s: "error", result: "<short text>" }`.',
      },
      tags: [
        { name: 'sns', description: 'Name lookups' },
        { name: 'ops', description: 'Health, readiness and metrics' },
      ],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
});
