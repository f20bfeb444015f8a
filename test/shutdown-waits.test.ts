/**
 * Requests waiting for a refresh when shutdown begins: they get part of the shutdown bound to see
 * their refresh finish, then a 503 `Shutting down` in the envelope, never a dropped connection,
 * and the API's close ends within the bound.
 */
import { describe, expect, it } from 'vitest';
import { startGateway, waitFor } from './support/gateway.js';

describe('shutdown with requests waiting for a refresh', () => {
  it('answers them 503 Shutting down within the shutdown bound when the refresh hangs', async () => {
    const gw = await startGateway({ env: { SHUTDOWN_TIMEOUT_MS: '1000' } });
    try {
      gw.sim.setFaults([{ kind: 'delay', ms: 20_000 }]);
      const waiting = gw.get('/subdomains/67679');
      await waitFor(async () => {
        const lookups = await gw.metrics.registry.getSingleMetric('sns_cache_lookups_total')?.get();
        return lookups?.values.some((v) => v.labels.result === 'miss' && v.value === 1) === true;
      });
      const started = Date.now();
      const closing = gw.api.close();
      const answer = await waiting;
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ s: 'error', result: 'Shutting down' });
      expect(answer.headers.get('retry-after')).toBe('1');
      await closing;
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      gw.sim.setFaults([]);
      await gw.close().catch(() => undefined);
    }
  });
});
