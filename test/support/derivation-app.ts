import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { loadConfig } from '../../src/core/config.js';
import { buildApp } from '../../src/api/http/app.js';
import { createMetrics } from '../../src/core/metrics.js';
import { EndpointSelector } from '../../src/core/rpc/endpoint.js';
import { RecordKeyDeriver } from '../../src/api/sns/record-key.js';

/**
 * The app with no Redis at all: derivations must not need it (docs/design.md, "Shape").
 *
 * @param env configuration variables, over the defaults.
 */
export function derivationApp(
  deriver = new RecordKeyDeriver(),
  env: { [name: string]: string } = {},
): FastifyInstance {
  return buildApp({
    config: loadConfig(env),
    metrics: createMetrics(new Registry(), { defaultMetrics: false }),
    logger: pino({ level: 'silent' }),
    deriver,
    endpoints: new EndpointSelector({
      RPC_URL: undefined,
      RPC_OVERRIDE: 'on',
      RPC_OVERRIDE_ALLOWLIST: [],
    }),
    readiness: async () => ({
      ready: true,
      parts: { redis: true, redisWrites: true, rpc: 'configured', websocket: 'off' },
    }),
  });
}
