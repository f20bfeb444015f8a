import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** OpenAPI 3 at `/openapi.json` and `/docs`; registered before the routes so it sees them all. */
export const docsPlugin = fp(async (app: FastifyInstance) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'sns-gateway',
        version: '0.1.0',
        description:
          'Caching gateway for Solana Name Service lookups: V2 record-key derivation and subdomain lists. ' +
          'Every answer is `{ s: "ok", result }` or `{ s: "error", result: "<short text>" }`.\n\n' +
          'Derivations and subdomain lists are those of the root name account ' +
          '`58PwtjSDuFHuUkYjH9BYnnQKHfwo9reZhC2zMJv9JPkx` of the SPL Name Service program: the `.sol` ' +
          'TLD of @bonfida/spl-name-service 3, called the `.sns` TLD from version 4 on (the keys are ' +
          'the same for the same bare name). Names issued through SRS, the registry SDK 4 uses for new ' +
          '`.sol` names, are not covered.\n\n' +
          'Names are given without the suffix: `bonfida`, not `bonfida.sol`. A name typed with its ' +
          'suffix is read as the contract says, as labels: `bonfida.sol` is the subdomain `bonfida` of ' +
          'the top-level name `sol`.\n\n' +
          'Every route may also answer 404 `Not found` (an unknown path, e.g. a missing segment), 431 ' +
          '(URL or headers over 16 KiB) and 503 `Shutting down` (the process is draining). An error ' +
          'may carry `detail`, what was wrong and what is accepted. Caching: every answer has a strong ' +
          '`ETag` (If-None-Match gets 304); each route says its `Cache-Control`, and /subdomains adds ' +
          '`Age` and `X-Cache`. Not in this document: `/` (the try-it page), `/docs` (this page), ' +
          '`/openapi.json` (this document) and `/admin/queues` (the queue UI, only with ADMIN_TOKEN).',
      },
      tags: [
        { name: 'sns', description: 'Name lookups' },
        { name: 'ops', description: 'Health, readiness and metrics' },
      ],
    },
    // Components by $id, so generated clients get `SubdomainList`, not `def-0`.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
});
