import { Redis } from 'ioredis';

export const LOCAL_REDIS = 'redis://127.0.0.1:6379';

/**
 * The database tests and benchmarks use unless `REDIS_URL` names one: not 0, so the suite runs
 * where a deployment's keys, leases and channels must follow its database (docs/design.md, "Redis
 * isolation"), and stays off the database a local gateway uses by default.
 */
export const TEST_DATABASE = 9;

/**
 * `url` in {@link TEST_DATABASE} unless it names a database itself (`redis://host:6379/3`, or
 * ioredis's `?db=3`), which is then kept, 0 included.
 */
export function withTestDatabase(url: string): string {
  const parsed = new URL(url);
  if ((parsed.pathname !== '' && parsed.pathname !== '/') || parsed.searchParams.has('db')) {
    return url;
  }
  parsed.pathname = `/${TEST_DATABASE}`;
  return parsed.href;
}

/**
 * `url` with its database replaced by `db`, for tests that need a database of their own choosing
 * (test/redis-isolation.test.ts).
 */
export function inDatabase(url: string, db: number): string {
  const parsed = new URL(url);
  parsed.searchParams.delete('db');
  parsed.pathname = `/${db}`;
  return parsed.href;
}

/**
 * Finds the Redis the tests use (CONTRIBUTING.md, "Run"): `REDIS_URL` if set, else
 * 127.0.0.1:6379 if it answers, else a Redis container started through testcontainers (machines
 * with Docker); in {@link TEST_DATABASE} unless `REDIS_URL` names a database. The one place the
 * suites' Redis URL is chosen: every test file gets it through `inject('redisUrl')`.
 *
 * @returns the URL, and a stop function for a container this call started.
 * @throws when none of the three is available, saying what was tried.
 */
export async function resolveTestRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const none = async () => undefined;
  if (process.env.REDIS_URL) return { url: withTestDatabase(process.env.REDIS_URL), stop: none };
  if (await redisAnswers(LOCAL_REDIS, 1_000)) {
    return { url: withTestDatabase(LOCAL_REDIS), stop: none };
  }
  try {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine')
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
      .start();
    const url = withTestDatabase(`redis://${container.getHost()}:${container.getMappedPort(6379)}`);
    return { url, stop: async () => void (await container.stop()) };
  } catch (err) {
    throw new Error(
      `no Redis for the tests: REDIS_URL is unset, ${LOCAL_REDIS} does not answer, and testcontainers ` +
        `could not start one (${(err as Error).message})`,
    );
  }
}

/** True when a Redis at `url` answers PING within about half a second. */
export async function redisAnswers(url: string, connectTimeoutMs = 500): Promise<boolean> {
  const probe = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: connectTimeoutMs,
    retryStrategy: () => null,
  });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}
