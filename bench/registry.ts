/**
 * `npm run bench:registry`: the gateway over a whole registry, as a wallet's backend meets it.
 * The RPC simulator (in this process, HTTP reads lagging its websocket node) holds a registry of
 * top-level names, subdomains, records of other classes, v1-style records and orphan reverse
 * records (tools/rpc-sim/registry.ts); the API and the worker run in child processes
 * (bench/child.ts) with the websocket on, in each `SUBDOMAIN_INDEX` mode asked for:
 *
 * a. the bootstrap (registry mode): RPC calls, credits at Helius's prices, bytes and time until
 *    `/readyz` says the index serves; name-program changes land while it is built, one every few
 *    reads of the bootstrap;
 * b. those changes, not lost: every changed parent's answer (and owner, for a transfer) after it;
 * c. parents never asked before, from one address (with subdomains, without, made up): status,
 *    latency, `getProgramAccounts` the simulator got meanwhile, and each answer against the SDK's
 *    `findSubdomains` run on the simulator afterwards;
 * d. a subdomain created, transferred and deleted under parents nobody asked: time until shown;
 * e. Redis bytes of the index per subdomain indexed, and the worker's RSS.
 *
 * In `parents` mode there is no bootstrap: the same steps measure today's per-parent path, the
 * baseline. Options, how long it takes and what it writes: `npm run bench:registry -- --help`.
 * Environment: `REDIS_URL` (redis://127.0.0.1:6379/9). The run's Redis keys are deleted at the end.
 */
import { randomBytes } from 'node:crypto';
import { findSubdomains } from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { Redis } from 'ioredis';
import { redisKeys } from '../src/core/redis-keys.js';
import {
  domainKey,
  hashName,
  nameAccountKey,
  reverseKeyFromDomainKey,
} from '../src/core/sns/pda.js';
import {
  SimChain,
  seedRegistry,
  startRpcSimulator,
  type RegistryDerivation,
  type RpcCallRecord,
  type RpcSimulator,
  type SeededRegistry,
} from '../tools/rpc-sim/index.js';
import { parseBenchArgs } from './cli.js';
import {
  BENCH_REDIS_URL,
  type BenchRun,
  type Child,
  benchSetting,
  type BenchSetting,
  fmt,
  fmtSeconds,
  gatewayEnv,
  machine,
  quantile,
  table,
  withBenchRun,
  met,
  publishReport,
} from './lib.js';

const MODES = ['registry', 'parents'] as const;
/** Whether the gateway's processes run the compiled build (bench/lib.ts `Child.start`). */
const COMPILED = process.env.BENCH_CODE === 'dist';
/** The options this run was given, as typed. */
const ARGS = process.argv.slice(2).join(' ');
type Mode = (typeof MODES)[number];

const flags = parseBenchArgs({
  command: 'npm run bench:registry',
  summary:
    'A whole registry on the RPC simulator (HTTP reads lagging its websocket), the gateway in ' +
    'each SUBDOMAIN_INDEX mode: the registry index bootstrap (credits at Helius prices, bytes, ' +
    'time) with changes landing during it, whether those changes were kept, parents never asked ' +
    'from one address (getProgramAccounts made, answers against the SDK, p99), how fast a change ' +
    'under a parent nobody asked shows, Redis bytes per subdomain and the worker RSS. Prints ' +
    'the tables.',
  duration:
    'about 10 minutes with the defaults on 2 cores (seeding the registry, then each mode: the ' +
    'bootstrap, 1,000 parents asked and checked with the SDK); a tiny registry (--top-level 200 ' +
    '--subdomains 120 --parents 80 --largest 10 --records 20 --v1-records 10 --orphans 5 ' +
    '--changes 6 --asked 20) takes about half a minute.',
  writes:
    'the "registry" section of BENCHMARKS.md (figures of each mode, machine, commit), unless ' +
    '--write no.',
  options: {
    index: {
      value: 'MODES',
      default: 'registry,parents',
      choices: MODES,
      list: true,
      description: 'SUBDOMAIN_INDEX modes measured, in turn (parents: the baseline)',
    },
    'top-level': { value: 'N', default: '50000', min: 1, description: 'top-level names' },
    subdomains: { value: 'N', default: '10000', min: 1, description: 'subdomains' },
    parents: { value: 'N', default: '3000', min: 1, description: 'parents holding them' },
    largest: { value: 'N', default: '2000', min: 1, description: "the largest parent's share" },
    records: { value: 'N', default: '10000', min: 0, description: 'records of other classes' },
    'v1-records': { value: 'N', default: '5000', min: 0, description: 'v1-style records' },
    orphans: { value: 'N', default: '1000', min: 0, description: 'orphan reverse records' },
    changes: {
      value: 'N',
      default: '60',
      min: 3,
      description: 'name-program changes made while the index is built',
    },
    asked: {
      value: 'N',
      default: '1000',
      min: 10,
      description: 'parents never asked (60% with subdomains, 30% without, 10% made up)',
    },
    lag: {
      value: 'N',
      default: '500',
      min: 0,
      description: "milliseconds the simulator's HTTP reads lag its websocket node",
    },
    watch: {
      value: 'N',
      default: '5',
      min: 1,
      description: 'parents nobody asked per kind of change timed (created, transferred, deleted)',
    },
    'give-up': {
      value: 'N',
      default: '15',
      min: 1,
      description: 'seconds a change of (d) may take to show before it counts as never',
    },
    hot: {
      value: 'N',
      default: '40',
      min: 1,
      description:
        'requests of each parent of (d) once it is cached, for the hot-parent figures (f)',
    },
    hostile: {
      value: 'N',
      default: '500',
      min: 1,
      description: 'made-up parents asked from one address, for the hostile figures (f)',
    },
    seed: { value: 'N', default: '1', min: 0, description: 'seed of the registry and changes' },
    write: {
      value: 'WHAT',
      default: 'yes',
      choices: ['yes', 'no'],
      description: 'whether to write the registry section of BENCHMARKS.md',
    },
  },
});

const count = (name: keyof typeof flags): number => Math.floor(Number(flags[name]));
const SIZES = {
  topLevel: count('top-level'),
  subdomains: count('subdomains'),
  parents: count('parents'),
  largest: count('largest'),
  records: count('records'),
  v1Records: count('v1-records'),
  orphanReverses: count('orphans'),
};
const CHANGES = count('changes');
const ASKED = count('asked');
const LAG_MS = count('lag');
/** Requests of each hot parent in (f). */
const HOT_ASKS = count('hot');
/** Made-up parents asked in (f). */
const HOSTILE = count('hostile');
/** Requests in flight at once from the one address of (f)'s hostile client. */
const HOSTILE_CONCURRENCY = 8;
const SEED = count('seed');
/** Parents per kind of change measured in (d). */
const FIVE = count('watch');
/** How long a change may take to show in (d) before it counts as never. */
const SHOW_TIMEOUT_MS = count('give-up') * 1000;
const MODES_RUN = (flags.index ?? '').split(',').map((m) => m.trim()) as Mode[];
const REDIS_URL = BENCH_REDIS_URL;

/** The targets (BENCHMARKS.md, "registry"). */
const TARGETS = {
  credits: 5_000,
  bootstrapMs: 10 * 60_000,
  p99Ms: 50,
  showMs: 2_000,
  bytesPerSubdomain: 300,
  rssBytes: 300e6,
};
/** Helius's prices: `getProgramAccounts` and each `getProgramAccountsV2` page 10, every other call 1. */
const HELIUS_CREDITS = (method: string) =>
  method === 'getProgramAccounts' || method === 'getProgramAccountsV2' ? 10 : 1;
/** Requests of the never-asked parents at once, all from one address (the bench's). */
const ASK_CONCURRENCY = 4;
/** How long the index may take to serve, and a change to show, before the bench gives up. */
const BUILD_TIMEOUT_MS = 15 * 60_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The gateway's own derivations (src/core/sns/pda.ts): the SDK's take minutes for 120,000 keys. */
const FAST_DERIVATION: RegistryDerivation = {
  domainKey: (name) => domainKey(name),
  subdomainKey: (label, parentKey) => nameAccountKey(hashName(`\0${label}`), undefined, parentKey),
  reverseKey: (nameKey, parentKey) => reverseKeyFromDomainKey(nameKey, parentKey),
};

/** Uniform integers below n from a seed (the registry's own generator, another stream). */
function seededInts(seed: number): (n: number) => number {
  let state = (seed ^ 0x9e3779b9) >>> 0;
  return (n) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return Math.floor((state / 2 ** 32) * n);
  };
}

// ---------------------------------------------------------------------------------------------
// What the chain holds, as the bench changed it.

/** Parent -> label -> owner (base58) of the listed subdomains; owners only where the bench set one. */
type Truth = Map<string, Map<string, string | undefined>>;

function truthOf(registry: SeededRegistry): Truth {
  const truth: Truth = new Map();
  for (const [parent, labels] of registry.subdomains) {
    truth.set(parent, new Map(labels.map((l) => [l, undefined])));
  }
  return truth;
}

const labelsOf = (truth: Truth, parent: string): string[] =>
  [...(truth.get(parent)?.keys() ?? [])].sort();

type ChangeKind = 'create' | 'transfer' | 'delete';
type Made = { kind: ChangeKind; parent: string; label: string; owner?: string };

/**
 * Makes change `i` (creations, transfers and deletions in turn) under a parent drawn from
 * `names` (a transfer or deletion under one with subdomains), one transaction each.
 */
function makeChange(
  chain: SimChain,
  truth: Truth,
  names: readonly string[],
  i: number,
  int: (n: number) => number,
): Made {
  const kind: ChangeKind = (['create', 'transfer', 'delete'] as const)[i % 3] ?? 'create';
  const withSubdomains = names.filter((p) => (truth.get(p)?.size ?? 0) > 1);
  if (kind === 'create' || withSubdomains.length === 0) {
    const parent = names[int(names.length)] as string;
    const label = `chg${i}-${randomBytes(3).toString('hex')}`;
    chain.addSubdomain(parent, label);
    if (!truth.has(parent)) truth.set(parent, new Map());
    truth.get(parent)?.set(label, undefined);
    return { kind: 'create', parent, label };
  }
  const parent = withSubdomains[int(withSubdomains.length)] as string;
  const labels = labelsOf(truth, parent);
  const label = labels[int(labels.length)] as string;
  if (kind === 'transfer') {
    const owner = new PublicKey(randomBytes(32));
    chain.transferSubdomain(parent, label, owner);
    truth.get(parent)?.set(label, owner.toBase58());
    return { kind, parent, label, owner: owner.toBase58() };
  }
  chain.deleteSubdomain(parent, label);
  truth.get(parent)?.delete(label);
  return { kind, parent, label };
}

// ---------------------------------------------------------------------------------------------
// The gateway, over HTTP.

type Answer = {
  status: number;
  ms: number;
  labels?: string[];
  owners?: Map<string, string>;
  /** `X-Cache` and `Age` (seconds) of a 200. */
  cache?: string;
  age?: number;
};

/** `/subdomains/:parent` (or `/details`), timed. */
async function ask(base: string, parent: string, details = false): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(`${base}/subdomains/${parent}${details ? '/details' : ''}`, {
      signal: AbortSignal.timeout(150_000),
    });
    const body = (await res.json()) as { result?: unknown };
    const ms = performance.now() - started;
    if (res.status !== 200 || !Array.isArray(body.result)) return { status: res.status, ms };
    const label = { cache: res.headers.get('x-cache') ?? '', age: Number(res.headers.get('age')) };
    if (!details) return { status: 200, ms, labels: body.result as string[], ...label };
    const rows = body.result as Array<{ label: string; owner: string }>;
    return {
      status: 200,
      ms,
      ...label,
      labels: rows.map((r) => r.label),
      owners: new Map(rows.map((r) => [r.label, r.owner])),
    };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** The registry index's state as the API's `/readyz` says it (undefined: it says none). */
async function indexState(base: string): Promise<string | undefined> {
  try {
    const res = await fetch(`${base}/readyz`);
    const body = (await res.json()) as {
      parts?: { index?: string };
      result?: { parts?: { index?: string } };
    };
    return body.result?.parts?.index ?? body.parts?.index;
  } catch {
    return undefined;
  }
}

/** Sum of `MEMORY USAGE` (exact) of the keys matching `pattern`, and how many there are. */
async function keyBytes(pattern: string): Promise<{ keys: number; bytes: number }> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    let keys = 0;
    let bytes = 0;
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of batch) {
        keys++;
        bytes += Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
      }
    } while (cursor !== '0');
    return { keys, bytes };
  } finally {
    redis.disconnect();
  }
}

/** The build's own duration (`completedAt - startedAt` of its state hash), ms. */
async function buildDuration(stateKey: string): Promise<number | undefined> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    const state = await redis.hgetall(stateKey);
    const took = Number(state.completedAt) - Number(state.startedAt);
    return Number.isFinite(took) && took >= 0 ? took : undefined;
  } finally {
    redis.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// One mode.

type Calls = Map<string, { calls: number; bytes: number }>;

/** Counts the simulator's calls by method while `counting` is set. */
class CallTally {
  counting: Calls | undefined;
  onRead: (() => void) | undefined;
  record(call: RpcCallRecord): void {
    if (this.counting) {
      const row = this.counting.get(call.method) ?? { calls: 0, bytes: 0 };
      row.calls++;
      row.bytes += call.responseBytes;
      this.counting.set(call.method, row);
    }
    if (call.method === 'getProgramAccounts' || call.method === 'getProgramAccountsV2') {
      this.onRead?.();
    }
  }
  /** Counts from now into a new map, returned. */
  start(): Calls {
    this.counting = new Map();
    return this.counting;
  }
}

const NO_CALLS: Calls = new Map();
const credits = (calls: Calls) =>
  [...calls].reduce((sum, [method, row]) => sum + HELIUS_CREDITS(method) * row.calls, 0);
const callsOf = (calls: Calls, method: string) => calls.get(method)?.calls ?? 0;
const bytesOf = (calls: Calls) => [...calls.values()].reduce((sum, row) => sum + row.bytes, 0);

type Shown = { kind: ChangeKind; ms: number[]; never: number; parents: string[] };

/** Many requests and what they cost: statuses, latency, the simulator's calls. */
type Burst = {
  parents: number;
  answers: number;
  statuses: Map<number, number>;
  /** Answers 200 listing what the bench knows the chain holds (`[]` for a made-up parent). */
  right: number;
  p50: number;
  p99: number;
  calls: Calls;
};

/** Asks every path of `paths`, `concurrency` at a time from this one address, and tallies it. */
async function burst(
  base: string,
  tally: CallTally,
  paths: readonly string[],
  concurrency: number,
  expected: (parent: string) => string[],
): Promise<Burst> {
  const calls = tally.start();
  const queue = [...paths];
  const answers: Array<{ parent: string; answer: Answer }> = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let parent = queue.shift(); parent !== undefined; parent = queue.shift()) {
        answers.push({ parent, answer: await ask(base, parent) });
      }
    }),
  );
  tally.counting = undefined;
  const statuses = new Map<number, number>();
  let right = 0;
  for (const { parent, answer } of answers) {
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    if (answer.status === 200 && same(answer.labels, expected(parent))) right++;
  }
  const latencies = Float64Array.from(answers.map((a) => a.answer.ms)).sort();
  return {
    parents: new Set(paths).size,
    answers: answers.length,
    statuses,
    right,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    calls: new Map(calls),
  };
}

type ModeResult = {
  mode: Mode;
  /** `ms` from the worker's start to `/readyz` serving; `buildMs` the build's own, as it recorded. */
  bootstrap?: { ms: number; buildMs: number | undefined; calls: Calls };
  changesDuringBuild: number;
  changesLost: number;
  changesRefused: number;
  changesChecked: number;
  asked: {
    answers: number;
    ok: number;
    bySdk: number;
    statuses: Map<number, number>;
    p50: number;
    p99: number;
    calls: Calls;
  };
  shown: Shown[];
  /** (f): the parents of (d), cached, asked again and again; made-up parents from one address. */
  hot: Burst;
  hostile: Burst;
  redis: { keys: number; bytes: number; subdomains: number };
  prefixBytes: number;
  workerRss: number;
};

async function measureMode(
  mode: Mode,
  run: BenchRun,
  sim: RpcSimulator,
  tally: CallTally,
  registry: SeededRegistry,
  truth: Truth,
  pools: Pools,
): Promise<ModeResult> {
  const chain = sim.chain;
  const int = seededInts(SEED + (mode === 'registry' ? 1 : 2));
  const env = gatewayEnv(REDIS_URL, sim.url, run.prefix, {
    RPC_WS: 'on',
    RPC_WS_URL: sim.wsUrl,
    SUBDOMAIN_INDEX: mode,
    // The default window: the per-parent path's answers age as they would in production.
    CACHE_FRESH_SECONDS: '60',
  });
  // (a) The bootstrap, with changes landing while it reads: one after every few reads of the
  // whole program (from the worker's start: it may build before the API is up).
  const made: Made[] = [];
  let bootstrap: ModeResult['bootstrap'];
  let changesDuringBuild = 0;
  let reads = 0;
  const every = Math.max(1, Math.floor(256 / CHANGES));
  if (mode === 'registry') {
    tally.onRead = () => {
      reads++;
      // After the simulator has answered the read that triggered it, never in its midst.
      if (reads % every === 0) {
        setImmediate(() => {
          if (made.length < CHANGES && tally.onRead) {
            made.push(makeChange(chain, truth, pools.changeable, made.length, int));
          }
        });
      }
    };
  }
  log(`[${mode}] starting the worker and the API`);
  const buildCalls = tally.start();
  const started = performance.now();
  const worker = await run.start('worker', env);
  const api = await run.start('api', env);
  const base = `http://127.0.0.1:${api.info.port}`;
  let rss = 0;
  const sampleRss = async (child: Child) => {
    rss = Math.max(rss, (await child.stats()).rss);
  };
  if (mode === 'registry') {
    let state: string | undefined;
    const deadline = performance.now() + BUILD_TIMEOUT_MS;
    for (;;) {
      const was = state;
      state = await indexState(base);
      if (state !== was) {
        log(
          `[registry] /readyz: index ${state ?? '(none)'} after ${fmtSeconds(performance.now() - started)}`,
        );
      }
      if (state === 'serving' || performance.now() > deadline) break;
      if (state === undefined && performance.now() - started > 30_000) {
        throw new Error(
          '/readyz says nothing of the registry index: this gateway has no SUBDOMAIN_INDEX=registry',
        );
      }
      await sampleRss(worker);
      await sleep(200);
    }
    tally.onRead = undefined;
    changesDuringBuild = made.length;
    bootstrap = {
      ms: performance.now() - started,
      buildMs: await buildDuration(redisKeys(run.prefix).registryState),
      calls: new Map(buildCalls),
    };
    if (state !== 'serving') throw new Error(`the index is ${state} after ${BUILD_TIMEOUT_MS} ms`);
    log(
      `[registry] serving after ${fmtSeconds(bootstrap.ms)}: ${credits(bootstrap.calls)} credits, ` +
        `${changesDuringBuild} changes during the build`,
    );
  }
  // The rest of the changes (all of them in parents mode, where nothing is built).
  while (made.length < CHANGES) {
    made.push(makeChange(chain, truth, pools.changeable, made.length, int));
    await sleep(20);
  }
  await sampleRss(worker);

  // (b) Every changed parent answers as the chain is now (after the HTTP lag has passed).
  await sleep(LAG_MS + 1_000);
  const changed = [...new Set(made.map((m) => m.parent))];
  let lost = 0;
  let refused = 0;
  // How the wrong answers were labelled: as current (a hit of age 0), a hit dated earlier, stale.
  const wrongAs = { current: 0, dated: 0, stale: 0, maxAge: 0 };
  for (const parent of changed) {
    const transfers = made.filter((m) => m.parent === parent && m.owner !== undefined);
    const answer = await ask(base, parent, transfers.length > 0);
    const expected = labelsOf(truth, parent);
    // The owner now (a label transferred twice has its second owner), where it still exists.
    const ownersRight = transfers.every(
      (m) =>
        !truth.get(parent)?.has(m.label) ||
        answer.owners?.get(m.label) === truth.get(parent)?.get(m.label),
    );
    if (answer.status !== 200) refused++;
    else if (!same(answer.labels, expected) || !ownersRight) {
      lost++;
      if (answer.cache === 'STALE') wrongAs.stale++;
      else if (answer.cache === 'HIT' && answer.age === 0) wrongAs.current++;
      else wrongAs.dated++;
      wrongAs.maxAge = Math.max(wrongAs.maxAge, answer.age ?? 0);
      const extra = answer.labels?.filter((l) => !expected.includes(l)) ?? [];
      const missing = expected.filter((l) => !answer.labels?.includes(l));
      const kinds = made.filter((m) => m.parent === parent).map((m) => `${m.kind} ${m.label}`);
      log(
        `[${mode}] ${parent}: after ${kinds.join(', ')}: listed but gone ${JSON.stringify(extra)}, ` +
          `missing ${JSON.stringify(missing)}${ownersRight ? '' : ', an owner not the new one'}`,
      );
    }
  }
  log(
    `[${mode}] ${CHANGES} changes under ${changed.length} parents: ${lost} parents wrong, ` +
      `${refused} not answered 200; the wrong ones as a hit of now ${wrongAs.current}, a hit ` +
      `dated earlier ${wrongAs.dated}, stale ${wrongAs.stale} (Age at most ${wrongAs.maxAge} s)`,
  );

  // (c) Parents never asked, from one address.
  const askedCalls = tally.start();
  const answers: Array<{ parent: string; answer: Answer }> = [];
  const queue = [...pools.asked];
  await Promise.all(
    Array.from({ length: ASK_CONCURRENCY }, async () => {
      for (let parent = queue.shift(); parent !== undefined; parent = queue.shift()) {
        answers.push({ parent, answer: await ask(base, parent) });
      }
    }),
  );
  const asked = new Map(askedCalls);
  tally.counting = undefined;
  await sampleRss(worker);
  const statuses = new Map<number, number>();
  for (const { answer } of answers) {
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
  }
  const latencies = Float64Array.from(answers.map((a) => a.answer.ms)).sort();
  // Each answer against the chain as the bench made it and against the SDK on the simulator.
  const connection = new Connection(sim.url, 'confirmed');
  let ok = 0;
  let bySdk = 0;
  for (const { parent, answer } of answers) {
    if (answer.status !== 200) continue;
    const expected = labelsOf(truth, parent);
    if (same(answer.labels, expected)) ok++;
    const sdk = await findSubdomains(connection, new PublicKey(domainKey(parent)));
    if (same(answer.labels, sdk.sort())) bySdk++;
  }
  log(
    `[${mode}] ${answers.length} parents never asked: ${statuses.get(200) ?? 0} answered 200, ` +
      `${bySdk} as the SDK, getProgramAccounts ${callsOf(asked, 'getProgramAccounts')}, ` +
      `p99 ${fmt.ms(quantile(latencies, 0.99))} ms`,
  );

  // (d) Changes under parents nobody asked.
  const shown: Shown[] = [];
  for (const kind of ['create', 'transfer', 'delete'] as const) {
    const result: Shown = { kind, ms: [], never: 0, parents: [] };
    for (let k = 0; k < FIVE; k++) {
      const parent = pools.unasked.shift();
      if (parent === undefined) break;
      const labels = labelsOf(truth, parent);
      const label = kind === 'create' ? `new-${k}-${randomBytes(3).toString('hex')}` : labels[0];
      if (label === undefined) continue;
      const owner = new PublicKey(randomBytes(32)).toBase58();
      result.parents.push(parent);
      const at = performance.now();
      if (kind === 'create') chain.addSubdomain(parent, label);
      else if (kind === 'transfer') chain.transferSubdomain(parent, label, new PublicKey(owner));
      else chain.deleteSubdomain(parent, label);
      if (kind === 'create') truth.get(parent)?.set(label, undefined);
      if (kind === 'transfer') truth.get(parent)?.set(label, owner);
      if (kind === 'delete') truth.get(parent)?.delete(label);
      const holds = (a: Answer) =>
        kind === 'create'
          ? a.labels?.includes(label) === true
          : kind === 'transfer'
            ? a.owners?.get(label) === owner
            : a.labels !== undefined && !a.labels.includes(label);
      let ms: number | undefined;
      while (performance.now() - at < SHOW_TIMEOUT_MS) {
        const answer = await ask(base, parent, kind === 'transfer');
        if (answer.status === 200 && holds(answer)) {
          ms = performance.now() - at;
          break;
        }
        await sleep(50);
      }
      if (ms === undefined) {
        result.never++;
        log(`[${mode}] ${kind} of ${label} under ${parent} not shown in ${SHOW_TIMEOUT_MS} ms`);
      } else result.ms.push(ms);
    }
    shown.push(result);
  }
  log(
    `[${mode}] changes under parents nobody asked: ` +
      shown
        .map((s) => `${s.kind} ${s.never > 0 ? `${s.never} never` : fmtSeconds(Math.max(...s.ms))}`)
        .join(', '),
  );

  // (f) Per-parent figures. Hot parents: those of (d), cached by now, asked again and again from
  // one address (a wallet showing the same parents to its users). Hostile: made-up parents from
  // one address, each new (a client walking names to make the gateway scan).
  const hotParents = [...new Set(shown.flatMap((s) => s.parents))];
  const hotPaths = Array.from({ length: HOT_ASKS }, () => hotParents).flat();
  const hot = await burst(base, tally, hotPaths, ASK_CONCURRENCY, (p) => labelsOf(truth, p));
  await sampleRss(worker);
  const hostilePaths = Array.from(
    { length: HOSTILE },
    (_, i) => `hostile-${mode}-${i}-${randomBytes(6).toString('hex')}`,
  );
  const hostile = await burst(base, tally, hostilePaths, HOSTILE_CONCURRENCY, () => []);
  await sampleRss(worker);
  log(
    `[${mode}] hot parents: ${hot.answers} asks of ${hot.parents}, ${hot.statuses.get(200) ?? 0} ` +
      `answered 200, p99 ${fmt.ms(hot.p99)} ms, getProgramAccounts ` +
      `${callsOf(hot.calls, 'getProgramAccounts')}; hostile: ${hostile.answers} made-up parents, ` +
      `${hostile.statuses.get(200) ?? 0} answered 200, getProgramAccounts ` +
      `${callsOf(hostile.calls, 'getProgramAccounts')}, p99 ${fmt.ms(hostile.p99)} ms`,
  );

  // (e) Redis and memory.
  await sampleRss(worker);
  const index = await keyBytes(`${run.prefix}:registry:*`);
  const all = await keyBytes(`${run.prefix}:*`);
  const subdomains = [...truth.values()].reduce((sum, labels) => sum + labels.size, 0);
  await api.stop();
  await worker.stop();
  return {
    mode,
    bootstrap,
    changesDuringBuild,
    changesLost: lost,
    changesRefused: refused,
    changesChecked: changed.length,
    asked: {
      answers: answers.length,
      ok,
      bySdk,
      statuses,
      p50: quantile(latencies, 0.5),
      p99: quantile(latencies, 0.99),
      calls: asked,
    },
    shown,
    hot,
    hostile,
    redis: { ...index, subdomains },
    prefixBytes: all.bytes,
    workerRss: rss,
  };
}

const same = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);

// ---------------------------------------------------------------------------------------------
// Which parents each step asks: disjoint, so every one is asked for the first time.

type Pools = {
  /** Parents changes go under during the build (any name). */
  changeable: string[];
  /** The never-asked parents of (c). */
  asked: string[];
  /** Parents of (d), with subdomains, never asked. */
  unasked: string[];
};

function pools(registry: SeededRegistry, mode: Mode, int: (n: number) => number): Pools {
  const shuffle = <T>(list: T[]): T[] => {
    for (let i = list.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [list[i], list[j]] = [list[j] as T, list[i] as T];
    }
    return list;
  };
  const withSubdomains = shuffle(
    [...registry.subdomains.keys()].filter((p) => p !== registry.largestParent),
  );
  const without = shuffle(registry.names.filter((n) => !registry.subdomains.has(n)));
  const nWith = Math.round(ASKED * 0.6);
  const nWithout = Math.round(ASKED * 0.3);
  const nMadeUp = ASKED - nWith - nWithout;
  // Each mode draws its own parents, so the second mode's are new to it too.
  const half = (list: string[]) =>
    mode === MODES[0] ? list.slice(0, list.length >> 1) : list.slice(list.length >> 1);
  const mine = half(withSubdomains);
  const mineWithout = half(without);
  const askedWith = [
    ...(mode === MODES[0] && registry.largestParent ? [registry.largestParent] : []),
    ...mine.slice(0, nWith),
  ].slice(0, nWith);
  const asked = shuffle([
    ...askedWith,
    ...mineWithout.slice(0, nWithout),
    ...Array.from(
      { length: nMadeUp },
      (_, i) => `madeup-${mode}-${i}-${randomBytes(4).toString('hex')}`,
    ),
  ]);
  const unasked = mine.slice(nWith, nWith + 3 * FIVE);
  const changeable = [...mine.slice(nWith + 3 * FIVE), ...mineWithout.slice(nWithout)];
  if (unasked.length < 3 * FIVE || changeable.length === 0 || askedWith.length < nWith) {
    throw new Error(
      `the registry is too small for ${ASKED} parents asked in ${MODES_RUN.length} mode(s): ` +
        'raise --parents and --top-level, or lower --asked',
    );
  }
  return { changeable, asked, unasked };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const startedAt = new Date();
  const m = await benchSetting(REDIS_URL);
  const { redis, code, database } = m;
  log(
    `bench:registry: ${SIZES.topLevel} top-level names, ${SIZES.subdomains} subdomains under ` +
      `${SIZES.parents} parents (largest ${SIZES.largest}), ${SIZES.records} records, ` +
      `${SIZES.v1Records} v1 records, ${SIZES.orphanReverses} orphan reverse records; modes ` +
      `${MODES_RUN.join(', ')}; ${m.cores} cores, Node ${m.node}, Redis ${redis} (db ${database}), ` +
      `load ${m.load}, commit ${code}`,
  );
  const results: ModeResult[] = [];
  let seedMs = 0;
  let accounts = 0;
  for (const mode of MODES_RUN) {
    // A chain of its own per mode: the first mode's changes and asks leave the second's as new.
    const chain = new SimChain();
    const seeding = performance.now();
    const registry = seedRegistry(chain, { ...SIZES, seed: SEED, derive: FAST_DERIVATION });
    seedMs = performance.now() - seeding;
    accounts = registry.accounts;
    log(`seeded ${registry.accounts} accounts in ${fmtSeconds(seedMs)}`);
    const tally = new CallTally();
    const sim = await startRpcSimulator({
      chain,
      httpLagMs: LAG_MS,
      onCall: (call) => tally.record(call),
    });
    try {
      const truth = truthOf(registry);
      const chosen = pools(registry, mode, seededInts(SEED));
      results.push(
        await withBenchRun(REDIS_URL, (run) =>
          measureMode(mode, run, sim, tally, registry, truth, chosen),
        ),
      );
    } finally {
      await sim.close();
    }
  }
  const took = (Date.now() - startedAt.getTime()) / 1000;
  const markdown = report(
    { ...m, loadEnd: machine().load },
    startedAt,
    took,
    seedMs,
    accounts,
    results,
  );
  await publishReport('registry', markdown, took, flags.write === 'yes');
}

type Machine = BenchSetting & { loadEnd: string };

function report(
  m: Machine,
  started: Date,
  took: number,
  seedMs: number,
  accounts: number,
  results: ModeResult[],
): string {
  const cell = (r: ModeResult | undefined, f: (r: ModeResult) => string) => (r ? f(r) : 'not run');
  const registry = results.find((r) => r.mode === 'registry');
  const parents = results.find((r) => r.mode === 'parents');
  const maxShown = (r: ModeResult, kind: ChangeKind) => {
    const s = r.shown.find((x) => x.kind === kind);
    if (!s || s.never > 0 || s.ms.length === 0) return undefined;
    return Math.max(...s.ms);
  };
  const showCell = (r: ModeResult, kind: ChangeKind) => {
    const s = r.shown.find((x) => x.kind === kind);
    const ms = maxShown(r, kind);
    return `${fmtSeconds(ms)}${s && s.never > 0 ? ` (${s.never} of ${s.never + s.ms.length} never)` : ''}`;
  };
  const gpa = (r: ModeResult) => callsOf(r.asked.calls, 'getProgramAccounts');
  const bytesPer = (r: ModeResult) => (r.redis.subdomains ? r.redis.bytes / r.redis.subdomains : 0);
  const statusText = (r: ModeResult) =>
    [...r.asked.statuses]
      .sort((a, b) => a[0] - b[0])
      .map(([s, n]) => `${n} × ${s === 0 ? 'no answer' : s}`)
      .join(', ');
  const row = (
    measure: string,
    target: string,
    f: (r: ModeResult) => string,
    ok?: (r: ModeResult) => boolean,
  ) => [
    measure,
    target,
    cell(registry, f),
    registry && ok ? met(ok(registry)) : '',
    cell(parents, f),
  ];
  const boot = (r: ModeResult) => r.bootstrap;
  const targets = table(
    ['measure', 'target', '`registry`', 'met', '`parents` (baseline)'],
    [
      row(
        '(a) bootstrap: credits at Helius prices',
        `≤ ${fmt.int(TARGETS.credits)}`,
        (r) => (boot(r) ? fmt.int(credits(boot(r)?.calls ?? NO_CALLS)) : 'no bootstrap'),
        (r) => credits(boot(r)?.calls ?? NO_CALLS) <= TARGETS.credits,
      ),
      row(
        '(a) bootstrap: the build (its state hash); from the worker start until `/readyz` says `serving`',
        '≤ 10 min',
        (r) =>
          boot(r) ? `${fmtSeconds(boot(r)?.buildMs)}; ${fmtSeconds(boot(r)?.ms)}` : 'no bootstrap',
        (r) => (boot(r)?.ms ?? Infinity) <= TARGETS.bootstrapMs,
      ),
      row(
        `(b) ${CHANGES} changes while it is built: changed parents answering otherwise after it`,
        '0 lost',
        (r) =>
          `${r.changesLost} of ${r.changesChecked} wrong, ${r.changesRefused} not answered 200 ` +
          `(${r.changesDuringBuild} changes during the build)`,
        (r) => r.changesLost === 0 && r.changesRefused === 0,
      ),
      row(
        `(c) ${ASKED} parents never asked, one address: \`getProgramAccounts\` made`,
        '0',
        (r) => fmt.int(gpa(r)),
        (r) => gpa(r) === 0,
      ),
      row(
        '(c) answers 200 and identical to `findSubdomains`',
        `all ${ASKED}`,
        (r) => `${r.asked.bySdk} (${statusText(r)})`,
        (r) => r.asked.bySdk === r.asked.answers && r.asked.ok === r.asked.answers,
      ),
      row(
        '(c) latency p50 / p99',
        `p99 ≤ ${TARGETS.p99Ms} ms`,
        (r) => `${fmt.ms(r.asked.p50)} / ${fmt.ms(r.asked.p99)} ms`,
        (r) => r.asked.p99 <= TARGETS.p99Ms,
      ),
      ...(['create', 'transfer', 'delete'] as const).map((kind) =>
        row(
          `(d) subdomain ${kind === 'create' ? 'created' : kind === 'transfer' ? 'transferred (`/details` owner)' : 'deleted'} under ${FIVE} parents nobody asked: slowest`,
          '≤ 2 s',
          (r) => showCell(r, kind),
          (r) => (maxShown(r, kind) ?? Infinity) <= TARGETS.showMs,
        ),
      ),
      row(
        '(e) Redis bytes of the index per subdomain (`MEMORY USAGE`)',
        `≤ ${TARGETS.bytesPerSubdomain}`,
        (r) =>
          r.redis.keys === 0
            ? 'no index'
            : `${fmt.int(bytesPer(r))} (${fmt.bytes(r.redis.bytes)} in ${fmt.int(r.redis.keys)} keys, ${fmt.int(r.redis.subdomains)} subdomains)`,
        (r) => bytesPer(r) <= TARGETS.bytesPerSubdomain && r.redis.keys > 0,
      ),
      row(
        '(e) worker RSS, highest sampled',
        `≤ ${fmt.bytes(TARGETS.rssBytes)}`,
        (r) => fmt.bytes(r.workerRss),
        (r) => r.workerRss <= TARGETS.rssBytes,
      ),
    ],
  );
  const burstStatuses = (b: Burst) =>
    [...b.statuses]
      .sort((x, y) => x[0] - y[0])
      .map(([st, n]) => `${fmt.int(n)} × ${st === 0 ? 'no answer' : st}`)
      .join(', ');
  const callText = (calls: Calls) =>
    [...calls]
      .sort()
      .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
      .join(', ') || 'none';
  const perParentRow = (measure: string, f: (r: ModeResult) => string) => [
    measure,
    cell(registry, f),
    cell(parents, f),
  ];
  const burstRows = (name: string, pick: (r: ModeResult) => Burst) => [
    perParentRow(`${name}: answers`, (r) => {
      const b = pick(r);
      return `${burstStatuses(b)}; ${fmt.int(b.right)} right`;
    }),
    perParentRow(
      `${name}: latency p50 / p99`,
      (r) => `${fmt.ms(pick(r).p50)} / ${fmt.ms(pick(r).p99)} ms`,
    ),
    perParentRow(
      `${name}: calls the simulator answered (credits)`,
      (r) => `${callText(pick(r).calls)} (${fmt.int(credits(pick(r).calls))})`,
    ),
  ];
  const anyRun = registry ?? parents;
  const perParent = table(
    ['per parent', '`registry`', '`parents`'],
    [
      perParentRow(
        `long tail: ${ASKED} parents never asked, one address, ${ASK_CONCURRENCY} at a time (c)`,
        (r) =>
          `${statusText(r)}; \`getProgramAccounts\` ${fmt.int(gpa(r))}; p99 ${fmt.ms(r.asked.p99)} ms`,
      ),
      ...burstRows(
        `hot: ${fmt.int(anyRun?.hot.parents ?? 0)} cached parents × ${HOT_ASKS}, one address, ${ASK_CONCURRENCY} at a time`,
        (r) => r.hot,
      ),
      ...burstRows(
        `hostile: ${fmt.int(HOSTILE)} made-up parents, one address, ${HOSTILE_CONCURRENCY} at a time`,
        (r) => r.hostile,
      ),
    ],
  );
  const callRows = results.flatMap((r) => [
    ...(r.bootstrap
      ? [
          [
            `\`${r.mode}\` bootstrap`,
            [...r.bootstrap.calls]
              .sort()
              .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
              .join(', '),
            fmt.bytes(bytesOf(r.bootstrap.calls)),
          ],
        ]
      : []),
    [
      `\`${r.mode}\` ${ASKED} parents never asked`,
      [...r.asked.calls]
        .sort()
        .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
        .join(', ') || 'none',
      fmt.bytes(bytesOf(r.asked.calls)),
    ],
  ]);
  return [
    `Run ${started.toISOString()} at commit ${m.code} on ${m.cores} cores (${m.cpu}), Node ${m.node}, ` +
      `Redis ${m.redis} (database ${m.database}); load ${m.load} at the start, ${m.loadEnd} at the ` +
      `end (other work shared the machine); ${took.toFixed(0)} s in all. Command: ` +
      `\`${COMPILED ? 'BENCH_CODE=dist ' : ''}npm run bench:registry${ARGS ? ` -- ${ARGS}` : ''}\`: ` +
      (COMPILED
        ? 'the API and the worker run the compiled build (dist/, `npm run bench:build`) with plain `node`.'
        : 'the API and the worker run the TypeScript sources under `tsx`.'),
    '',
    `Registry on the simulator (seed ${SEED}, ${fmt.int(accounts)} name-program accounts, written ` +
      `in ${fmtSeconds(seedMs)}): ${fmt.int(SIZES.topLevel)} top-level names with reverse records, ` +
      `${fmt.int(SIZES.subdomains)} subdomains under ${fmt.int(SIZES.parents)} parents (one with ` +
      `${fmt.int(SIZES.largest)}), ${fmt.int(SIZES.records)} record accounts of other classes, ` +
      `${fmt.int(SIZES.v1Records)} v1-style records, ${fmt.int(SIZES.orphanReverses)} orphan ` +
      `reverse records. The simulator's HTTP reads ${LAG_MS} ms behind its websocket node; the ` +
      'API and the worker in processes of their own, `RPC_WS=on`, `CACHE_FRESH_SECONDS=60`, other ' +
      'settings as the other benches (bench/lib.ts `gatewayEnv`); a change not shown within ' +
      `${SHOW_TIMEOUT_MS / 1000} s counts as never. Each mode on a fresh copy of the registry and its own ` +
      `parents. (c): ${ASKED} parents (${Math.round(ASKED * 0.6)} with subdomains, the largest ` +
      `among them in the registry run, ${Math.round(ASKED * 0.3)} without, the rest made up), ` +
      `${ASK_CONCURRENCY} at a time from the bench's one address, each answer compared with the ` +
      "SDK's `findSubdomains` run against the simulator afterwards. Credits: Helius's prices " +
      '(`getProgramAccounts` and each `getProgramAccountsV2` page 10, every other call 1).',
    '',
    targets,
    '',
    'Per-parent figures, after (d): the long tail is (c); hot parents are the parents of (d), ' +
      'cached by then, asked again and again; hostile parents are made-up names, each new, from ' +
      "one address (a client walking names to make the gateway scan); 'right' counts answers " +
      'that list what the chain holds (`[]` for a made-up name).',
    '',
    perParent,
    '',
    table(['phase', 'calls the simulator answered', 'bytes'], callRows),
  ].join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:registry: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
