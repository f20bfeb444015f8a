import type { FastifyInstance } from 'fastify';
import { InvalidInputError } from '../../../core/errors.js';
import { errorEnvelopeSchema } from '../../../core/http/schemas.js';

// The envelope, declared by the calling plugin.
const schema = { hide: true, response: { '4xx': { $ref: `${errorEnvelopeSchema.$id}#` } } };

/**
 * Answers 400 with `detail` any other path under `prefix`: clients drop `.`/`..` segments (`%2E`
 * too, WHATWG URL) before sending, so `/record-key-v2/%2E/SOL` arrives as `/record-key-v2/SOL`.
 */
export function refuseOtherPaths(app: FastifyInstance, prefix: string, detail: string): void {
  const refuse = () => {
    throw new InvalidInputError('path of the wrong shape', { detail });
  };
  app.get(prefix, { schema }, refuse);
  app.get(`${prefix}/*`, { schema }, refuse);
}
