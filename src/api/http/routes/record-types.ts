import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { RECORD_ENUM } from '../../sns/records.js';
import {
  errorEnvelopeSchema,
  errorResponse,
  HEADER,
  notModifiedResponse,
  ok,
  okEnvelope,
  refResponse,
  SHUTTING_DOWN,
  useSchemas,
} from '../../../core/http/schemas.js';
import { ROUTE } from './paths.js';

/** Enum name -> value. */
const recordTypes = okEnvelope(
  'RecordTypes',
  Type.Record(Type.String(), Type.String()),
  "The SDK's Record enum, name -> value.",
);

/** `GET /types/record`: the SDK's `Record` enum; constant, no Redis, no RPC. */
export const recordTypesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  useSchemas(app, [errorEnvelopeSchema, recordTypes]);
  app.get(
    ROUTE.recordTypes,
    {
      schema: {
        tags: ['sns'],
        summary: "The SDK's Record enum: name -> value; the values go in /record-key-v2's path",
        operationId: 'getRecordTypes',
        response: {
          200: refResponse(recordTypes, {
            description:
              'Every record type of @bonfida/spl-name-service, enum name to value. The value ' +
              '(`SOL`, `email`, `IPFS`) is what /record-key-v2 takes, not the name (`Email`).',
            examples: [ok(RECORD_ENUM)],
            headers: { 'Cache-Control': HEADER.typesCacheControl, ETag: HEADER.etag },
          }),
          304: notModifiedResponse,
          503: errorResponse(SHUTTING_DOWN, 'Shutting down'),
        },
      },
    },
    async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=3600');
      return ok(RECORD_ENUM);
    },
  );
};
