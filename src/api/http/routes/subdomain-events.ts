import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EndpointSelector } from '../../../core/rpc/endpoint.js';
import { parseParentLabel } from '../../sns/names.js';
import { listFrame, type LiveUpdates, type StreamSink } from '../../subdomains/live-updates.js';
import type { SubdomainLookup } from '../../subdomains/lookup.js';
import { CORS_HEADERS } from '../../../core/http/cors.js';
import { requesterOf } from '../cold-miss.js';
import { parentParams, refreshingRouteInternal, rpcQueryProperty } from '../subdomain-schemas.js';
import {
  errorEnvelopeSchema,
  errorResponse,
  HEADER,
  SHUTTING_DOWN,
  useSchemas,
} from '../../../core/http/schemas.js';
import { ROUTE } from './paths.js';

/** What the event-stream route needs. */
export type SubdomainEventsDeps = {
  endpoints: EndpointSelector;
  lookup: SubdomainLookup;
  live: LiveUpdates;
};

/** A stream with more unsent is cut at shutdown: a non-reading client would hold close() open. */
const END_CUT_BYTES = 64 * 1024;

const STREAM_HEADERS = Object.freeze({
  ...CORS_HEADERS,
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  // nginx buffers a proxied answer unless told not to; events would arrive in bursts.
  'x-accel-buffering': 'no',
  // The connection ends with the stream, so shutdown never waits on a kept-alive socket.
  connection: 'close',
});

const querystring = Type.Object(rpcQueryProperty);

const FRAME_EXAMPLE = listFrame(['bullish', 'hollaaa', 'testing']) + ': ping\n\n';

/**
 * `GET /subdomains/:parent/events[?rpc=URL]` (docs/design.md, "Live updates"): Server-Sent
 * Events, first the list as `GET /subdomains/:parent` answers it (errors as usual until then),
 * then {@link LiveUpdates}' changes and heartbeats.
 */
export const subdomainEventRoutes: FastifyPluginAsyncTypebox<SubdomainEventsDeps> = async (
  app,
  deps,
) => {
  // The list route's cold-miss limit (one store, one key per client).
  const checkColdMiss = app.createRateLimit();
  useSchemas(app, [errorEnvelopeSchema]);
  // Open streams would hold close() until its time-out.
  app.addHook('preClose', async () => deps.live.close());

  app.get(
    ROUTE.subdomainEvents,
    {
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary:
          'Live updates of the subdomain labels of a top-level .sol name (Server-Sent Events)',
        operationId: 'getSubdomainEvents',
        description:
          'A `text/event-stream`. The first event, `subdomains`, holds in `data` the answer of ' +
          '`GET /subdomains/{parent}` (`{"s":"ok","result":[...]}`); another such event follows ' +
          'each time the list changes, within 2 s of the gateway learning of it from the worker ' +
          '(no RPC call of its own). A comment `: ping` every 15 s. At most SSE_MAX_PER_CLIENT ' +
          'streams per client address and SSE_MAX_STREAMS per instance. The stream ends when ' +
          'the instance shuts down: reconnect (EventSource does by itself).',
        params: parentParams,
        querystring,
        response: {
          200: {
            description:
              'The event stream: `event: subdomains` frames whose `data` is the success ' +
              'envelope of the list, and `: ping` comments.',
            headers: {
              'Cache-Control': { type: 'string', description: '`no-store`.' },
            },
            content: {
              'text/event-stream': {
                schema: Type.String(),
                // On the media object: @fastify/swagger copies a `content` response as it is.
                example: FRAME_EXAMPLE,
              },
            },
          },
          400: errorResponse(
            '`Invalid input`: a parent that is not exactly one non-empty label, or a refused `?rpc=`.',
            'Invalid input',
          ),
          429: errorResponse(
            '`Too many requests`: this client holds SSE_MAX_PER_CLIENT streams already, or ' +
              'started more than COLD_MISS_LIMIT new refreshes in COLD_MISS_WINDOW_SECONDS.',
            'Too many requests',
            { 'Retry-After': HEADER.retryAfter },
          ),
          500: refreshingRouteInternal(),
          502: errorResponse(
            '`RPC unavailable`: the first list of a cold parent could not be fetched (as for ' +
              '`GET /subdomains/{parent}`).',
            'RPC unavailable',
          ),
          503: errorResponse(
            '`Service overloaded`: this instance holds SSE_MAX_STREAMS streams, or the refresh ' +
              `queue is full for a cold parent. Or ${SHUTTING_DOWN}`,
            'Service overloaded',
            { 'Retry-After': HEADER.retryAfter },
          ),
        },
      },
    },
    async (req, reply) => {
      const parent = parseParentLabel(req.params.parent);
      const requester = requesterOf(req, checkColdMiss);
      const endpoint = await deps.endpoints.select(req.query.rpc, requester.charge);
      const pending = deps.live.open(requester.client, endpoint, parent);
      let result;
      try {
        result = await deps.lookup.lookup(parent, endpoint, requester);
      } catch (err) {
        pending.close();
        throw err;
      }
      const res = reply.raw;
      if (res.destroyed || req.raw.socket.destroyed) {
        pending.close();
        return reply.hijack();
      }
      // Throws ShuttingDownError (503) if shutdown began during the lookup, before any write.
      pending.start(result.entry.labels, (): StreamSink => {
        reply.hijack();
        res.writeHead(200, STREAM_HEADERS);
        return {
          write: (chunk) => res.write(chunk),
          get writableLength() {
            return res.writableLength;
          },
          end: () => {
            if (res.writableLength > END_CUT_BYTES) res.destroy();
            else res.end();
          },
          destroy: () => res.destroy(),
        };
      });
      res.once('close', () => pending.close());
      return reply;
    },
  );
};
