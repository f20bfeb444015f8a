import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { errorEnvelope } from '../../errors.js';

export const ADMIN_PREFIX = '/admin/queues';

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The token of a request: `Authorization: Bearer <t>`, or HTTP Basic with `<t>` as password. */
function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const [scheme, value] = header.split(' ', 2);
  if (!value) return undefined;
  if (scheme?.toLowerCase() === 'bearer') return value;
  if (scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    return decoded.slice(decoded.indexOf(':') + 1);
  }
  return undefined;
}

/**
 * The queue UI (@bull-board/fastify) at `/admin/queues`, for ops. Registered only when
 * `ADMIN_TOKEN` is set, and then every request needs that token (Bearer, or HTTP Basic with the
 * token as password so a browser can log in).
 */
export async function adminPlugin(app: FastifyInstance, opts: { queue: Queue; token: string }) {
  app.addHook('onRequest', async (req, reply) => {
    const token = presentedToken(req.headers.authorization);
    if (token === undefined || !sameSecret(token, opts.token)) {
      return reply
        .code(401)
        .header('www-authenticate', 'Basic realm="sns-gateway admin"')
        .send(
          errorEnvelope(
            'Unauthorized',
            'send ADMIN_TOKEN as a Bearer token, or as the password of HTTP Basic',
          ),
        );
    }
  });
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(ADMIN_PREFIX);
  createBullBoard({
    queues: [new BullMQAdapter(opts.queue, { readOnlyMode: false })],
    serverAdapter,
  });
  await app.register(serverAdapter.registerPlugin());
}
