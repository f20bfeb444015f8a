/**
 * The demo's Redis: the one `REDIS_URL` names if it answers, else a `redis-server` of the demo's
 * own on loopback, else one line saying how to get one.
 */
import { connect } from 'node:net';
import { execa, type ResultPromise } from 'execa';
import getPort from 'get-port';
import { Redis } from 'ioredis';

/** Every key of the demo lives under this prefix, which the demo deletes at start and stop. */
export const DEMO_PREFIX = 'sns-demo';

/** What a user without a Redis runs, in one line. */
export const GET_A_REDIS =
  'start one with `sudo apt-get install redis-server` (Debian/Ubuntu) or ' +
  '`docker run -d -p 127.0.0.1:6379:6379 redis:7-alpine`, or set REDIS_URL to yours';

/** How long a `redis-server` of the demo's own may take to answer. */
const START_WAIT_MS = 10_000;

/** Whether something accepts TCP connections at `host:port` (within a second). */
function listening(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1_000 });
    const done = (yes: boolean) => {
      socket.destroy();
      resolve(yes);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

/**
 * Why `url` gives no usable answer, or undefined when it answers PING. `listening` tells a
 * port nobody listens on (a Redis may be started there) from a server that refused.
 */
export async function redisProblem(
  url: string,
): Promise<{ listening: boolean; problem: string } | undefined> {
  const parsed = new URL(url);
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (!(await listening(host, Number(parsed.port || 6379)))) {
    return { listening: false, problem: 'nothing listens there' };
  }
  let lastError = '';
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  redis.on('error', (err: Error) => (lastError = err.message));
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (err) {
    return { listening: true, problem: lastError || (err instanceof Error ? err.message : '?') };
  } finally {
    redis.disconnect();
  }
}

/** A Redis for the demo; `process` is set when the demo started it (and so must stop it). */
export type DemoRedis = { url: string; process?: ResultPromise };

/** The URL as shown: no password. */
export function shownUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== '') parsed.password = '***';
  return parsed.href.replace(/\/$/, '');
}

/**
 * The Redis of `url` when it answers. Otherwise, when `url` is on loopback without credentials
 * and `redis-server` is on the PATH, starts one (on `url`'s port when free, else on a free one),
 * with no persistence and BullMQ's `noeviction`.
 *
 * @throws Error with a one-line message saying how to get a Redis, when there is none to use.
 */
export async function findOrStartRedis(url: string): Promise<DemoRedis> {
  const found = await redisProblem(url);
  if (found === undefined) return { url };
  const parsed = new URL(url);
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(parsed.hostname);
  if (!loopback || parsed.username !== '' || parsed.password !== '' || found.listening) {
    throw new Error(`no usable Redis at ${shownUrl(url)} (${found.problem}): ${GET_A_REDIS}`);
  }
  const wanted = Number(parsed.port || 6379);
  const port = await getPort({ port: wanted, host: '127.0.0.1' });
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  args.push('--maxmemory-policy', 'noeviction');
  // Its own process group: the demo alone decides when it stops (after the gateway).
  const child = execa('redis-server', args, { detached: true, reject: false, stdin: 'ignore' });
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  const started = parsed.href.replace(/\/$/, '');
  const deadline = Date.now() + START_WAIT_MS;
  for (;;) {
    // No pid: the spawn failed (redis-server not found); an exit code: it stopped at start.
    if (child.pid === undefined || child.exitCode !== null) {
      const result = await child;
      if (result.code === 'ENOENT') {
        throw new Error(
          `no Redis answers at ${shownUrl(url)} and redis-server is not on the PATH: ${GET_A_REDIS}`,
        );
      }
      const said = `${result.stdout}\n${result.stderr}`.trim().split('\n').at(-1) ?? '';
      throw new Error(`redis-server exited at start (${said}): ${GET_A_REDIS}`);
    }
    if ((await redisProblem(started)) === undefined) return { url: started, process: child };
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not answer on port ${port} within ${START_WAIT_MS} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Deletes the keys under `prefix:` (SCAN and UNLINK): the demo's own, so a new demo chain never
 * meets the entries of the last one, whose slots are ahead of the new chain's.
 */
export async function deleteDemoKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
