import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { InternalError, InvalidInputError, ok } from '../../errors.js';
import { parseDerivationDomain } from '../../sns/names.js';
import { parseRecord, RECORD_ENUM } from '../../sns/records.js';
import type { RecordKeyDeriver } from '../../sns/record-key.js';
import { errorEnvelopeSchema } from '../schemas.js';

/**
 * `GET /record-key-v2/:domain/:record` (spec §4.1) and `GET /types/record` (§4.3). Pure CPU: no
 * Redis, no RPC, so both keep answering while Redis is down (DESIGN.md, "Shape").
 */
export const recordKeyRoutes: FastifyPluginAsyncTypebox<{ deriver: RecordKeyDeriver }> = async (
  app,
  { deriver },
) => {
  app.get(
    '/record-key-v2/:domain/:record',
    {
      schema: {
        tags: ['sns'],
        summary: 'The V2 record-account key of a domain and record type, derived offline',
        params: Type.Object({
          domain: Type.String({ description: 'One label or sub.parent, without .sol' }),
          record: Type.String({ description: 'Exactly one value of GET /types/record' }),
        }),
        response: {
          200: Type.Object({ s: Type.Literal('ok'), result: Type.String() }),
          '4xx': errorEnvelopeSchema,
          '5xx': errorEnvelopeSchema,
        },
      },
    },
    async (req, reply) => {
      const domain = parseDerivationDomain(req.params.domain);
      const record = parseRecord(req.params.record);
      try {
        const key = deriver.derive(domain, record);
        // A derivation never changes: caches may keep it for good.
        reply.header('cache-control', 'public, max-age=31536000, immutable');
        return ok(key);
      } catch (err) {
        if (err instanceof InvalidInputError) throw err;
        throw new InternalError('derivation failed', { cause: err });
      }
    },
  );

  app.get(
    '/types/record',
    {
      schema: {
        response: {
          200: Type.Object({
            s: Type.Literal('ok'),
            result: Type.Record(Type.String(), Type.String()),
          }),
        },
      },
    },
    async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=3600');
      return ok(RECORD_ENUM);
    },
  );
};
