/**
 * `npm run bench`: the gateway side by side with a naive server (the SDK on every request, no
 * cache) and a ceiling (Fastify answering constant JSON), all on loopback, each in its own
 * process, against the RPC simulator in another; prints the tables and writes them to
 * BENCHMARKS.md.
 *
 * Options, how long it takes and what it writes: `npm run bench -- --help` (the spec below).
 * Environment: `REDIS_URL` (redis://127.0.0.1:6379/9). The run's Redis keys are deleted at the end.
 */
import { randomBytes } from 'node:crypto';
import { LOAD_OPTIONS, parseBenchArgs } from './cli.js';
import { domainKey, NAME_PROGRAM_ID, REVERSE_LOOKUP_CLASS, toBase58 } from '../src/core/sns/pda.js';
import {
  HEADER_LEN,
  INLINE_TEXT_BYTES,
  SCAN_SLICE,
  SLICE_AT,
} from '../worker/sns/discovery-decode.js';
import { scanParams } from '../worker/sns/subdomain-discovery.js';
import type { Child } from './lib.js';
import {
  BENCH_REDIS_URL,
  ceilingPath,
  fmt,
  gatewayEnv,
  labelMaker,
  type LoadResult,
  loadSideBySide,
  machine,
  type Scenario,
  scenarioPaths,
  table,
  WARM_PARENT,
  withBenchRun,
  writeSection,
} from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench',
  summary:
    'The gateway, a naive server (the SDK on every request, no cache), a ceiling (constant JSON ' +
    "with the gateway's headers) and bare Fastify side by side on loopback, against the RPC " +
    'simulator: hot and cold derivations, warm /subdomains, a cold burst, a large parent and a ' +
    'huge one followed on the chain. ' +
    'Prints the tables.',
  duration:
    'about 6 to 8 minutes with the defaults: 3 scenarios x 4 servers x (warmup + seconds) of load, ' +
    'plus start-up, the burst, the large parent and the huge one (the SDK takes a minute or more ' +
    'on it); about 3 to 5 minutes with --only large.',
  writes:
    'BENCHMARKS.md, only the part between its bench:results:start and bench:results:end markers.',
  options: {
    seconds: {
      value: 'N',
      default: '10',
      min: 1,
      description: 'seconds of load per server and scenario',
    },
    ...LOAD_OPTIONS,
    big: { value: 'N', default: '10000', min: 1, description: 'subdomains of the large parent' },
    huge: {
      value: 'N',
      default: '100000',
      min: 0,
      description: 'subdomains of the huge parent (0: none), measured with the chain followed',
    },
    only: {
      value: 'PART',
      default: 'all',
      choices: ['all', 'large'],
      description: 'large: only the large and huge parents, printed, BENCHMARKS.md untouched',
    },
  },
});
const SECONDS = Number(flags.seconds);
const SLICE = Number(flags.slice);
const WARMUP = Number(flags.warmup);
const CONNECTIONS = Number(flags.connections);
const BIG = Number(flags.big);
const HUGE = Number(flags.huge);
const ALL = flags.only === 'all';
/** The huge parent's largest reply (about 360 bytes an account, two accounts a subdomain). */
const HUGE_REPLY_BYTES = Math.max(64, Math.ceil((HUGE * 2 * 400) / 2 ** 20)) * 2 ** 20;
const REDIS_URL = BENCH_REDIS_URL;

const log = (line: string) => process.stdout.write(`${line}\n`);

type Json = { s: string; result: unknown };
async function getJson(url: string): Promise<{ status: number; body: Json; cache: string | null }> {
  const res = await fetch(url);
  return {
    status: res.status,
    body: (await res.json()) as Json,
    cache: res.headers.get('x-cache'),
  };
}

/**
 * The naive server's `/subdomains/:parent` and the ms it took. A failed one (the SDK's fetch
 * lost its socket to the simulator under load: "other side closed") is not the SDK's time: it is
 * asked once more, timed anew, and a second failure fails the bench rather than a ratio.
 */
async function timedSdk(
  url: string,
  beforeRetry: () => Promise<unknown> = async () => undefined,
): Promise<{ reply: Awaited<ReturnType<typeof getJson>>; ms: number }> {
  for (let attempt = 1; ; attempt++) {
    const t0 = performance.now();
    const reply = await getJson(url);
    const ms = performance.now() - t0;
    if (reply.status === 200) return { reply, ms };
    const why = `${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`;
    if (attempt === 2) throw new Error(`the SDK's findSubdomains failed twice: ${why}`);
    log(`the SDK's findSubdomains failed after ${fmt.int(ms)} ms (${why}): asked again`);
    await beforeRetry();
  }
}

/** Raw JSON-RPC to the simulator, for the byte counts of candidate slice sizes. */
async function rpc(url: string, method: string, params: unknown[]): Promise<{ text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { text: await res.text() };
}

type CallSummary = { calls: number; byMethod: Record<string, number>; bytes: number };

/**
 * Checks that the ceiling answers with the same bytes on the wire as the gateway: the same status
 * and header names, and as many bytes of header values and body give or take a few (an ETag or a
 * base58 key is a character shorter now and then). Then the two differ only in the work each does
 * per request, which is what the ratio is about.
 *
 * @throws Error when they differ.
 */
async function sameWireShape(gatewayUrl: string, ceilingUrl: string): Promise<void> {
  const shape = async (target: string) => {
    const res = await fetch(target);
    const body = await res.text();
    const headers = [...res.headers].filter(([name]) => name !== 'date');
    return {
      names: `${res.status} ${headers
        .map(([name]) => name)
        .sort()
        .join(' ')}`,
      bytes: Buffer.byteLength(body) + headers.reduce((n, [, value]) => n + value.length, 0),
    };
  };
  const [gateway, ceiling] = await Promise.all([shape(gatewayUrl), shape(ceilingUrl)]);
  if (gateway.names !== ceiling.names || Math.abs(gateway.bytes - ceiling.bytes) > 4) {
    throw new Error(
      `the ceiling's answer differs from the gateway's: ${JSON.stringify({ gateway, ceiling })}`,
    );
  }
}
/**
 * Waits until the simulator has seen no call for half a second: a server may still be answering
 * requests the load generator gave up on, and their RPC calls must not count for what follows.
 */
async function settle(sim: Child): Promise<void> {
  let last = -1;
  for (let i = 0; i < 120; i++) {
    const { calls } = await sim.request<CallSummary>('calls');
    if (calls === last) return;
    last = calls;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

type Row = { scenario: string; server: string; r: LoadResult };

async function main(): Promise<void> {
  const m = machine();
  const started = new Date();
  log(`sns-gateway bench: ${m.cores} cores, ${m.cpu}, Node ${m.node}, load ${m.load}`);
  await withBenchRun(REDIS_URL, async ({ prefix, start }) => {
    const sim = await start('sim');
    const simUrl = sim.info.url as string;
    // The per-parent path: the cold scans are what this bench measures (bench/registry.ts has
    // the registry index's).
    const env = gatewayEnv(REDIS_URL, simUrl, prefix, { SUBDOMAIN_INDEX: 'parents' });
    const api = await start('api', env);
    const worker = await start('worker', env);
    const baseline = await start('baseline', { RPC_URL: simUrl });
    const ceilingServer = await start('ceiling');
    const url = (c: Child) => `http://127.0.0.1:${c.info.port}`;
    const gw = url(api);
    const naive = url(baseline);

    await sameWireShape(`${gw}/record-key-v2/hot1/SOL`, `${url(ceilingServer)}/ceiling/hot1/SOL`);

    const burstLabel = labelMaker(2);
    const burstLabels = Array.from({ length: 50 }, (_, i) => burstLabel(i)).sort();
    await sim.request('addSubdomains', { parent: 'burst', labels: burstLabels });

    const opts = { seconds: SECONDS, warmupSeconds: WARMUP, connections: CONNECTIONS };
    const rows: Row[] = [];
    const report = (scenario: string, server: string, r: LoadResult) => {
      rows.push({ scenario, server, r });
      log(
        `${scenario.padEnd(24)} ${server.padEnd(12)} ${fmt.int(r.rps).padStart(7)} req/s` +
          `  p50 ${fmt.ms(r.p50)} ms  p99 ${fmt.ms(r.p99)} ms` +
          `  ${fmt.int(r.cpuUsPerRequest ?? NaN)} µs CPU/req  failures ${r.failures}`,
      );
    };
    /**
     * Every server of a scenario side by side, in alternating slices: the targets are ratios of
     * the gateway to the ceiling and to the naive server, so all are measured in the same minutes.
     */
    const measure = async (
      scenario: string,
      paths: { ceiling: () => string; app: () => string },
    ) => {
      const bare = () => paths.ceiling().replace(/^\/ceiling\//, '/bare/');
      const [bareResult, ceiling, gateway, naiveResult] = await loadSideBySide(
        [
          { baseUrl: url(ceilingServer), nextPath: bare, server: ceilingServer },
          { baseUrl: url(ceilingServer), nextPath: paths.ceiling, server: ceilingServer },
          { baseUrl: gw, nextPath: paths.app, server: api },
          { baseUrl: naive, nextPath: paths.app, server: baseline },
        ],
        { ...opts, sliceSeconds: SLICE },
      );
      report(scenario, 'bare Fastify', bareResult as LoadResult);
      report(scenario, 'ceiling', ceiling as LoadResult);
      report(scenario, 'gateway', gateway as LoadResult);
      report(scenario, 'naive (SDK)', naiveResult as LoadResult);
    };

    /** Sections 1 to 4: the load scenarios and the cold burst (skipped with `--only large`). */
    const loadPart = async () => {
      // 1. Derivations of 100 hot names; 2. of names never seen before (every request of every
      // server gets a name no server has had); 3. /subdomains of a parent whose entry is cached.
      const measureScenario = async (title: string, scenario: Scenario) => {
        const app = scenarioPaths(scenario);
        await measure(title, { ceiling: () => ceilingPath(app()), app });
      };
      await measureScenario('derivation, 100 hot', 'hot');
      await measureScenario('derivation, cold', 'cold');
      const primed = await getJson(`${gw}/subdomains/${WARM_PARENT}`);
      if (primed.status !== 200)
        throw new Error(`priming /subdomains/${WARM_PARENT}: ${primed.status}`);
      await sameWireShape(
        `${gw}/subdomains/${WARM_PARENT}`,
        `${url(ceilingServer)}/ceiling/${WARM_PARENT}`,
      );
      await measureScenario('/subdomains, warm', 'warm');

      // 4. A cold burst: 100 concurrent requests for one parent nobody asked for yet.
      const burst = async (base: string) => {
        await settle(sim);
        await sim.request('resetCalls');
        const t0 = performance.now();
        const replies = await Promise.all(
          Array.from({ length: 100 }, () => getJson(`${base}/subdomains/burst`)),
        );
        const ms = performance.now() - t0;
        const ok = replies.filter(
          (r) => r.status === 200 && JSON.stringify(r.body.result) === JSON.stringify(burstLabels),
        ).length;
        const calls = await sim.request<CallSummary>('calls');
        return { ms, ok, calls };
      };
      const burstGw = await burst(gw);
      const burstNaive = await burst(naive);
      log(`cold burst: gateway ${fmt.ms(burstGw.ms)} ms, ${burstGw.calls.calls} RPC calls;`);
      log(`            naive ${fmt.ms(burstNaive.ms)} ms, ${burstNaive.calls.calls} RPC calls`);

      return { burstGw, burstNaive };
    };
    const loaded = ALL ? await loadPart() : undefined;

    // 5. A cold parent with BIG subdomains: time to the first answer, calls, bytes, worker stall.
    // Seeded only now: the simulator scans every account on each call, and the naive server's
    // warm /subdomains run above should not pay for accounts it never asks about.
    log(`seeding ${BIG} subdomains under big10k ...`);
    const bigLabels = await sim.request<string[]>('seed', {
      parent: 'big10k',
      count: BIG,
      seed: 1,
    });
    // Warmed first, then settled: what the warm-up leaves to collect is collected before the clock.
    await warmProvider(simUrl, 'big10k');
    await settle(sim);
    await sim.request('resetCalls');
    await worker.request('resetLoop');
    const t0 = performance.now();
    const bigGw = await getJson(`${gw}/subdomains/big10k`);
    const bigGwMs = performance.now() - t0;
    const bigGwCalls = await sim.request<CallSummary>('calls');
    const workerStats = await worker.stats();
    await sim.request('resetCalls');
    const { reply: bigSdk, ms: bigSdkMs } = await timedSdk(`${naive}/subdomains/big10k`, () =>
      sim.request('resetCalls'),
    );
    await settle(sim);
    const bigSdkCalls = await sim.request<CallSummary>('calls');
    const expectedBig = JSON.stringify(bigLabels);
    const bigSame =
      bigGw.status === 200 &&
      JSON.stringify(bigGw.body.result) === expectedBig &&
      JSON.stringify(bigSdk.body.result) === expectedBig;
    log(
      `big parent: gateway ${fmt.ms(bigGwMs)} ms, ${bigGwCalls.byMethod.getProgramAccounts ?? 0}` +
        ` gPA, ${fmt.bytes(bigGwCalls.bytes)}, worker loop max ${fmt.ms(workerStats.loopMaxMs)} ms;` +
        ` SDK ${fmt.ms(bigSdkMs)} ms, ${bigSdkCalls.byMethod.getProgramAccounts ?? 0} gPA,` +
        ` ${fmt.bytes(bigSdkCalls.bytes)}; same labels: ${bigSame}`,
    );

    // 6. The huge parent, with the chain followed: its cold answer, the worker's peak memory,
    // pages of /details against pages of /subdomains, and changes under it.
    const huge =
      HUGE > 0
        ? await hugeParent({ start, sim, prefix, naive, stopFirst: [api, worker] })
        : undefined;
    const hugeRows = huge ? hugeTable(huge) : [];
    const hugeTargets = huge ? hugeVerdicts(huge) : [];
    const bigRatio = bigGwMs / bigSdkMs;
    const bigTargets = [
      [
        `big parent: first answer <= 5% of the SDK’s findSubdomains`,
        `${bigRatio.toFixed(3)}x (${fmt.int(bigGwMs)} vs ${fmt.int(bigSdkMs)} ms)`,
        bigRatio <= 0.05 ? 'met' : '**not met**',
      ],
    ];
    if (!loaded) {
      log(
        `\n${table(['measure', 'gateway', 'SDK / naive'], hugeRows)}\n\n` +
          table(['target', 'measured', 'verdict'], [...bigTargets, ...hugeTargets]),
      );
      return;
    }
    const { burstGw, burstNaive } = loaded;

    // 7. Bytes of the one-call discovery for candidate inline reverse-text sizes.
    const inlineRows = await inlineSizes(simUrl, bigSdkCalls.bytes);

    // Report.
    const rps = (scenario: string, server: string) =>
      rows.find((r) => r.scenario === scenario && r.server === server)?.r.rps ?? NaN;
    const cpu = (scenario: string, server: string) =>
      rows.find((r) => r.scenario === scenario && r.server === server)?.r.cpuUsPerRequest ?? NaN;
    const ratioRows = rows.map(({ scenario, server, r }) => [
      scenario,
      server,
      fmt.int(r.rps),
      fmt.ms(r.p50),
      fmt.ms(r.p99),
      server === 'naive (SDK)' ? '1x' : fmt.ratio(r.rps / rps(scenario, 'naive (SDK)')),
      fmt.pct(r.rps / rps(scenario, 'ceiling')),
      fmt.int(r.cpuUsPerRequest ?? NaN),
      fmt.pct(cpu(scenario, 'ceiling') / (r.cpuUsPerRequest ?? NaN)),
      r.failures,
    ]);
    const hotPct = rps('derivation, 100 hot', 'gateway') / rps('derivation, 100 hot', 'ceiling');
    const coldX = rps('derivation, cold', 'gateway') / rps('derivation, cold', 'naive (SDK)');
    const coldPct = rps('derivation, cold', 'gateway') / rps('derivation, cold', 'ceiling');
    const warmPct = rps('/subdomains, warm', 'gateway') / rps('/subdomains, warm', 'ceiling');
    const warmX = rps('/subdomains, warm', 'gateway') / rps('/subdomains, warm', 'naive (SDK)');
    const gpa = bigGwCalls.byMethod.getProgramAccounts ?? 0;
    const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
    const targets = [
      ['hot derivations >= 95% of ceiling', fmt.pct(hotPct), verdict(hotPct >= 0.95)],
      ['cold derivations >= 60% of ceiling', fmt.pct(coldPct), verdict(coldPct >= 0.6)],
      ['cold derivations >= 5x naive', fmt.ratio(coldX), verdict(coldX >= 5)],
      ['warm /subdomains >= 95% of ceiling', fmt.pct(warmPct), verdict(warmPct >= 0.95)],
      ['warm /subdomains >= 40x naive', fmt.ratio(warmX), verdict(warmX >= 40)],
      ['big parent: one getProgramAccounts per refresh', String(gpa), verdict(gpa === 1)],
      [
        'big parent: bytes <= the SDK’s',
        `${fmt.bytes(bigGwCalls.bytes)} vs ${fmt.bytes(bigSdkCalls.bytes)}`,
        verdict(bigGwCalls.bytes <= bigSdkCalls.bytes),
      ],
      ...bigTargets,
      [
        'big parent: worker event-loop stall < 100 ms',
        `${fmt.ms(workerStats.loopMaxMs)} ms`,
        verdict(workerStats.loopMaxMs < 100),
      ],
    ];
    const mAfter = machine();
    const md = [
      `## Results (${started.toISOString().slice(0, 10)})`,
      '',
      `Machine: ${m.cores} cores (\`nproc\`), ${m.cpu}, Node ${m.node}. Load average at start` +
        ` ${m.load}, at end ${mAfter.load} (a shared machine: other work ran alongside).`,
      `Run: \`npm run bench -- --seconds ${SECONDS} --slice ${SLICE} --warmup ${WARMUP} --connections` +
        ` ${CONNECTIONS} --big ${BIG} --huge ${HUGE}\`; autocannon ${CONNECTIONS} connections, one process per` +
        ' server, all on loopback, the load generator in its own process.',
      '',
      '### Throughput and latency',
      '',
      table(
        [
          'scenario',
          'server',
          'req/s',
          'p50 ms',
          'p99 ms',
          'req/s vs naive',
          'req/s of ceiling',
          'server CPU µs/req',
          'ceiling CPU / this CPU',
          'failures',
        ],
        ratioRows,
      ),
      '',
      '- gateway: the API process (src/api/runtime.ts) with its defaults (`LOG_LEVEL=info`, no' +
        ' access log). The four servers of a scenario ran side by side, in alternating slices of' +
        ` ${SLICE} s.`,
      '- naive (SDK): Fastify calling `getRecordV2Key` / `findSubdomains` (web3.js `Connection`)' +
        ' on every request. ceiling: Fastify (no logger, no hooks) answering a constant: the same' +
        ' status, header names and byte counts as the gateway (checked before the run), so the two' +
        ' differ only in the work per request. bare Fastify: the same constant bodies with' +
        " Fastify's own headers only (no CORS, cache or ETag headers).",
      '',
      '### Cold bursts and the large parent',
      '',
      table(
        ['measure', 'gateway', 'SDK / naive'],
        [
          [
            '100 concurrent cold requests, one parent: all answered after',
            `${fmt.int(burstGw.ms)} ms (${burstGw.ok}/100 right)`,
            `${fmt.int(burstNaive.ms)} ms (${burstNaive.ok}/100 right)`,
          ],
          ['… RPC calls made', burstGw.calls.calls, burstNaive.calls.calls],
          [
            `parent with ${fmt.int(BIG)} subdomains: time to first answer`,
            `${fmt.int(bigGwMs)} ms`,
            `${fmt.int(bigSdkMs)} ms (findSubdomains)`,
          ],
          ['… getProgramAccounts calls', gpa, bigSdkCalls.byMethod.getProgramAccounts ?? 0],
          [
            '… other RPC calls',
            bigGwCalls.calls - gpa,
            bigSdkCalls.calls - (bigSdkCalls.byMethod.getProgramAccounts ?? 0),
          ],
          ['… response bytes', fmt.bytes(bigGwCalls.bytes), fmt.bytes(bigSdkCalls.bytes)],
          ['… worker max event-loop delay', `${fmt.ms(workerStats.loopMaxMs)} ms`, '—'],
          ['… same labels as the seeded ones', String(bigSame), String(bigSame)],
          ...hugeRows,
        ],
      ),
      '',
      `### Inline reverse-text bytes (\`INLINE_TEXT_BYTES\`, ${INLINE_TEXT_BYTES})`,
      '',
      'Bytes of one refresh of the large parent for each candidate size: the getProgramAccounts' +
        ' reply, plus the getMultipleAccounts calls for reverse texts longer than the slice.' +
        ' Labels: 90% of 4 to 19 characters, 8% of 18 to 29, 2% of 28 to 67.',
      '',
      table(
        ['inline bytes', 'slice', 'getProgramAccounts', 'getMultipleAccounts', 'total', 'of SDK'],
        inlineRows,
      ),
      '',
      '### Targets',
      '',
      table(['target', 'measured', 'verdict'], [...targets, ...hugeTargets]),
    ].join('\n');
    log(`\n${md}\n`);
    await writeSection('results', md);
  });
}

/** The huge parent's name. */
const HUGE_PARENT = 'huge100k';
/** How long a change under the huge parent may take to show before the bench gives up on it. */
const CHANGE_WAIT_MS = 10_000;

type HugeResult = {
  gatewayMs: number;
  sdkMs: number;
  same: boolean;
  gpa: number;
  bytes: number;
  workerMaxRss: number;
  workerLoopMaxMs: number;
  pages: { subdomains: LoadResult; details: LoadResult };
  /** Ms until each change showed, or undefined when it did not within {@link CHANGE_WAIT_MS}. */
  changes: { add?: number; transfer?: number; delete?: number };
};

/**
 * The huge parent: seeded now, answered by an API and a worker started for it (the first pair
 * stopped) that follow the chain on the simulator's websocket, with a reply bound its
 * getProgramAccounts fits in; then the SDK's `findSubdomains` of it, pages of `/details` and
 * `/subdomains` side by side, and a subdomain added, transferred and deleted under it.
 */
async function hugeParent(ctx: {
  start: (...args: Parameters<typeof Child.start>) => Promise<Child>;
  sim: Child;
  prefix: string;
  naive: string;
  stopFirst: Child[];
}): Promise<HugeResult> {
  const { sim } = ctx;
  log(`seeding ${HUGE} subdomains under ${HUGE_PARENT} ...`);
  const labels = await sim.request<string[]>('seed', { parent: HUGE_PARENT, count: HUGE, seed: 3 });
  for (const child of ctx.stopFirst) await child.stop();
  const env = gatewayEnv(REDIS_URL, sim.info.url as string, ctx.prefix, {
    SUBDOMAIN_INDEX: 'parents',
    RPC_WS: 'on',
    RPC_WS_URL: sim.info.wsUrl as string,
    RPC_MAX_RESPONSE_BYTES: String(HUGE_REPLY_BYTES),
  });
  const api = await ctx.start('api', env);
  const worker = await ctx.start('worker', env);
  const gw = `http://127.0.0.1:${api.info.port}`;
  await warmProvider(sim.info.url as string, HUGE_PARENT);
  await settle(sim);
  await sim.request('resetCalls');
  const t0 = performance.now();
  const cold = await getJson(`${gw}/subdomains/${HUGE_PARENT}`);
  const gatewayMs = performance.now() - t0;
  const calls = await sim.request<CallSummary>('calls');
  const stats = await worker.stats();
  log(`huge parent: gateway ${fmt.int(gatewayMs)} ms (${cold.status}); asking the SDK ...`);
  const { reply: sdk, ms: sdkMs } = await timedSdk(`${ctx.naive}/subdomains/${HUGE_PARENT}`);
  const expected = JSON.stringify(labels);
  const same =
    cold.status === 200 &&
    JSON.stringify(cold.body.result) === expected &&
    JSON.stringify(sdk.body.result) === expected;
  log(`huge parent: SDK ${fmt.int(sdkMs)} ms; same labels: ${same}`);

  // Pages from a random label on: the view of /details is built on its first request.
  const primed = await getJson(`${gw}/subdomains/${HUGE_PARENT}/details?limit=1`);
  if (primed.status !== 200) throw new Error(`priming /details: ${primed.status}`);
  const page = (path: string) => () =>
    `${path}?limit=100&after=${encodeURIComponent(labels[Math.floor(Math.random() * labels.length)] as string)}`;
  const [subdomains, details] = (await loadSideBySide(
    [
      { baseUrl: gw, nextPath: page(`/subdomains/${HUGE_PARENT}`), server: api },
      { baseUrl: gw, nextPath: page(`/subdomains/${HUGE_PARENT}/details`), server: api },
    ],
    {
      seconds: SECONDS,
      warmupSeconds: WARMUP,
      connections: CONNECTIONS,
      sliceSeconds: SLICE,
    },
  )) as [LoadResult, LoadResult];

  // Changes: each timed from the simulator's transaction to the first answer showing it.
  const shows = async (path: string, done: (body: Json) => boolean) => {
    const from = performance.now();
    while (performance.now() - from < CHANGE_WAIT_MS) {
      const got = await getJson(`${gw}${path}`);
      if (got.status === 200 && done(got.body)) return performance.now() - from;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return undefined;
  };
  const fresh = `zz-added-${Date.now().toString(36)}`;
  const listsIt = (body: Json) => (body.result as string[]).includes(fresh);
  const prefixed = `/subdomains/${HUGE_PARENT}?prefix=${fresh}`;
  await sim.request('addSubdomains', { parent: HUGE_PARENT, labels: [fresh] });
  const add = await shows(prefixed, listsIt);
  const moved = labels[Math.floor(labels.length / 2)] as string;
  const owner = toBase58(randomBytes(32));
  await sim.request('transferSubdomain', { parent: HUGE_PARENT, label: moved, owner });
  const transfer = await shows(
    `/subdomains/${HUGE_PARENT}/details?prefix=${encodeURIComponent(moved)}`,
    (body) =>
      (body.result as Array<{ label: string; owner: string }>).some(
        (row) => row.label === moved && row.owner === owner,
      ),
  );
  await sim.request('deleteSubdomain', { parent: HUGE_PARENT, label: fresh });
  const deleted = await shows(prefixed, (body) => !listsIt(body));
  const changes = { add, transfer, delete: deleted };
  log(`huge parent: changes shown after ${JSON.stringify(changes)} ms`);
  return {
    gatewayMs,
    sdkMs,
    same,
    gpa: calls.byMethod.getProgramAccounts ?? 0,
    bytes: calls.bytes,
    workerMaxRss: stats.maxRss,
    workerLoopMaxMs: stats.loopMaxMs,
    pages: { subdomains, details },
    changes,
  };
}

const MiB = 2 ** 20;
const shown = (ms: number | undefined) =>
  ms === undefined ? `not within ${CHANGE_WAIT_MS / 1000} s` : `${fmt.int(ms)} ms`;

/** The huge parent's rows of the large-parent table. */
function hugeTable(h: HugeResult): Array<Array<string | number>> {
  return [
    [
      `parent with ${fmt.int(HUGE)} subdomains (chain followed): time to first answer`,
      `${fmt.int(h.gatewayMs)} ms`,
      `${fmt.int(h.sdkMs)} ms (findSubdomains)`,
    ],
    ['… getProgramAccounts calls, response bytes', `${h.gpa}, ${fmt.bytes(h.bytes)}`, '—'],
    [
      '… worker peak RSS (started for this parent, through its scan)',
      `${fmt.int(h.workerMaxRss / MiB)} MiB`,
      '—',
    ],
    ['… worker max event-loop delay', `${fmt.ms(h.workerLoopMaxMs)} ms`, '—'],
    ['… same labels as the seeded ones', String(h.same), String(h.same)],
    [
      '… pages of 100 from a random label, req/s: /subdomains, /details',
      `${fmt.int(h.pages.subdomains.rps)}, ${fmt.int(h.pages.details.rps)}`,
      '—',
    ],
    [
      '… a change shown after: add, transfer, delete',
      `${shown(h.changes.add)}, ${shown(h.changes.transfer)}, ${shown(h.changes.delete)}`,
      '—',
    ],
  ];
}

/** The huge parent's targets. */
function hugeVerdicts(h: HugeResult): string[][] {
  const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
  const ratio = h.gatewayMs / h.sdkMs;
  const pages = h.pages.details.rps / h.pages.subdomains.rps;
  const slowest = Math.max(...Object.values(h.changes).map((ms) => ms ?? Infinity));
  return [
    [
      'huge parent: first answer <= 5% of the SDK’s findSubdomains',
      `${ratio.toFixed(3)}x (${fmt.int(h.gatewayMs)} vs ${fmt.int(h.sdkMs)} ms)`,
      verdict(ratio <= 0.05 && h.same),
    ],
    [
      'huge parent: worker peak RSS <= 512 MiB',
      `${fmt.int(h.workerMaxRss / MiB)} MiB`,
      verdict(h.workerMaxRss <= 512 * MiB),
    ],
    [
      'huge parent: /details pages >= 0.5x /subdomains pages',
      `${pages.toFixed(2)}x`,
      verdict(pages >= 0.5),
    ],
    [
      'huge parent: add, transfer, delete each shown <= 2 s',
      Number.isFinite(slowest) ? `slowest ${fmt.int(slowest)} ms` : 'one not shown',
      verdict(slowest <= 2_000),
    ],
  ];
}

/**
 * One scan of `parent` on the simulator, unmeasured, before either side is timed. The simulator
 * stands for a provider that has served for days; its first large reply pays for compiling its
 * own code and growing its heap, and the gateway, asked first, used to pay that for the SDK.
 */
async function warmProvider(simUrl: string, parent: string): Promise<void> {
  await rpc(simUrl, 'getProgramAccounts', scanParams(domainKey(parent)));
}

/** The discovery's bytes for each candidate inline size, on the large parent. */
async function inlineSizes(simUrl: string, sdkBytes: number): Promise<string[][]> {
  const parentKey = domainKey('big10k');
  const rows: string[][] = [];
  for (const inline of [0, 8, 12, 16, 20, 24, 27, 28, 30, 32, 33, 44, 60]) {
    const slice = SCAN_SLICE.length - INLINE_TEXT_BYTES + inline;
    const gpa = await rpc(simUrl, 'getProgramAccounts', [
      toBase58(NAME_PROGRAM_ID),
      {
        encoding: 'base64',
        withContext: true,
        filters: [{ memcmp: { offset: 0, bytes: toBase58(parentKey) } }],
        dataSlice: { offset: SCAN_SLICE.offset, length: slice },
      },
    ]);
    const accounts = (
      JSON.parse(gpa.text) as {
        result: { value: Array<{ pubkey: string; account: { data: [string, string] } }> };
      }
    ).result.value;
    const truncated: string[] = [];
    for (const { pubkey, account } of accounts) {
      const data = Buffer.from(account.data[0], 'base64');
      if (!data.subarray(SLICE_AT.class, SLICE_AT.data).equals(REVERSE_LOOKUP_CLASS)) continue;
      if (data.length === slice && data.readUInt32LE(SLICE_AT.data) > inline)
        truncated.push(pubkey);
    }
    let gmaBytes = 0;
    let gmaCalls = 0;
    for (let i = 0; i < truncated.length; i += 100) {
      const reply = await rpc(simUrl, 'getMultipleAccounts', [
        truncated.slice(i, i + 100),
        { encoding: 'base64', dataSlice: { offset: HEADER_LEN, length: 2 ** 20 } },
      ]);
      gmaBytes += Buffer.byteLength(reply.text);
      gmaCalls++;
    }
    const gpaBytes = Buffer.byteLength(gpa.text);
    const total = gpaBytes + gmaBytes;
    rows.push([
      inline === INLINE_TEXT_BYTES ? `**${inline}** (chosen)` : String(inline),
      `${slice} B`,
      fmt.bytes(gpaBytes),
      `${gmaCalls} calls, ${fmt.bytes(gmaBytes)}`,
      fmt.bytes(total),
      fmt.pct(total / sdkBytes),
    ]);
  }
  return rows;
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
});
