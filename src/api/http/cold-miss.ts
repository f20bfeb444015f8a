import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RateLimitedError } from '../../core/errors.js';
import type { Requester } from '../subdomains/lookup.js';

const COLD_MISS_DETAIL =
  'this client started too many new refreshes or ?rpc= host lookups in the window; cached answers are not limited (see Retry-After)';

/** The {@link Requester} of a request to the subdomain cache. */
export function requesterOf(
  req: FastifyRequest,
  check: ReturnType<FastifyInstance['createRateLimit']>,
): Requester {
  return { client: req.client, charge: coldMissCharge(req, check) };
}

/**
 * Charges one unit of the client's cold-miss limit, once per request however often called: for a
 * refresh the request starts, or a `?rpc=` lookup (DNS the client picks, which may never answer).
 *
 * @returns the charge; it throws RateLimitedError (429) past the limit.
 */
function coldMissCharge(
  req: FastifyRequest,
  check: ReturnType<FastifyInstance['createRateLimit']>,
): () => Promise<void> {
  let charged = false;
  return async () => {
    if (charged) return;
    charged = true;
    const limit = await check(req);
    if (!limit.isAllowed && limit.isExceeded) {
      throw new RateLimitedError('client over its cold-miss limit', limit.ttlInSeconds, {
        detail: COLD_MISS_DETAIL,
      });
    }
  };
}
