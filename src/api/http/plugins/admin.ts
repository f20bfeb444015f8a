import { createHash, timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import bearerAuth from '@fastify/bearer-auth';
import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { errorEnvelope } from '../../../core/errors.js';

export const ADMIN_PREFIX = '/admin/queues';

const UNAUTHORIZED = errorEnvelope(
  'Unauthorized',
  'send ADMIN_TOKEN as a Bearer token, or as the password of HTTP Basic',
);

/** Basic credentials carry `token` as password (any user), compared in constant time. */
function basicPasswordIs(token: string): (credentials: string) => boolean {
  const expected = createHash('sha256').update(token).digest();
  return (credentials) => {
    const decoded = Buffer.from(credentials, 'base64').toString('utf8');
    const password = decoded.slice(decoded.indexOf(':') + 1);
    return timingSafeEqual(createHash('sha256').update(password).digest(), expected);
  };
}

/**
 * The queue UI (@bull-board/fastify) at `/admin/queues`, only with `ADMIN_TOKEN`: Bearer, or
 * Basic with the token as password (a browser's prompt). Otherwise 401 in the envelope with a
 * Basic challenge. Read-only (bull-board's `readOnlyMode`: no pause, retry, clean, add or delete)
 * unless `writable` (`ADMIN_QUEUES_WRITE`): a token that leaks, or is read off plain HTTP, then
 * shows the queues but cannot stop the refreshes.
 */
export async function adminPlugin(
  app: FastifyInstance,
  opts: { queue: Queue; token: string; writable: boolean },
) {
  // rfc6749 mode: the scheme is case-insensitive (RFC 9110 §11.1). Refusals are client mistakes.
  const common = { specCompliance: 'rfc6749', verifyErrorLogLevel: 'debug' } as const;
  // No hook of its own: ours picks Bearer or Basic and answers with the envelope.
  await app.register(bearerAuth, { ...common, keys: [opts.token], addHook: false });
  const verifyBearer = app.verifyBearerAuth;
  const verifyBasic = app.verifyBearerAuthFactory?.({
    ...common,
    keys: [],
    bearerType: 'Basic',
    auth: basicPasswordIs(opts.token),
    addHook: false,
  });
  if (!verifyBearer || !verifyBasic) throw new Error('@fastify/bearer-auth did not decorate');
  app.addHook('onRequest', (req, reply, done) => {
    const basic = /^basic /i.test(req.headers.authorization ?? '');
    (basic ? verifyBasic : verifyBearer)(req, reply, (err) => {
      // Here, not in an error handler: bull-board's routes have their own, unaware of the envelope.
      if ((err as { statusCode?: number } | undefined)?.statusCode !== 401) return done(err);
      void reply
        .code(401)
        .header('www-authenticate', 'Basic realm="sns-gateway admin"')
        .send(UNAUTHORIZED);
    });
  });
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(ADMIN_PREFIX);
  createBullBoard({
    queues: [new BullMQAdapter(opts.queue, { readOnlyMode: !opts.writable })],
    serverAdapter,
  });
  await app.register(serverAdapter.registerPlugin());
}
