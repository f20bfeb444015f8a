import { Type, type Static } from '@fastify/type-provider-typebox';
import { component, errorResponse, HEADER, INTERNAL, okEnvelope } from '../../core/http/schemas.js';
import { pageQueryProperties, TOTAL_COUNT_HEADER } from './paged-answer.js';

/**
 * The OpenAPI schemas of the routes reading the subdomain cache: their parameters, answers and
 * headers, each declared once so the routes document and check them alike.
 */

/** `?rpc=` of every route reading the subdomain cache. */
export const rpcQueryProperty = {
  rpc: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        'Another Solana JSON-RPC endpoint, for this request: an https URL whose host resolves ' +
        'only to public addresses, or one of RPC_OVERRIDE_ALLOWLIST; refused (400) when ' +
        'RPC_OVERRIDE=off. Its answers are `no-store` and cached apart. No example: one would ' +
        'send a real DNS lookup from the docs page.',
    }),
  ),
};

/** `next` of a paged answer. */
const nextProperty = {
  next: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description:
        'Only with `limit`: the last label of this page, to pass as `after` for the next one; ' +
        'null when no more labels follow.',
    }),
  ),
};

/** `/subdomains/:parent`'s answer. */
export const subdomainList = okEnvelope(
  'SubdomainList',
  Type.Array(Type.String()),
  'The subdomain labels of a parent, sorted; with `limit`, one page of them and `next`.',
  nextProperty,
);

/** One row of `/subdomains/:parent/details`. */
export const subdomainDetail = component(
  'SubdomainDetail',
  Type.Object(
    {
      label: Type.String({ description: 'the label, as `/subdomains/:parent` lists it' }),
      key: Type.String({ description: "the subdomain's name account (base58)" }),
      owner: Type.String({ description: "the owner in the name account's header (base58)" }),
    },
    { $id: 'SubdomainDetail', description: 'A subdomain with its name account and owner.' },
  ),
);

/** `/subdomains/:parent/details`'s answer. */
export const subdomainDetails = okEnvelope(
  'SubdomainDetails',
  Type.Array(Type.Unsafe<Static<typeof subdomainDetail>>({ $ref: `${subdomainDetail.$id}#` })),
  'The subdomains of a parent with name account and owner, in the order of `SubdomainList`; ' +
    'with `limit`, one page of them and `next`.',
  nextProperty,
);

/** `?rpc=` and the page parameters. */
export const cachedAnswerQuery = Type.Object({ ...rpcQueryProperty, ...pageQueryProperties });

/** `:parent` of every route reading the subdomain cache. */
export const parentParams = Type.Object({
  parent: Type.String({
    description:
      'One top-level name as one label (`67679`), without the `.sol`/`.sns` suffix; trimmed and ' +
      'lower-cased. `67679.sol` is two labels (the subdomain `67679` of `sol`) and is refused.',
    examples: ['67679'],
  }),
});

/** The headers of a 200 from the cache, for OpenAPI. */
export const CACHED_ANSWER_HEADERS = Object.freeze({
  'Cache-Control': HEADER.subdomainsCacheControl,
  Age: HEADER.age,
  ETag: HEADER.etag,
  'X-Cache': HEADER.xCache,
  'X-Total-Count': TOTAL_COUNT_HEADER,
});

/**
 * The 500 of a route that may start a refresh (`/subdomains`, its event stream): a fault of the
 * gateway, no `RPC_URL` configured, or Redis unreachable. One text, so the routes say it alike.
 */
export const refreshingRouteInternal = () =>
  errorResponse(
    `${INTERNAL} Also when no RPC_URL is configured (\`detail\` names it) or Redis ` +
      'is unreachable.',
    'Internal error',
  );
