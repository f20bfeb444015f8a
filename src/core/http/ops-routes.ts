import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { errorEnvelope } from '../errors.js';
import {
  component,
  errorEnvelopeSchema,
  errorResponse,
  ok,
  okEnvelope,
  refResponse,
  SHUTTING_DOWN,
  useSchemas,
} from './schemas.js';

/** The parts `/readyz` reports, each on its own (its body's `parts`). */
export type ReadinessParts = {
  /** Redis answers. */
  redis: boolean;
  /** Redis accepts writes (false while it refuses them, e.g. `OOM` at `maxmemory`). */
  redisWrites: boolean;
  /** `RPC_URL` set or not; when unset, a request without `?rpc=` answers 500. */
  rpc: 'configured' | 'unset';
  /**
   * Whether workers follow hot parents over the RPC's websocket (`RPC_WS_URL` resolved) or by the
   * clock (`off`). Whether a socket is open now is the workers' `sns_ws_connected`.
   */
  websocket: 'configured' | 'off';
  /**
   * The worker's only: it takes jobs (its Redis connections up, every BullMQ worker running, the
   * last fetch of each succeeded). Absent from the API's answer.
   */
  queue?: boolean;
};

/**
 * `ready`: the process can serve (Redis answers, no shutdown has begun). Refused writes show in
 * `parts.redisWrites` only: derivations and cached answers still work then.
 */
export type Readiness = { ready: boolean; parts: ReadinessParts };

export type OpsRouteDeps = {
  registry: Registry;
  /** Called on every `/readyz`: must be cheap (a Redis round trip at most). */
  readiness: () => Promise<Readiness>;
};

const partsSchema = Type.Object(
  {
    redis: Type.Boolean({ description: 'Redis answers' }),
    redisWrites: Type.Boolean({
      description: 'Redis accepts writes (false while it refuses them, e.g. OOM at maxmemory)',
    }),
    rpc: Type.Union([Type.Literal('configured'), Type.Literal('unset')], {
      description: 'RPC_URL set or not (unset: requests without ?rpc= answer 500)',
    }),
    websocket: Type.Union([Type.Literal('configured'), Type.Literal('off')], {
      description:
        'workers follow hot parents over the RPC websocket (configured) or by the clock (off)',
    }),
    queue: Type.Optional(
      Type.Boolean({
        description:
          'the worker only: it takes jobs (its Redis connections up, every BullMQ worker running, ' +
          'its last fetch succeeded)',
      }),
    ),
  },
  { description: 'each part the API depends on' },
);

/** `/healthz`'s answer. */
const liveness = okEnvelope('Liveness', Type.String(), 'The process answers.');

/** `/readyz`'s answer when ready. */
const readiness = okEnvelope('Readiness', Type.Literal('ready'), 'Ready, with each part.', {
  parts: partsSchema,
});

/** `/readyz`'s answer when not ready: the error envelope and, unless shutting down, `parts`. */
const notReady = component(
  'NotReady',
  Type.Object(
    {
      s: Type.Literal('error'),
      result: Type.String(),
      parts: Type.Optional(partsSchema),
    },
    { $id: 'NotReady', description: 'Not ready, with each part (none while shutting down).' },
  ),
);

/**
 * Liveness (`/healthz`: the process answers), readiness (`/readyz`: it can serve traffic; a load
 * balancer stops sending when it turns 503, e.g. during shutdown) and `/metrics` (Prometheus).
 */
export const opsRoutes: FastifyPluginAsyncTypebox<OpsRouteDeps> = async (app, deps) => {
  useSchemas(app, [errorEnvelopeSchema, liveness, readiness, notReady]);
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['ops'],
        summary: 'Liveness: the process answers (it needs neither Redis nor the RPC)',
        operationId: 'getLiveness',
        response: {
          200: refResponse(liveness, {
            description: 'Alive.',
            examples: [{ s: 'ok', result: 'live' }],
          }),
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
        summary: 'Readiness: Redis answers (the worker: and it takes jobs), no shutdown has begun',
        operationId: 'getReadiness',
        description:
          '200 when the process can serve, else 503 (a load balancer stops sending to it; compose ' +
          'health checks ask it). ' +
          '`parts` says which part is ready; `redisWrites: false` (Redis at its maxmemory) leaves ' +
          'it ready, since derivations and cached answers still work. Never cached ' +
          '(`Cache-Control: no-store`). A 503 during shutdown (`Shutting down`) has no `parts`.',
        response: {
          200: refResponse(readiness, {
            description: 'Ready: send it traffic.',
            examples: [
              {
                s: 'ok',
                result: 'ready',
                parts: { redis: true, redisWrites: true, rpc: 'configured', websocket: 'off' },
              },
            ],
          }),
          503: refResponse(notReady, {
            description:
              '`Not ready` (Redis does not answer; on the worker, also when it takes no jobs), or ' +
              '`Shutting down`: stop sending it traffic.',
            examples: [
              {
                s: 'error',
                result: 'Not ready',
                parts: { redis: false, redisWrites: false, rpc: 'configured', websocket: 'off' },
              },
            ],
          }),
        },
      },
    },
    async (_req, reply) => {
      reply.header('cache-control', 'no-store');
      const { ready, parts } = await deps.readiness();
      if (ready) return { ...ok('ready' as const), parts };
      return reply.code(503).send({ ...errorEnvelope('Not ready'), parts });
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['ops'],
        summary: 'Prometheus metrics of this process, in the text exposition format',
        operationId: 'getMetrics',
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
