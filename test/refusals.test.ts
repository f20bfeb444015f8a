import { afterEach, describe, expect, it } from 'vitest';
import { utcDay } from '../src/core/rpc/budget.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { metric } from './support/freshness.js';
import { startGateway, waitFor, type Gateway } from './support/gateway.js';

/**
 * Refusals (429, 503 with Retry-After) under a flood: charged to the client's cold-miss limit,
 * counted by reason in `sns_http_refusals_total`, and never a log line each.
 */

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

/** GET `path` as the client at `address`: its status. */
async function statusOf(g: Gateway, path: string, address: string): Promise<number> {
  const res = await g.api.app.inject({ method: 'GET', url: path, remoteAddress: address });
  return res.statusCode;
}

describe('refusals under a flood', () => {
  it('charges 503s to the client, which then gets 429s, and counts both without a line each', async () => {
    const limit = 5;
    gw = await startGateway({
      env: {
        RPC_CREDITS_PER_DAY: '1000',
        COLD_MISS_LIMIT: String(limit),
        COLD_MISS_WINDOW_SECONDS: '60',
        HOT_KEYS_TOP_N: '0',
      },
    });
    const g = gw;
    await g.redis.set(redisKeys(g.config.QUEUE_PREFIX).rpcCredits(utcDay(Date.now())), '1000');
    // The API reads the counter at most once a second: another address waits for it.
    await waitFor(async () => (await statusOf(g, '/subdomains/probe', '127.0.0.50')) === 503);
    const linesBefore = g.logs.length;
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      statuses.push(await statusOf(g, `/subdomains/madeup${i}`, '127.0.0.51'));
    }
    // The limit's units go to the 503s, then every cold miss is refused for the limit.
    expect(statuses.slice(0, limit)).toEqual(Array.from({ length: limit }, () => 503));
    expect(statuses.slice(limit)).toEqual(Array.from({ length: 60 - limit }, () => 429));
    expect(await metric(g, 'sns_http_refusals_total', { reason: 'cold_miss_limit' })).toBe(
      60 - limit,
    );
    expect(await metric(g, 'sns_http_refusals_total', { reason: 'budget' })).toBeGreaterThanOrEqual(
      limit,
    );
    // One summary line a minute at most; no line per refusal, no stack.
    const lines = g.logs.slice(linesBefore).join('');
    expect(lines).not.toContain('request failed');
    expect(lines).not.toContain('request refused');
    expect(lines).not.toContain('"stack"');
    expect(g.logs.slice(linesBefore).length).toBeLessThanOrEqual(1);
  });
});
