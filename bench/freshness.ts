/**
 * `npm run bench:freshness`: how the gateway keeps hot parents fresh by following the chain
 * (worker/follow: one programSubscribe over the whole name program, routed to the followed
 * parents, and logsSubscribe for deletions) against the clock (`RPC_WS=off`:
 * worker/hot-parent-scan.ts, a getProgramAccounts per parent per window). The API and the
 * worker run in child processes (bench/child.ts) against the RPC simulator in this process, whose
 * HTTP reads lag its websocket node (`httpLagMs`), while every hot parent is requested several
 * times a second throughout. Both processes run with `SUBDOMAIN_INDEX=parents`, as bench/run.ts's
 * do, so the answers measured are the followed parents' own entries: under the default
 * (`registry`) they would come from the registry index of the simulator's small chain, which
 * `npm run bench:registry` measures. Measures, with the websocket and then without it:
 *
 * 1. RPC credits per hot parent per freshness window on a quiet chain (the worker's
 *    `sns_rpc_credits_total` on its /metrics, by method);
 * 2. a subdomain created under five parents at once: time until the API's answers for all five
 *    show it, and answers without it after that (regressions, must be 0);
 * 3. a subdomain deleted under five parents: time until gone from all five;
 * 4. (websocket only) the provider drops every websocket, then subdomains are created under five
 *    parents: time until shown in all five.
 *
 * Options, how long it takes and what it writes: `npm run bench:freshness -- --help`.
 * Environment: `REDIS_URL` (redis://127.0.0.1:6379/9). The run's Redis keys are deleted at the end.
 */
import { SimChain, startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { parseBenchArgs } from './cli.js';
import {
  BENCH_REDIS_URL,
  type BenchRun,
  type Child,
  codeUnderTest,
  creditTotal,
  fmtSeconds,
  gatewayEnv,
  machine,
  table,
  withBenchRun,
  workerCredits,
  workerMetricsText,
  met,
  writeSection,
} from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench:freshness',
  summary:
    'Hot parents under steady traffic, followed on the chain (one programSubscribe over the name ' +
    'program, logsSubscribe for deletions) and then by the clock (RPC_WS=off), their own entries ' +
    'answering (SUBDOMAIN_INDEX=parents), against the RPC simulator with its HTTP reads ' +
    'lagging its websocket: RPC credits per parent per freshness window on a quiet chain, and ' +
    'how long a subdomain created or deleted under five parents (and created right after the ' +
    'provider dropped every websocket) takes to show in the API. Prints the tables.',
  duration:
    'about 3.5 minutes with the defaults: per mode, start-up, a window of warm-up and --windows ' +
    'quiet windows, then the creations and deletions; at most about 6 minutes when changes do ' +
    'not show (each wait ends after two windows of --fresh and 10 s).',
  writes: 'the "freshness" section of BENCHMARKS.md, nothing else.',
  options: {
    windows: { value: 'N', default: '3', min: 1, description: 'quiet windows measured per mode' },
    fresh: {
      value: 'N',
      default: '15',
      min: 3,
      description: 'CACHE_FRESH_SECONDS, the freshness window in seconds',
    },
    lag: {
      value: 'N',
      default: '500',
      min: 0,
      description: "milliseconds the simulator's HTTP reads lag its websocket node",
    },
    parents: { value: 'N', default: '20', min: 5, description: 'hot parents' },
  },
});
const WINDOWS = Number(flags.windows);
const FRESH_S = Number(flags.fresh);
const FRESH_MS = FRESH_S * 1000;
const LAG_MS = Number(flags.lag);
const PARENTS = Math.floor(Number(flags.parents));
const REDIS_URL = BENCH_REDIS_URL;

/** Requests per second to each hot parent, all through the run. */
const TRAFFIC_PER_SECOND = 4;
/** How often each observed parent is asked while a change is awaited. */
const POLL_MS = 50;
/** How long answers are still checked after a change showed in all five parents. */
const HOLD_MS = 10_000;
/** Parents changed at once in each measurement. */
const FIVE = 5;
/** Credits per hot parent per window of the clock-driven refreshes, measured before the websocket. */
const CLOCK_BASELINE_CREDITS = 10.8;
const TARGETS = { credits: 1.5, createMs: 2_000, deleteMs: FRESH_MS, afterDropMs: 7_000 };

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The hot parents, each with 3 to 5 subdomains `sub0`… */
const parents = Array.from({ length: PARENTS }, (_, i) => `freshbench${i}`);
const subdomainCount = (i: number) => 3 + (i % 3);

/** Five parents from the `offset`-th on (wrapping), a different group per measurement. */
const five = (offset: number) =>
  Array.from({ length: FIVE }, (_, i) => parents[(offset + i) % PARENTS] as string);

/** The labels the API answers for `parent`, or undefined for an answer that is not a 200. */
async function labelsOf(base: string, parent: string): Promise<string[] | undefined> {
  try {
    const res = await fetch(`${base}/subdomains/${parent}`, {
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await res.json()) as { result?: unknown };
    return res.status === 200 && Array.isArray(body.result) ? (body.result as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Requests every hot parent {@link TRAFFIC_PER_SECOND} times a second until stopped (a round is
 * skipped when the previous one is still under way), so the parents stay the hottest.
 */
function steadyTraffic(base: string): {
  stop: () => Promise<{ requests: number; failed: number }>;
} {
  let stopped = false;
  let requests = 0;
  let failed = 0;
  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      const answers = await Promise.all(parents.map((p) => labelsOf(base, p)));
      requests += answers.length;
      failed += answers.filter((a) => a === undefined).length;
      await sleep(Math.max(0, 1000 / TRAFFIC_PER_SECOND - (performance.now() - started)));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return { requests, failed };
    },
  };
}

/** A gauge or counter of the worker's /metrics, summed over its labels. */
async function metric(worker: Child, name: string): Promise<number> {
  let sum = 0;
  for (const line of (await workerMetricsText(worker)).split('\n')) {
    const m = /^(\w+)(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (m?.[1] === name) sum += Number(m[2]);
  }
  return sum;
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(200);
  }
}

/** What {@link observe} saw: when the change showed in every parent, and answers after it. */
type Observed = {
  /** Milliseconds from the change until the last of the parents first answered with it. */
  allMs: number | undefined;
  /** Answers without the change after that parent had shown it. */
  regressions: number;
  /** Answers that were not a 200. */
  failed: number;
  polls: number;
};

/**
 * Asks each of `observed` every {@link POLL_MS} ms, from `t0` (performance.now() of the change)
 * until every parent has answered with the change and `holdMs` more have passed, or `timeoutMs`.
 */
async function observe(
  base: string,
  observed: string[],
  shows: (labels: string[]) => boolean,
  t0: number,
  timeoutMs: number,
  holdMs: number,
): Promise<Observed> {
  const firstShown = new Map<string, number>();
  let regressions = 0;
  let failed = 0;
  let polls = 0;
  let allAt: number | undefined;
  const done = () =>
    allAt !== undefined ? performance.now() >= allAt + holdMs : performance.now() - t0 >= timeoutMs;
  await Promise.all(
    observed.map(async (parent) => {
      while (!done()) {
        const asked = performance.now();
        const labels = await labelsOf(base, parent);
        polls++;
        if (!labels) failed++;
        else if (shows(labels)) {
          if (!firstShown.has(parent)) {
            firstShown.set(parent, performance.now() - t0);
            if (firstShown.size === observed.length) allAt ??= performance.now();
          }
        } else if (firstShown.has(parent)) regressions++;
        await sleep(Math.max(0, POLL_MS - (performance.now() - asked)));
      }
    }),
  );
  return {
    allMs: firstShown.size === observed.length ? Math.max(...firstShown.values()) : undefined,
    regressions,
    failed,
    polls,
  };
}

/** What one mode (websocket on or off) measured. */
type ModeResult = {
  /** Credits per hot parent per window on the quiet chain, by method (`total` for the sum). */
  credits: Map<string, number>;
  /** Calls the simulator's HTTP side got during the quiet windows, by method. */
  simCalls: Map<string, number>;
  create: Observed;
  remove: Observed;
  afterDrop?: Observed & {
    resubscribedMs: number | undefined;
    /**
     * Credits per parent from the drop to the end of that measurement: the gap's reads, and any
     * hot entry past its window read again while the stream vouched for nothing (none while the
     * heal vouches within `HEAL_GRACE_MS`: docs/design.md, "Waiting for a heal").
     */
    creditsPerParent: number;
  };
  traffic: { requests: number; failed: number };
};

/**
 * One mode: the worker and the API started under the run's prefix, traffic on every parent, a
 * window of warm-up once the parents are followed (or cached), then the measurements.
 */
async function measureMode(run: BenchRun, sim: RpcSimulator, ws: boolean): Promise<ModeResult> {
  const mode = ws ? 'websocket on' : 'RPC_WS=off';
  const env = gatewayEnv(REDIS_URL, sim.url, run.prefix, {
    CACHE_FRESH_SECONDS: String(FRESH_S),
    CACHE_STALE_SECONDS: String(Math.max(FRESH_S, 3600)),
    HOT_KEYS_TOP_N: String(Math.max(20, PARENTS)),
    RPC_WS: ws ? 'on' : 'off',
    ...(ws ? { RPC_WS_URL: sim.wsUrl } : {}),
    // All the bench's requests come from one address: cold misses must not be refused, and that
    // one client must be enough to make a parent hot.
    COLD_MISS_LIMIT: '1000000',
    HOT_KEYS_MIN_CLIENTS: '1',
    SUBDOMAINS_WAIT_MS: '15000',
    // The followed parents' own entries answer, as the bench's title says; the registry index,
    // which the default would build and answer from, is bench/registry.ts's to measure.
    SUBDOMAIN_INDEX: 'parents',
  });
  const worker = await run.start('worker', env);
  const api = await run.start('api', env);
  const base = `http://127.0.0.1:${api.info.port}`;
  const traffic = steadyTraffic(base);
  try {
    const warmStarted = Date.now();
    await waitFor(
      'every parent answered',
      async () => (await Promise.all(parents.map((p) => labelsOf(base, p)))).every(Boolean),
      60_000,
    );
    if (ws) {
      // The worker follows the whole name program with one programSubscribe, not one per parent.
      await waitFor(
        'the name program followed and every parent watched',
        async () =>
          sim.wsSubscriptions('program').length > 0 &&
          (await metric(worker, 'sns_watched_parents')) >= PARENTS,
        60_000,
      );
    }
    log(
      `${mode}: parents answered${ws ? ' and watched' : ''} after ${Date.now() - warmStarted} ms`,
    );
    // A window of warm-up: the first clock refreshes are over, and the first backstop checks fall
    // in the quiet windows.
    await sleep(FRESH_MS);

    // 1. Quiet chain.
    const before = await workerCredits(worker);
    sim.resetCalls();
    await sleep(WINDOWS * FRESH_MS);
    const after = await workerCredits(worker);
    const simCalls = new Map<string, number>();
    for (const call of sim.calls) simCalls.set(call.method, (simCalls.get(call.method) ?? 0) + 1);
    const perParentWindow = new Map<string, number>();
    let total = 0;
    for (const [method, value] of after) {
      const spent = value - (before.get(method) ?? 0);
      total += spent;
      if (spent > 0) perParentWindow.set(method, spent / PARENTS / WINDOWS);
    }
    perParentWindow.set('total', total / PARENTS / WINDOWS);
    log(
      `${mode}: quiet chain, ${WINDOWS} windows: ${(total / PARENTS / WINDOWS).toFixed(2)} credits per parent per window ` +
        `(${[...perParentWindow].map(([m, c]) => `${m} ${c.toFixed(2)}`).join(', ')})`,
    );

    // 2. A subdomain created under five parents at once.
    const created = five(0);
    const label = ws ? 'createdon' : 'createdoff';
    let t0 = performance.now();
    for (const p of created) sim.chain.addSubdomain(p, label);
    const create = await observe(
      base,
      created,
      (l) => l.includes(label),
      t0,
      2 * FRESH_MS + 10_000,
      HOLD_MS,
    );
    log(`${mode}: created under five: ${describe(create)}`);

    // 3. A subdomain deleted under five parents at once.
    const deleted = five(FIVE);
    t0 = performance.now();
    // Each mode deletes a label of its own: the chain is shared, and a label deleted in the first
    // would be gone already in the second.
    const gone = ws ? 'sub0' : 'sub1';
    for (const p of deleted) {
      if (!sim.chain.deleteSubdomain(p, gone)) throw new Error(`${gone}.${p} was not on the chain`);
    }
    const remove = await observe(
      base,
      deleted,
      (l) => !l.includes(gone),
      t0,
      2 * FRESH_MS + 10_000,
      HOLD_MS / 2,
    );
    log(`${mode}: deleted under five: ${describe(remove)}`);

    // 4. Every websocket dropped by the provider, then a subdomain created under five parents.
    let afterDrop: ModeResult['afterDrop'];
    if (ws) {
      const dropped = five(2 * FIVE);
      const dropLabel = 'afterdrop';
      const accepted = sim.wsStats().accepted;
      // Back when a new socket holds as many subscriptions as the dropped ones did.
      const subscriptions = sim.wsSubscriptions().length;
      const creditsBefore = creditTotal(await workerCredits(worker));
      t0 = performance.now();
      const sockets = sim.dropSockets();
      for (const p of dropped) sim.chain.addSubdomain(p, dropLabel);
      let resubscribedMs: number | undefined;
      const resubscribed = (async () => {
        while (performance.now() - t0 < 2 * FRESH_MS) {
          if (sim.wsStats().accepted > accepted && sim.wsSubscriptions().length >= subscriptions) {
            resubscribedMs = performance.now() - t0;
            return;
          }
          await sleep(POLL_MS);
        }
      })();
      const seen = await observe(
        base,
        dropped,
        (l) => l.includes(dropLabel),
        t0,
        2 * FRESH_MS + 10_000,
        HOLD_MS / 2,
      );
      await resubscribed;
      const creditsPerParent = (creditTotal(await workerCredits(worker)) - creditsBefore) / PARENTS;
      afterDrop = { ...seen, resubscribedMs, creditsPerParent };
      log(
        `${mode}: ${sockets} websocket(s) dropped, created under five: ${describe(seen)}; ` +
          `subscribed again after ${fmtSeconds(resubscribedMs)}, ` +
          `${creditsPerParent.toFixed(2)} credits per parent spent meanwhile`,
      );
    }
    const counted = await traffic.stop();
    log(`${mode}: steady traffic ${counted.requests} requests, ${counted.failed} not answered 200`);
    return { credits: perParentWindow, simCalls, create, remove, afterDrop, traffic: counted };
  } finally {
    await traffic.stop();
  }
}

function describe(o: Observed): string {
  return `all five after ${fmtSeconds(o.allMs)}, ${o.regressions} regressions, ${o.failed} failed of ${o.polls} polls`;
}

async function main(): Promise<void> {
  const m = machine();
  const started = new Date();
  log(
    `bench:freshness: ${PARENTS} parents, CACHE_FRESH_SECONDS=${FRESH_S}, HTTP lag ${LAG_MS} ms, ` +
      `${WINDOWS} quiet windows; ${m.cores} cores, ${m.cpu}, Node ${m.node}, load ${m.load}`,
  );
  const chain = new SimChain();
  parents.forEach((p, i) => {
    for (let k = 0; k < subdomainCount(i); k++) chain.addSubdomain(p, `sub${k}`);
  });
  const sim = await startRpcSimulator({ chain, httpLagMs: LAG_MS });
  let on: ModeResult;
  let off: ModeResult;
  try {
    on = await withBenchRun(REDIS_URL, (run) => measureMode(run, sim, true));
    off = await withBenchRun(REDIS_URL, (run) => measureMode(run, sim, false));
  } finally {
    await sim.close();
  }
  const took = (Date.now() - started.getTime()) / 1000;
  const markdown = report(m, started, took, on, off);
  log(`\n${markdown}`);
  await writeSection('freshness', markdown);
  log(`\nwrote the freshness section of BENCHMARKS.md (${took.toFixed(0)} s)`);
}

const seconds = (o: Observed | undefined) => (o ? fmtSeconds(o.allMs) : '—');

function report(
  m: ReturnType<typeof machine>,
  started: Date,
  took: number,
  on: ModeResult,
  off: ModeResult,
): string {
  const creditsOn = on.credits.get('total') ?? 0;
  const creditsOff = off.credits.get('total') ?? 0;
  const within = (o: Observed | undefined, ms: number) => o?.allMs !== undefined && o.allMs <= ms;
  const targets = table(
    ['measure', 'target', 'websocket on', 'met', 'clock-driven (`RPC_WS=off`)'],
    [
      [
        `RPC credits per hot parent per window, quiet chain (${WINDOWS} windows)`,
        `≤ ${TARGETS.credits} (clock's baseline ~${CLOCK_BASELINE_CREDITS})`,
        creditsOn.toFixed(2),
        met(creditsOn <= TARGETS.credits),
        creditsOff.toFixed(2),
      ],
      [
        'subdomain created under 5 parents: shown by all five',
        `≤ ${TARGETS.createMs / 1000} s`,
        seconds(on.create),
        met(within(on.create, TARGETS.createMs)),
        seconds(off.create),
      ],
      [
        `answers without it after it showed (${HOLD_MS / 1000} s of polls every ${POLL_MS} ms)`,
        '0',
        `${on.create.regressions} of ${on.create.polls}`,
        met(on.create.regressions === 0),
        `${off.create.regressions} of ${off.create.polls}`,
      ],
      [
        'subdomain deleted under 5 parents: gone from all five',
        `≤ ${TARGETS.deleteMs / 1000} s (a window)`,
        seconds(on.remove),
        met(within(on.remove, TARGETS.deleteMs)),
        seconds(off.remove),
      ],
      [
        'every websocket dropped, then created under 5 parents: shown by all five',
        `≤ ${TARGETS.afterDropMs / 1000} s`,
        seconds(on.afterDrop),
        met(within(on.afterDrop, TARGETS.afterDropMs)),
        '—',
      ],
    ],
  );
  const methods = [...new Set([...on.credits.keys(), ...off.credits.keys()])]
    .filter((k) => k !== 'total')
    .sort();
  const simMethods = [...new Set([...on.simCalls.keys(), ...off.simCalls.keys()])].sort();
  const per = (r: ModeResult, k: string) => (r.credits.get(k) ?? 0).toFixed(2);
  const breakdown = table(
    ['method', 'credits/parent/window, websocket on', 'clock-driven'],
    [
      ...methods.map((k) => [`\`${k}\``, per(on, k), per(off, k)]),
      ['total', per(on, 'total'), per(off, 'total')],
    ],
  );
  const calls = simMethods
    .map((k) => `\`${k}\` ${on.simCalls.get(k) ?? 0} / ${off.simCalls.get(k) ?? 0}`)
    .join(', ');
  const regressions = [on.remove, on.afterDrop, off.create, off.remove]
    .filter((o): o is Observed => o !== undefined)
    .reduce((n, o) => n + o.regressions, 0);
  const traffic = (r: ModeResult) => `${r.traffic.failed} of ${r.traffic.requests}`;
  return [
    `Run ${started.toISOString()} at commit ${codeUnderTest()} on ${m.cores} cores (${m.cpu}), Node ${m.node}, load ${m.load}; ` +
      `${PARENTS} hot parents of 3 to 5 subdomains, each requested ${TRAFFIC_PER_SECOND} times a second, ` +
      `\`CACHE_FRESH_SECONDS=${FRESH_S}\`, the simulator's HTTP reads ${LAG_MS} ms behind its ` +
      "websocket node, `SUBDOMAIN_INDEX=parents` (the followed parents' own entries answer), " +
      `other settings default; ${took.toFixed(0)} s in all.`,
    '',
    targets,
    '',
    breakdown,
    '',
    `HTTP calls the simulator got during the quiet windows (websocket on / off): ${calls || 'none'}. ` +
      `Answers that lost a change they had shown in the other measurements: ${regressions}. ` +
      `Steady-traffic requests not answered 200 (websocket on / off): ${traffic(on)} / ${traffic(off)}.` +
      (on.afterDrop
        ? ` After the drop the worker was subscribed again in ${fmtSeconds(on.afterDrop.resubscribedMs)}; ` +
          `the reads of the gap and the checks until the end of that measurement cost ` +
          `${on.afterDrop.creditsPerParent.toFixed(2)} credits per parent.`
        : ''),
  ].join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench:freshness failed: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
