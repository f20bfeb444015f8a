import { Redis } from 'ioredis';

const LOCAL_REDIS = 'redis://127.0.0.1:6379';

/**
 * Finds the Redis the tests use (README, "The two commands"): `REDIS_URL` if set, else
 * 127.0.0.1:6379 if it answers, else a Redis container started through testcontainers (machines
 * with Docker).
 *
 * @returns the URL, and a stop function for a container this call started.
 * @throws when none of the three is available, saying what was tried.
 */
export async function resolveTestRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const none = async () => undefined;
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: none };
  if (await redisAnswers(LOCAL_REDIS, 1_000)) return { url: LOCAL_REDIS, stop: none };
  try {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine')
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
      .start();
    const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
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
