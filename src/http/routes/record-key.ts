import type { Record } from '@bonfida/spl-name-service';
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { AdmittedLru } from '../../cache/admitted-lru.js';
import { InternalError } from '../../errors.js';
import { parseDerivationDomain } from '../../sns/names.js';
import { parseRecord } from '../../sns/records.js';
import type { RecordKeyDeriver } from '../../sns/record-key.js';
import { CORS_HEADERS } from '../cors.js';
import { renderOk, sendRendered, type RenderedAnswer } from '../rendered.js';
import {
  errorResponse,
  HEADER,
  INTERNAL,
  notModifiedResponse,
  okResponse,
  SHUTTING_DOWN,
} from '../schemas.js';
import { refuseOtherPaths } from './wrong-shape.js';

export type RecordKeyRouteDeps = {
  deriver: RecordKeyDeriver;
  /** How many answers the LRU keeps (`DERIVATION_CACHE_SIZE`); 0 turns it off. */
  cacheSize: number;
};

/**
 * Longest `:domain` whose answer is kept: the LRU is bounded by count, so this bounds its bytes
 * (about 100,000 × 300 B at the default size). Longer names are derived on every request.
 */
const MAX_CACHED_DOMAIN_LENGTH = 128;

const WRONG_SHAPE_DETAIL =
  'path must be /record-key-v2/<domain>/<record>; a domain of "." or ".." (%2E) is removed from the URL by the client';

/** A derivation never changes: caches may keep it for good. */
const DERIVATION_HEADERS = Object.freeze({
  ...CORS_HEADERS,
  'cache-control': 'public, max-age=31536000, immutable',
});

/**
 * `GET /record-key-v2/:domain/:record` (README, "Routes"). Pure CPU: no Redis, no RPC, so it keeps
 * answering while Redis is down (docs/design.md, "Shape").
 *
 * Answers are kept in a bounded LRU keyed by the raw path parameters, rendered (body and ETag), so
 * a hot name costs one map lookup: no parsing, derivation, serialization or hashing. A derivation
 * is pure, so a kept answer never goes stale. An answer is admitted on its name's second request
 * ({@link AdmittedLru}): names asked for once, most of the cold traffic, never evict anything.
 */
export const recordKeyRoutes: FastifyPluginAsyncTypebox<RecordKeyRouteDeps> = async (
  app,
  { deriver, cacheSize },
) => {
  const answers = cacheSize > 0 ? new AdmittedLru<RenderedAnswer>(cacheSize) : undefined;

  /** @throws InvalidInputError for a bad name (from the parser); InternalError if the derivation fails. */
  const answer = (rawDomain: string, record: Record): RenderedAnswer => {
    const domain = parseDerivationDomain(rawDomain);
    try {
      return renderOk(deriver.derive(domain, record));
    } catch (err) {
      throw new InternalError('derivation failed', { cause: err });
    }
  };

  app.get(
    '/record-key-v2/:domain/:record',
    {
      // CORS headers come from DERIVATION_HEADERS (see ../cors.ts).
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary: 'The V2 record-account key of a domain and record type, derived offline',
        description:
          "The SDK's `getRecordV2Key(domain, record)`: the address of the account that holds the " +
          'record, computed offline (no RPC, no Redis), so it answers while Redis is down. It ' +
          'says nothing of whether the record exists. Pure: kept by caches for a year.',
        params: Type.Object({
          domain: Type.String({
            description:
              'One label (`bonfida`) or `sub.parent` (`sub.domain2`), without the `.sol`/`.sns` ' +
              'suffix; trimmed and lower-cased. A suffix is read as a label: `bonfida.sol` is the ' +
              'subdomain `bonfida` of `sol`, not `bonfida`.',
            examples: ['bonfida'],
          }),
          record: Type.String({
            description:
              'Exactly one value (not name) of GET /types/record, case-sensitive: `SOL`, ' +
              '`email`, `url`, `IPFS`... (`sol` and `Email` are refused).',
            examples: ['SOL'],
          }),
        }),
        response: {
          200: okResponse(Type.String({ description: 'base58 account key' }), {
            description: 'The record key. `bonfida` / `SOL` gives this example.',
            examples: [{ s: 'ok', result: 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6' }],
            headers: { 'Cache-Control': HEADER.immutable, ETag: HEADER.etag },
          }),
          304: notModifiedResponse,
          400: errorResponse(
            '`Invalid input`: an empty label, more than two labels, or a record that is not ' +
              'exactly one of the values of /types/record.',
            'Invalid input',
          ),
          500: errorResponse(INTERNAL, 'Internal error'),
          503: errorResponse(SHUTTING_DOWN, 'Shutting down'),
        },
      },
    },
    (req, reply) => {
      const { domain } = req.params;
      const record = parseRecord(req.params.record);
      const cacheable = answers !== undefined && domain.length <= MAX_CACHED_DOMAIN_LENGTH;
      // Unambiguous: a valid record never holds the separator.
      const key = `${record}\u0000${domain}`;
      let rendered = cacheable ? answers.get(key) : undefined;
      if (!rendered) {
        rendered = answer(domain, record);
        if (cacheable) answers.offer(key, rendered);
      }
      // Sent here, not returned: a synchronous handler that sends needs no promise, and a ready
      // string bypasses the schema serializer (the type provider only knows objects).
      sendRendered((reply as FastifyReply).headers(DERIVATION_HEADERS), rendered);
    },
  );

  refuseOtherPaths(app, '/record-key-v2', WRONG_SHAPE_DETAIL);
};
