/**
 * The path of each public route of the API, as Fastify matches it (`:name` a parameter): each
 * route plugin registers its own from here, and the tests hold the OpenAPI document, the route
 * label of `http_request_duration_seconds` and the README's table to the same list. The ops
 * routes' paths are `OPS_ROUTE` (src/core/http/ops-routes.ts).
 */
export const ROUTE = Object.freeze({
  recordKey: '/record-key-v2/:domain/:record',
  recordKeys: '/record-keys-v2/:domain',
  recordTypes: '/types/record',
  subdomains: '/subdomains/:parent',
  subdomainDetails: '/subdomains/:parent/details',
  subdomainEvents: '/subdomains/:parent/events',
});
