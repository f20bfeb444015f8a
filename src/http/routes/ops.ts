import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { errorEnvelope, ok } from '../../errors.js';
import { errorEnvelopeSchema } from '../schemas.js';

export type OpsRouteDeps = {
  registry: Registry;
  /** True when the process can serve: Redis answers and no shutdown has begun. */
  isReady: () => Promise<boolean>;
};

/**
 * Liveness (`/healthz`: the process answers), readiness (`/readyz`: it can serve traffic; a load
 * balancer stops sending when it turns 503, e.g. during shutdown) and `/metrics` (Prometheus).
 */
export const opsRoutes: FastifyPluginAsyncTypebox<OpsRouteDeps> = async (app, deps) => {
  app.get(
    '/healthz',
    {
      schema: { response: { 200: Type.Object({ s: Type.Literal('ok'), result: Type.String() }) } },
    },
    async () => ok('live'),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['ops'],
        summary: 'Readiness: Redis answers and no shutdown has begun',
        response: {
          200: Type.Object({ s: Type.Literal('ok'), result: Type.String() }),
          503: errorEnvelopeSchema,
        },
      },
    },
    async (_req, reply) => {
      if (await deps.isReady()) return ok('ready');
      return reply.code(503).send(errorEnvelope('Not ready'));
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['ops'],
        summary: 'Prometheus text format',
        response: { 200: Type.String() },
      },
    },
    async (_req, reply) => {
      const text = await deps.registry.metrics();
      return reply.type(deps.registry.contentType).send(text);
    },
  );
};
