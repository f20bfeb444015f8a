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

/** `/readyz`'s `parts`. */
export type ReadinessParts = {
  /** Redis answers. */
  redis: boolean;
  /** False while Redis refuses writes (`OOM` at `maxmemory`). */
  redisWrites: boolean;
  /** Unset: a request without `?rpc=` answers 500. */
  rpc: 'configured' | 'unset';
  /** Workers follow hot parents over the websocket, or by the clock (`off`). */
  websocket: 'configured' | 'off';
  /** Worker only: it takes jobs (Redis up, every BullMQ worker running, last fetch ok). */
  queue?: boolean;
  /**
   * The API only, with `SUBDOMAIN_INDEX=registry`: the registry index's state (`serving`: every
   * parent is answered from it; otherwise the per-parent path answers). Never makes it unready.
   */
  index?: 'none' | 'building' | 'serving' | 'unfollowed' | 'behind';
  /**
   * Whether hot parents are refreshed ahead (src/core/queue/hot-parent-scans.ts): `stopped` when
   * their scheduler is missing or no worker runs it; `off` when not configured.
   */
  refreshAhead?: 'running' | 'stopped' | 'off';
};

/** `ready`: Redis answers, no shutdown began; refused writes leave it ready (derivations work). */
export type Readiness = { ready: boolean; parts: ReadinessParts };

/** What the ops routes need. */
export type OpsRouteDeps = {
  registry: Registry;
  /** Called on every `/readyz`: a Redis round trip at most. */
  readiness: () => Promise<Readiness>;
  /**
   * Serve `/metrics` (default): not on the API's public port, where the budget and spend figures
   * would tell an attacker how it goes (docs/observability.md, "Where the metrics are").
   */
  metrics?: boolean;
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
    index: Type.Optional(
      Type.Union(
        [
          Type.Literal('none'),
          Type.Literal('building'),
          Type.Literal('serving'),
          Type.Literal('unfollowed'),
          Type.Literal('behind'),
        ],
        {
          description:
            'SUBDOMAIN_INDEX=registry only: the registry index serves every parent (serving), is ' +
            'built (building), built but the stream is not followed whole now (unfollowed), or ' +
            'missed changes and is rebuilt (behind); the per-parent path answers meanwhile',
        },
      ),
    ),
    queue: Type.Optional(
      Type.Boolean({
        description:
          'the worker only: it takes jobs (its Redis connections up, every BullMQ worker running, ' +
          'its last fetch succeeded)',
      }),
    ),
    refreshAhead: Type.Optional(
      Type.Union([Type.Literal('running'), Type.Literal('stopped'), Type.Literal('off')], {
        description:
          'hot parents refreshed ahead: running, stopped (the scans are not scheduled, e.g. ' +
          'after Redis lost its data, or no worker runs them; the worker is then not ready), or ' +
          'off (HOT_KEYS_TOP_N=0 or no RPC_URL)',
      }),
    ),
  },
  { description: 'each part the API depends on' },
);

const liveness = okEnvelope('Liveness', Type.String(), 'The process answers.');

const readiness = okEnvelope('Readiness', Type.Literal('ready'), 'Ready, with each part.', {
  parts: partsSchema,
});

/** Not ready: the envelope and, unless shutting down, `parts`. */
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

/** The ops routes' paths (the API's public ones are `ROUTE`, src/api/http/routes/paths.ts). */
export const OPS_ROUTE = Object.freeze({
  healthz: '/healthz',
  readyz: '/readyz',
  metrics: '/metrics',
});

/** `/healthz`, `/readyz` (503 turns a load balancer away, e.g. in shutdown) and `/metrics`. */
export const opsRoutes: FastifyPluginAsyncTypebox<OpsRouteDeps> = async (app, deps) => {
  useSchemas(app, [errorEnvelopeSchema, liveness, readiness, notReady]);
  app.get(
    OPS_ROUTE.healthz,
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
    OPS_ROUTE.readyz,
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

  if (deps.metrics === false) return;
  app.get(
    OPS_ROUTE.metrics,
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
