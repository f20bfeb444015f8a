import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: files run two at a time; each uses its own Redis key prefix, so they never collide.
    maxWorkers: 2,
    // Printed by `npm test` (`--coverage`): lines of src/ and worker/ the suites run.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts', 'worker/**/*.ts'],
      reporter: ['text-summary'],
    },
  },
});
