import type { FastifyInstance } from 'fastify';
import { InvalidInputError } from '../../../core/errors.js';
import { errorEnvelopeSchema } from '../../../core/http/schemas.js';

// The shared envelope, declared by the plugin that calls refuseOtherPaths (useSchemas).
const schema = { hide: true, response: { '4xx': { $ref: `${errorEnvelopeSchema.$id}#` } } };

/**
 * Answers every other path under `prefix` (`/record-key-v2`, `/subdomains`) 400 with `detail`:
 * a request of the wrong shape, not an unknown route. A client's URL parser removes `.` and `..`
 * segments, `%2E` and `%2E%2E` included (WHATWG URL, "single-dot URL path segment"), before
 * sending, so `/record-key-v2/%2E/SOL` arrives as `/record-key-v2/SOL`, which the route itself
 * cannot match.
 *
 * @param detail what the path must look like (the envelope's `detail`).
 */
export function refuseOtherPaths(app: FastifyInstance, prefix: string, detail: string): void {
  const refuse = () => {
    throw new InvalidInputError('path of the wrong shape', { detail });
  };
  app.get(prefix, { schema }, refuse);
  app.get(`${prefix}/*`, { schema }, refuse);
}
