import { afterEach, describe, expect, it } from 'vitest';
import {
  HEAL_GRACE_MS,
  readFollowStatus,
  STATUS_READ_EVERY_MS,
  type FollowStatus,
} from '../src/core/cache/follow-status.js';
import { SubdomainCache } from '../src/core/cache/subdomain-cache.js';
import { endpointId } from '../src/core/rpc/endpoint.js';
import { FOLLOW, metric, PARENT, untilStale, watched } from './support/freshness.js';
import { startGateway, type Gateway } from './support/gateway.js';
import { until, waitFor } from './support/wait.js';

/**
 * A drop of every websocket costs the gap's heal, not a scan per parent asked during it
 * (docs/design.md, "Freshness"): against the real worker, Redis and the simulator, entries past
 * their window are answered `STALE` while the stream does not vouch, their refreshes wait for the
 * heal (`HEAL_GRACE_MS`), and are made as without a stream when it fails or does not come.
 */

/** A short window, so the parent's entry is past it soon after it is followed. */
const HEAL = { ...FOLLOW, CACHE_FRESH_SECONDS: '2' } as const;
/**
 * How long a status the API read may still decide its answers after the worker wrote another:
 * its reader's interval, and a read's round trip.
 */
const READ_LAG_MS = STATUS_READ_EVERY_MS + 200;
/** How far the gateway's clock (Redis's, src/core/redis-time.ts) may be from the test's. */
const CLOCK_SLACK_MS = 50;

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

/** The follow status as stored now. */
const status = (g: Gateway) => readFollowStatus(g.redis, g.config.QUEUE_PREFIX);

/** Whether `s` vouches for the entries fetched since its epoch (docs/design.md, "Follow status"). */
const vouches = (s: FollowStatus | null) =>
  s?.mode === 'program' && s.healthyUntil > Date.now() && s.deletesSince === undefined;

/** One answer of the parent: when it was asked and answered, its `X-Cache`, and what was seen then. */
type Asked = {
  askedAt: number;
  answeredAt: number;
  state: string | null;
  /** getProgramAccounts calls the simulator had got when the answer came. */
  scans: number;
  /** The entry's `fetchedAt` as stored right after the answer (it only moves forward). */
  fetchedAt: number | undefined;
  /** The status read right after the answer. */
  after: FollowStatus | null;
};

async function ask(g: Gateway): Promise<Asked> {
  const askedAt = Date.now();
  const res = await g.get(`/subdomains/${PARENT}`);
  expect(res.status).toBe(200);
  const answeredAt = Date.now();
  const scans = g.sim.callCount('getProgramAccounts');
  const fetched = await fetchedAt(g);
  const after = await status(g);
  return {
    askedAt,
    answeredAt,
    state: res.headers.get('x-cache'),
    scans,
    fetchedAt: fetched,
    after,
  };
}

/** What {@link dropped} saw: the heal's status as first read, and the entry and jobs before. */
type Drop = {
  heal: FollowStatus & { healingSince: number };
  /** The entry's `fetchedAt` before the drop. */
  fetched: number | undefined;
  /** When the scan behind the entry began, before the drop (a check does not move it). */
  scanned: number | undefined;
  /** `sns_refresh_jobs_total` before the drop. */
  jobs: number;
};

/**
 * The parent followed, its entry past the window (a hit only because the stream vouches), then
 * `before` (a fault to set once followed), the calls reset and every websocket dropped. With
 * `checked`, the parent's first existence check is made before its entry is let go stale: the
 * checks back off (the next one two windows after it, and only while the stream vouches), so none
 * renews the entry around the drop.
 */
async function dropped(
  g: Gateway,
  before: () => void = () => undefined,
  { checked = false }: { checked?: boolean } = {},
): Promise<Drop> {
  await watched(g, g.sim);
  if (checked) {
    await waitFor(
      async () => (await metric(g, 'sns_deletion_checks_total')) > 0,
      10_000,
      'the first existence check of the parent',
    );
  }
  await untilStale(g, PARENT);
  expect((await ask(g)).state).toBe('HIT');
  const fetched = await fetchedAt(g);
  const scanned = (await head(g))?.scannedAt;
  const jobs = await metric(g, 'sns_refresh_jobs_total');
  before();
  g.sim.resetCalls();
  expect(g.sim.dropSockets()).toBeGreaterThanOrEqual(1);
  // The worker writes at once that it stopped vouching, and since when it heals.
  const heal = await until(
    async () => {
      const s = await status(g);
      return s?.healingSince === undefined ? undefined : { ...s, healingSince: s.healingSince };
    },
    'the status saying a heal is under way',
    5_000,
  );
  return { heal, fetched, scanned, jobs };
}

/** The entry's head as stored. */
function head(g: Gateway) {
  const cache = new SubdomainCache(g.redis, g.config.QUEUE_PREFIX, 1, 1);
  return cache.head(endpointId(g.sim.url), PARENT);
}

/** The entry's `fetchedAt` as stored. */
async function fetchedAt(g: Gateway): Promise<number | undefined> {
  return (await head(g))?.fetchedAt;
}

describe('a drop of every websocket', () => {
  it('answers a parent past its window STALE during the heal, and scans nothing when the heal vouches within the bound', async () => {
    gw = await startGateway({ env: HEAL });
    const g = gw;
    const { heal, scanned, jobs } = await dropped(g, undefined, { checked: true });
    expect(scanned).toBeDefined();
    expect(heal.healthyUntil).toBe(0);
    const seenAt = Date.now();
    const answers: Asked[] = [];
    await waitFor(
      async () => {
        answers.push(await ask(g));
        return vouches(answers.at(-1)?.after ?? null);
      },
      HEAL_GRACE_MS,
      'the heal vouching again within the bound',
    );
    // Asked once the API read a status that no longer vouched, and answered before the status
    // vouched again: no scan was made for it, and the stream vouched for nothing, so STALE once
    // past the entry's window, even as stored after the answer (an existence check may renew the
    // entry, which scans nothing; `checked` keeps it from doing so around the drop).
    const during = answers.filter((a) => a.askedAt >= seenAt + READ_LAG_MS && !vouches(a.after));
    for (const a of during) expect(a.scans).toBe(0);
    const past = during.filter(
      (a) => a.askedAt - (a.fetchedAt ?? 0) > g.config.CACHE_FRESH_MS + CLOCK_SLACK_MS,
    );
    expect(past.length).toBeGreaterThan(0);
    for (const a of past) expect(a.state).toBe('STALE');
    // Once the API reads the vouching status, a hit again, from the same scan (the next existence
    // check may renew `fetchedAt` by then, never `scannedAt`).
    await waitFor(async () => (await ask(g)).state === 'HIT', 5_000, 'a hit after the heal');
    expect((await head(g))?.scannedAt).toBe(scanned);
    expect(g.sim.callCount('getProgramAccounts')).toBe(0);
    // The gap was read instead, and no refresh was queued meanwhile (the API's nor the hot
    // parents' scans).
    expect(g.sim.callCount('getSignaturesForAddress')).toBeGreaterThanOrEqual(1);
    expect(await metric(g, 'sns_refresh_jobs_total')).toBe(jobs);
    expect((await status(g))?.healingSince).toBeUndefined();
  }, 60_000);

  it('refreshes the stale parent once the bound passes when the websocket stays refused', async () => {
    gw = await startGateway({ env: HEAL });
    const g = gw;
    const { heal } = await dropped(g, () => g.sim.setWebsocketAvailable(false));
    const bound = heal.healingSince + HEAL_GRACE_MS;
    const answers: Asked[] = [];
    await waitFor(
      async () => {
        answers.push(await ask(g));
        return g.sim.callCount('getProgramAccounts') > 0;
      },
      HEAL_GRACE_MS + 15_000,
      'the parent scanned again',
    );
    // Within the bound nothing was scanned: the refresh waited for a heal that did not come.
    const within = answers.filter((a) => a.answeredAt < bound - 100);
    expect(within.length).toBeGreaterThan(0);
    for (const a of within) expect(a.scans).toBe(0);
    for (const a of answers) expect(a.after?.healthyUntil).toBe(0);
    // The refresh lands: a hit by the window, of a scan begun after the drop.
    await waitFor(async () => (await ask(g)).state === 'HIT', 10_000, 'a hit of the new scan');
    expect(await fetchedAt(g)).toBeGreaterThan(heal.healingSince);
  }, 60_000);

  it('refreshes the stale parent as soon as the heal fails (its reads refused), before the bound', async () => {
    gw = await startGateway({ env: HEAL });
    const g = gw;
    // The gap's signatures are refused: the heal gives up, and a new epoch starts.
    const { heal, fetched } = await dropped(g, () =>
      g.sim.setFaults([{ kind: 'rpc-error', method: 'getSignaturesForAddress' }]),
    );
    // The first scan since the drop, as stored: its `fetchedAt` is when the worker began it, on
    // the clock `healingSince` was written with (src/core/redis-time.ts).
    const scanned = await until(
      async () => {
        await ask(g);
        const at = await fetchedAt(g);
        return at !== undefined && at !== fetched ? at : undefined;
      },
      'the parent scanned again',
      HEAL_GRACE_MS + 10_000,
      25,
    );
    const s = await status(g);
    // Scanned because the heal failed (the epoch moved past the entry), not because the bound
    // passed: by the times the gateway recorded, the scan began before the bound. Not the test's
    // clock once it got to look: how long its asks and reads took is not the gateway's doing.
    expect(s?.epoch).toBeGreaterThan(fetched ?? Infinity);
    expect(scanned).toBeLessThan(heal.healingSince + HEAL_GRACE_MS);
    await waitFor(async () => (await ask(g)).state === 'HIT', 10_000, 'a hit of the new scan');
  }, 60_000);

  it('never answers a name created during the drop missing as fresh when its heal fails, existence checks or not', async () => {
    gw = await startGateway({ env: HEAL });
    const g = gw;
    // No socket for a moment, so the creation comes in the gap; the gap's transaction unreadable,
    // so the heal fails (a new epoch); every scan refused, so only a check can touch the entry.
    const { fetched } = await dropped(g, () => {
      g.sim.setWebsocketAvailable(false);
      g.sim.setFaults([
        { kind: 'rpc-error', method: 'getTransaction' },
        { kind: 'rpc-error', method: 'getProgramAccounts' },
      ]);
    });
    g.sim.chain.addSubdomain(PARENT, 'ingap');
    g.sim.setWebsocketAvailable(true);
    const cache = new SubdomainCache(g.redis, g.config.QUEUE_PREFIX, 1, 1);
    const head = () => cache.head(endpointId(g.sim.url), PARENT);
    const rev = (await head())?.rev;
    // The stream vouches again, since an epoch past the entry's scan.
    await waitFor(
      async () => {
        const s = await status(g);
        return vouches(s) && (s?.epoch ?? 0) > (fetched ?? Infinity);
      },
      HEAL_GRACE_MS,
      'the heal failed, the stream vouching from a new epoch',
    );
    // An existence check of the parent passes (it reads what exists, not what was added).
    await waitFor(async () => (await head())?.rev !== rev, 40_000, 'an existence check');
    await waitFor(
      async () => (await metric(g, 'sns_deletion_checks_total', { outcome: 'unchanged' })) > 0,
      5_000,
      'the check counted',
    );
    for (let i = 0; i < 10; i++) {
      const res = await g.get(`/subdomains/${PARENT}`);
      const labels = res.body.result as string[];
      if (res.headers.get('x-cache') !== 'STALE') expect(labels).toContain('ingap');
    }
    // Scans allowed again: the name shows.
    g.sim.setFaults([]);
    await waitFor(
      async () => {
        const res = await g.get(`/subdomains/${PARENT}`);
        return (res.body.result as string[]).includes('ingap');
      },
      15_000,
      'the name created in the gap listed',
    );
  }, 90_000);

  it('never answers fresh while the stream does not vouch, before the bound or after it', async () => {
    gw = await startGateway({ env: HEAL });
    const g = gw;
    // No socket again, and every scan refused: nothing can make the entry fresh by its window
    // either.
    const { heal } = await dropped(g, () => {
      g.sim.setWebsocketAvailable(false);
      g.sim.setFaults([{ kind: 'rpc-error', method: 'getProgramAccounts' }]);
    });
    const answers: Asked[] = [];
    // Past the bound, and a window more of refreshes tried and refused.
    const end = heal.healingSince + HEAL_GRACE_MS + g.config.CACHE_FRESH_MS;
    await waitFor(
      async () => {
        answers.push(await ask(g));
        return Date.now() > end && g.sim.callCount('getProgramAccounts') > 0;
      },
      HEAL_GRACE_MS + 20_000,
      'a window past the bound, refreshes tried',
    );
    // The entry is past its window: its first STALE answer is the API's first read of a status
    // that does not vouch (or of the last one past its `healthyUntil`). Statuses are read one
    // after another and none vouches again here, so no answer after it may be a hit, whatever
    // the load (a bound on how soon the API reads it would be a bound on time).
    const first = answers.findIndex((a) => a.state === 'STALE');
    expect(first).toBeGreaterThanOrEqual(0);
    const asked = answers.slice(first);
    expect(asked.length).toBeGreaterThan(1);
    for (const a of asked) {
      expect(vouches(a.after)).toBe(false);
      expect(a.state).toBe('STALE');
    }
    // The refreshes were tried only once the bound had passed.
    for (const a of answers.filter((x) => x.answeredAt < heal.healingSince + HEAL_GRACE_MS - 100))
      expect(a.scans).toBe(0);
  }, 60_000);
});
