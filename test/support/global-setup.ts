import type { TestProject } from 'vitest/node';
import { resolveTestRedis } from './shared-redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

/** Once per run: find or start Redis, and hand its URL to every test file. */
export default async function setup(project: TestProject) {
  const redis = await resolveTestRedis();
  project.provide('redisUrl', redis.url);
  return async () => {
    await redis.stop();
  };
}
