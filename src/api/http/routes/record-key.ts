import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { AdmittedLru } from '../../cache/admitted-lru.js';
import { InternalError, InvalidInputError } from '../../../core/errors.js';
import { parseDerivationDomain } from '../../sns/names.js';
import { parseRecord, parseRecordList, type RecordType } from '../../sns/records.js';
import type { RecordKeyDeriver } from '../../sns/record-key.js';
import { CORS_HEADERS } from '../../../core/http/cors.js';
import { renderOk, sendRendered, type RenderedAnswer } from '../rendered.js';
import {
  errorEnvelopeSchema,
  errorResponse,
  HEADER,
  INTERNAL,
  notModifiedResponse,
  okEnvelope,
  refResponse,
  SHUTTING_DOWN,
  useSchemas,
} from '../../../core/http/schemas.js';
import { refuseOtherPaths } from './wrong-shape.js';
import { ROUTE } from './paths.js';

/** What the derivation routes need. */
export type RecordKeyRouteDeps = {
  deriver: RecordKeyDeriver;
  /** Answers kept (`DERIVATION_CACHE_SIZE`); 0: none. */
  cacheSize: number;
};

/** Longest `:domain` kept: the LRU is bounded by count, so this bounds its bytes. */
const MAX_CACHED_DOMAIN_LENGTH = 128;

const WRONG_SHAPE_DETAIL =
  'path must be /record-key-v2/<domain>/<record>; a domain of "." or ".." (%2E) is removed from the URL by the client';

const BATCH_WRONG_SHAPE_DETAIL =
  'path must be /record-keys-v2/<domain>?records=<record>,<record>,...; a domain of "." or ".." (%2E) is removed from the URL by the client';

/** Most values in `?records=`; duplicates count but are derived once. */
export const MAX_BATCH_RECORDS = 100;

/** Where the key starts in `{"s":"ok","result":"<key>"}`. */
const KEY_START = renderOk('').body.length - 2;

/** The key inside a kept answer, read from its body: keeping it beside would double the strings. */
const keyOfAnswer = (answer: RenderedAnswer): string => answer.body.slice(KEY_START, -2);

/** Unambiguous: a valid record never holds NUL. */
const cacheKey = (rawDomain: string, record: RecordType): string => `${record}\u0000${rawDomain}`;

const recordKey = okEnvelope(
  'RecordKey',
  Type.String({ description: 'base58 account key' }),
  'The V2 record-account key of a domain and record type.',
);

/** Record value -> key. */
const recordKeys = okEnvelope(
  'RecordKeys',
  Type.Record(Type.String(), Type.String({ description: 'base58 account key' })),
  'The V2 record-account keys of a domain, by record value, in the order asked.',
);

/** A derivation never changes: caches may keep it for good. */
const DERIVATION_HEADERS = Object.freeze({
  ...CORS_HEADERS,
  'cache-control': 'public, max-age=31536000, immutable',
});

/**
 * `GET /record-key-v2/:domain/:record` and `/record-keys-v2/:domain?records=`: pure CPU, so they
 * answer while Redis is down. Rendered answers are kept in an {@link AdmittedLru} by raw path,
 * shared by the batch route.
 */
export const recordKeyRoutes: FastifyPluginAsyncTypebox<RecordKeyRouteDeps> = async (
  app,
  { deriver, cacheSize },
) => {
  const answers = cacheSize > 0 ? new AdmittedLru<RenderedAnswer>(cacheSize) : undefined;
  useSchemas(app, [errorEnvelopeSchema, recordKey, recordKeys]);

  /** @throws InvalidInputError for a bad name; InternalError if the derivation fails. */
  const answer = (rawDomain: string, record: RecordType): RenderedAnswer => {
    const domain = parseDerivationDomain(rawDomain);
    try {
      return renderOk(deriver.derive(domain, record));
    } catch (err) {
      throw new InternalError('derivation failed', { cause: err });
    }
  };

  app.get(
    ROUTE.recordKey,
    {
      // CORS comes with DERIVATION_HEADERS.
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary: 'The V2 record-account key of a domain and record type, derived offline',
        operationId: 'getRecordKey',
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
          200: refResponse(recordKey, {
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
      const key = cacheKey(domain, record);
      let rendered = cacheable ? answers.get(key) : undefined;
      if (!rendered) {
        const made = answer(domain, record);
        if (cacheable) answers.offer(key, () => made);
        rendered = made;
      }
      // Sent, not returned: no promise, and a string bypasses the serializer (which wants objects).
      sendRendered((reply as FastifyReply).headers(DERIVATION_HEADERS), rendered);
    },
  );

  refuseOtherPaths(app, '/record-key-v2', WRONG_SHAPE_DETAIL);

  app.get(
    ROUTE.recordKeys,
    {
      config: { cors: false },
      schema: {
        tags: ['sns'],
        summary:
          'The V2 record-account keys of one domain and up to 100 record types, derived offline',
        operationId: 'getRecordKeys',
        description:
          'Each key is what GET /record-key-v2/:domain/:record answers for that record: one ' +
          'request instead of one per record. Offline (no RPC, no Redis) and pure: kept by caches ' +
          'for a year. A record given more than once is answered once.',
        params: Type.Object({
          domain: Type.String({
            description:
              'As in /record-key-v2: one label or `sub.parent`, without the suffix; trimmed and ' +
              'lower-cased.',
            examples: ['bonfida'],
          }),
        }),
        querystring: Type.Object({
          records: Type.String({
            minLength: 1,
            description:
              `1 to ${MAX_BATCH_RECORDS} values of GET /types/record, comma-separated, each ` +
              'matched exactly (case-sensitive, no spaces). Duplicates count towards the limit ' +
              'and are answered once, where they first appear. Given once.',
            examples: ['SOL,email,url'],
          }),
        }),
        response: {
          200: refResponse(recordKeys, {
            description:
              'Record value -> key, in the order the records were given (first appearance). ' +
              '`bonfida` / `SOL,email` gives this example.',
            examples: [
              {
                s: 'ok',
                result: {
                  SOL: 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6',
                  email: 'DPSCfsPuTHDmFknDgs8T1uDaa8HsZqrmUpAwK2MMQVQW',
                },
              },
            ],
            headers: { 'Cache-Control': HEADER.immutable, ETag: HEADER.etag },
          }),
          304: notModifiedResponse,
          400: errorResponse(
            '`Invalid input`: a bad domain (as /record-key-v2), `records` missing, empty, given ' +
              `twice or holding more than ${MAX_BATCH_RECORDS} values, or a value that is not ` +
              'exactly one of /types/record (`detail` names it).',
            'Invalid input',
          ),
          500: errorResponse(INTERNAL, 'Internal error'),
          503: errorResponse(SHUTTING_DOWN, 'Shutting down'),
        },
      },
    },
    (req, reply) => {
      const { domain } = req.params;
      // `/record-keys-v2/?records=`: what a client sends for a domain of `.` or `..`.
      if (domain === '') {
        throw new InvalidInputError('path of the wrong shape', {
          detail: BATCH_WRONG_SHAPE_DETAIL,
        });
      }
      const records = parseRecordList(req.query.records, MAX_BATCH_RECORDS);
      const cacheable = answers !== undefined && domain.length <= MAX_CACHED_DOMAIN_LENGTH;
      // Hits from the single route's LRU; misses derived together, the domain key once.
      const keys: (string | undefined)[] = records.map((record) => {
        const kept = cacheable ? answers.get(cacheKey(domain, record)) : undefined;
        return kept && keyOfAnswer(kept);
      });
      const missing = records.filter((_, i) => keys[i] === undefined);
      if (missing.length > 0) {
        const parsed = parseDerivationDomain(domain);
        let derived: string[];
        try {
          derived = deriver.deriveAll(parsed, missing);
        } catch (err) {
          throw new InternalError('derivation failed', { cause: err });
        }
        let next = 0;
        records.forEach((record, i) => {
          if (keys[i] !== undefined) return;
          const key = derived[next++] as string;
          keys[i] = key;
          // Kept as the single route keeps it; rendered only if admitted.
          if (cacheable) answers.offer(cacheKey(domain, record), () => renderOk(key));
        });
      }
      const result: { [record: string]: string } = {};
      records.forEach((record, i) => {
        result[record] = keys[i] as string;
      });
      sendRendered((reply as FastifyReply).headers(DERIVATION_HEADERS), renderOk(result));
    },
  );

  refuseOtherPaths(app, '/record-keys-v2', BATCH_WRONG_SHAPE_DETAIL);
};
