import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { errorEnvelope, ok } from '../../errors.js';
import { errorResponse, SHUTTING_DOWN } from '../schemas.js';

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
      schema: {
        tags: ['ops'],
        summary: 'Liveness: the process answers (it needs neither Redis nor the RPC)',
        response: {
          200: Type.Object(
            { s: Type.Literal('ok'), result: Type.String() },
            { description: 'Alive.', examples: [{ s: 'ok', result: 'live' }] },
          ),
          503: errorResponse(SHUTTING_DOWN, 'Shutting down'),
        },
      },
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
          200: Type.Object(
            { s: Type.Literal('ok'), result: Type.String() },
            { description: 'Ready: send it traffic.', examples: [{ s: 'ok', result: 'ready' }] },
          ),
          503: errorResponse(
            '`Not ready` (Redis does not answer), or `Shutting down`: stop sending it traffic.',
            'Not ready',
          ),
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
        summary: 'Prometheus metrics of this process, in the text exposition format',
        produces: ['text/plain'],
        response: {
          200: Type.String({
            description:
              'Counters, histograms and gauges of HTTP, the cache, the queue and the RPC ' +
              '(docs/observability.md).',
            examples: [
              '# HELP sns_cache_lookups_total Subdomain cache lookups by result.\n' +
                '# TYPE sns_cache_lookups_total counter\n' +
                'sns_cache_lookups_total{result="hit"} 42\n',
            ],
          }),
          503: errorResponse(SHUTTING_DOWN, 'Shutting down'),
        },
      },
    },
    async (_req, reply) => {
      const text = await deps.registry.metrics();
      return reply.type(deps.registry.contentType).send(text);
    },
  );
};
