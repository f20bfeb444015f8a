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
        params: Type.Object({ domain: Type.String(), record: Type.String() }),
        response: {
          200: Type.Object({ s: Type.Literal('ok'), result: Type.String() }),
          '4xx': errorEnvelopeSchema,
          '5xx': errorEnvelopeSchema,
        },
      },
    },
    async (req) => {
      const domain = parseDerivationDomain(req.params.domain);
      const record = parseRecord(req.params.record);
      try {
        return ok(deriver.derive(domain, record));
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
    async () => ok(RECORD_ENUM),
  );
};
