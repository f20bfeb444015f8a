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

/**
 * Whether HTTP Basic credentials (`base64(user:password)`) carry `token` as their password, any
 * user name. Compares SHA-256 digests in constant time: equal lengths, so neither the token's
 * length nor its content leaks through timing.
 */
function basicPasswordIs(token: string): (credentials: string) => boolean {
  const expected = createHash('sha256').update(token).digest();
  return (credentials) => {
    const decoded = Buffer.from(credentials, 'base64').toString('utf8');
    const password = decoded.slice(decoded.indexOf(':') + 1);
    return timingSafeEqual(createHash('sha256').update(password).digest(), expected);
  };
}

/**
 * The queue UI (@bull-board/fastify) at `/admin/queues`, for ops. Registered only when
 * `ADMIN_TOKEN` is set, and then every request needs that token: `Authorization: Bearer <token>`
 * (@fastify/bearer-auth, constant-time compare), or HTTP Basic with the token as password so a
 * browser can log in. Any other request gets 401 `Unauthorized` in the error envelope, with a
 * Basic challenge (the browser's login prompt).
 */
export async function adminPlugin(app: FastifyInstance, opts: { queue: Queue; token: string }) {
  // The scheme is case-insensitive (`bearer` too, RFC 9110 §11.1): rfc6749 mode. A refusal is a
  // client's mistake, not a fault: logged at debug, not at the plugin's default (error).
  const common = { specCompliance: 'rfc6749', verifyErrorLogLevel: 'debug' } as const;
  // No hook of its own (`addHook: false`): the hook below picks Bearer or Basic, and answers a
  // refusal with the envelope instead of the plugin's `{ error }` body.
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
      // Answered here, not through an error handler: bull-board's routes have one of their own,
      // which knows nothing of the envelope. Any other error (none expected) goes on as it is.
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
    queues: [new BullMQAdapter(opts.queue, { readOnlyMode: false })],
    serverAdapter,
  });
  await app.register(serverAdapter.registerPlugin());
}
