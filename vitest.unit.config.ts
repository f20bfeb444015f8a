import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * `npm run test:unit`: the suites `.ci/run` repeats on the older supported Node lines. What can
 * differ between lines is the runtime itself (the Unicode tables names are lowered with, crypto,
 * worker threads, fetch, timers), which these exercise without a gateway process or a Redis
 * round trip of their own; the whole suite runs once, on the newest line. Keeping the integration
 * suites out of the repeats keeps CI's time and its exposure to load in bounds.
 */
export default defineConfig({
  test: {
    ...base.test,
    include: [
      'admitted-lru',
      'batch-derivation',
      'bounded-json',
      'change',
      'derivation',
      'discovery-thread',
      'docs',
      'doorkeeper',
      'endpoint-policy',
      'follow-hostile',
      'follow-proofs',
      'follow-rereads',
      'follow-units',
      'layout',
      'node-version',
      'pda',
      'redact',
      'request-logger',
      'rpc-client',
      'slot',
    ].map((name) => `test/${name}.test.ts`),
    coverage: { enabled: false },
  },
});
