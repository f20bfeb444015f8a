import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { createMetrics, REFRESH_EVENT_LOSS } from '../src/core/metrics.js';
import {
  publishChange,
  publishRefreshEvent,
  RefreshListener,
} from '../src/core/queue/refresh-events.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { InProcessCopy, SENT_CHECK_MS } from '../src/api/subdomains/in-process-copy.js';
import { deletePrefix, uniquePrefix } from './support/gateway.js';
import { elapse } from './support/wait.js';
import { withAccounts } from './support/entry-accounts.js';

/**
 * A lost "changed" event is made good (docs/design.md, "The subdomain cache"): the worker retries
 * a refused publish, and an API process that received fewer events than were counted drops its
 * in-process copy. Real Redis; a refused PUBLISH is injected on the publisher's connection.
 */

const url = () => inject('redisUrl');
const opened: Redis[] = [];
const connect = () => {
  const r = new Redis(url(), { maxRetriesPerRequest: 1 });
  opened.push(r);
  return r;
};
const prefixes: string[] = [];
afterEach(async () => {
  const r = connect();
  for (const p of prefixes.splice(0)) await deletePrefix(r, p);
  for (const c of opened.splice(0)) c.disconnect();
});

/** A publisher whose next `refusals` PUBLISH commands are refused, as a Redis proxy would. */
function refusingPublisher(refusals: number): Redis {
  const redis = connect();
  const publish = redis.publish.bind(redis);
  let left = refusals;
  redis.publish = (channel: string, message: string) => {
    if (left > 0) {
      left--;
      return Promise.reject(new Error('ERR PUBLISH refused'));
    }
    return publish(channel, message);
  };
  return redis;
}

const endpoint = { kind: 'default', url: 'http://rpc.test/', id: 'e' } as const;

async function copyOn(prefix: string) {
  const listener = new RefreshListener(connect(), prefix);
  await listener.start();
  const redis = connect();
  const cache = new SubdomainCache(redis, prefix, 60_000, 3_600_000);
  const metrics = createMetrics(new Registry(), { defaultMetrics: false });
  const copy = new InProcessCopy({
    cache,
    listener,
    endpointId: 'e',
    maxBytes: 1_000_000,
    sent: async () => Number(await redis.get(redisKeys(prefix).refreshEventsSent)) || 0,
    onLost: () => metrics.refreshEventsLost.inc({ stage: REFRESH_EVENT_LOSS.receive }),
  });
  const keep = async (labels: string[]) => {
    await cache.put('e', 'p', ...withAccounts('p', { labels, fetchedAt: Date.now() }));
    const entry = await cache.get(cache.key('e', 'p'));
    if (!entry) throw new Error('no entry');
    copy.remember('p', endpoint, entry, copy.generation);
  };
  return { listener, cache, copy, metrics, keep };
}

describe('a lost refresh event', () => {
  it('is published again when Redis refuses it, and the copy drops the old entry', async () => {
    const prefix = uniquePrefix();
    prefixes.push(prefix);
    const { copy, keep } = await copyOn(prefix);
    await keep(['old']);
    expect(copy.peek('p', endpoint, Date.now())?.labels).toEqual(['old']);
    const failures: boolean[] = [];
    const ok = await publishChange(
      refusingPublisher(1),
      prefix,
      { endpointId: 'e', parent: 'p', ok: true },
      (_err, _attempt, final) => failures.push(final),
    );
    expect(ok).toBe(true);
    expect(failures).toEqual([false]);
    await vi.waitFor(() => expect(copy.peek('p', endpoint, Date.now())).toBeUndefined());
  });

  it('that stays lost makes the copy drop what it kept, while traffic flows', async () => {
    const prefix = uniquePrefix();
    prefixes.push(prefix);
    const { copy, keep, metrics, cache } = await copyOn(prefix);
    // One event goes through, so the comparison has begun.
    await publishRefreshEvent(connect(), prefix, { endpointId: 'e', parent: 'q', ok: true });
    await keep(['old']);
    for (let i = 0; i < 3; i++) {
      copy.peek('p', endpoint, Date.now());
      await elapse(SENT_CHECK_MS);
    }
    expect(copy.peek('p', endpoint, Date.now())?.labels).toEqual(['old']);
    // The worker writes the new label; every try to publish its event is refused.
    await cache.put(
      'e',
      'p',
      ...withAccounts('p', { labels: ['new', 'old'], fetchedAt: Date.now() }),
    );
    const finals: boolean[] = [];
    expect(
      await publishChange(
        refusingPublisher(100),
        prefix,
        { endpointId: 'e', parent: 'p', ok: true },
        (_err, _attempt, final) => finals.push(final),
      ),
    ).toBe(false);
    expect(finals.at(-1)).toBe(true);
    // Requests keep coming: within two comparisons the copy no longer answers the old list.
    await vi.waitFor(() => expect(copy.peek('p', endpoint, Date.now())).toBeUndefined(), {
      timeout: 5_000,
      interval: 50,
    });
    const lost = await metrics.registry.getSingleMetric('sns_refresh_events_lost_total')?.get();
    expect(lost?.values.find((v) => v.labels.stage === 'receive')?.value).toBe(1);
  });
});
