/** bench:registry's measurements of one `SUBDOMAIN_INDEX` mode: steps (a) to (f). */
import { randomBytes } from 'node:crypto';
import { findSubdomains } from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import { redisKeys } from '../../src/core/redis-keys.js';
import { domainKey } from '../../src/core/sns/pda.js';
import type { RpcSimulator, SeededRegistry } from '../../tools/rpc-sim/index.js';
import { type BenchRun, type Child, fmt, fmtSeconds, gatewayEnv, quantile } from '../lib.js';
import {
  labelsOf,
  makeChange,
  seededInts,
  type Made,
  type Pools,
  type Truth,
} from './chain-truth.js';
import {
  ASK_CONCURRENCY,
  BUILD_TIMEOUT_MS,
  HOSTILE_CONCURRENCY,
  type Mode,
  type RegistryOptions,
} from './options.js';
import {
  ask,
  buildDuration,
  burst,
  callsOf,
  credits,
  indexState,
  keyBytes,
  readers,
  same,
  type Answer,
  type Burst,
  type CallTally,
  type Calls,
  type Shown,
} from './probes.js';

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export type ModeResult = {
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

export async function measureMode(
  mode: Mode,
  run: BenchRun,
  sim: RpcSimulator,
  tally: CallTally,
  registry: SeededRegistry,
  truth: Truth,
  pools: Pools,
  o: RegistryOptions,
): Promise<ModeResult> {
  const chain = sim.chain;
  const int = seededInts(o.seed + (mode === 'registry' ? 1 : 2));
  const env = gatewayEnv(o.redisUrl, sim.url, run.prefix, {
    RPC_WS: 'on',
    RPC_WS_URL: sim.wsUrl,
    SUBDOMAIN_INDEX: mode,
    // The default window: the per-parent path's answers age as they would in production.
    CACHE_FRESH_SECONDS: '60',
    // (b) and (d) ask each parent as a reader of its own (`X-Forwarded-For`); the rest come from
    // the bench's one address, which has no such header.
    TRUST_PROXY: '1',
  });
  // A changed parent is asked by its own reader, not the one address: (c) and (f) spend that
  // address's cold-miss limit on purpose, and a 429 there is no answer about the change.
  const readerOf = readers();
  // (a) The bootstrap, with changes landing while it reads: one after every few reads of the
  // whole program (from the worker's start: it may build before the API is up).
  const made: Made[] = [];
  let bootstrap: ModeResult['bootstrap'];
  let changesDuringBuild = 0;
  let reads = 0;
  const every = Math.max(1, Math.floor(256 / o.changes));
  if (mode === 'registry') {
    tally.onRead = () => {
      reads++;
      // After the simulator has answered the read that triggered it, never in its midst.
      if (reads % every === 0) {
        setImmediate(() => {
          if (made.length < o.changes && tally.onRead) {
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
      buildMs: await buildDuration(o.redisUrl, redisKeys(run.prefix).registryState),
      calls: new Map(buildCalls),
    };
    if (state !== 'serving') throw new Error(`the index is ${state} after ${BUILD_TIMEOUT_MS} ms`);
    log(
      `[registry] serving after ${fmtSeconds(bootstrap.ms)}: ${credits(bootstrap.calls)} credits, ` +
        `${changesDuringBuild} changes during the build`,
    );
  }
  // The rest of the changes (all of them in parents mode, where nothing is built).
  while (made.length < o.changes) {
    made.push(makeChange(chain, truth, pools.changeable, made.length, int));
    await sleep(20);
  }
  await sampleRss(worker);

  // (b) Every changed parent answers as the chain is now (after the HTTP lag has passed).
  await sleep(o.lagMs + 1_000);
  const changed = [...new Set(made.map((m) => m.parent))];
  let lost = 0;
  let refused = 0;
  // How the wrong answers were labelled: as current (a hit of age 0), a hit dated earlier, stale.
  const wrongAs = { current: 0, dated: 0, stale: 0, maxAge: 0 };
  for (const parent of changed) {
    const transfers = made.filter((m) => m.parent === parent && m.owner !== undefined);
    const answer = await ask(base, parent, transfers.length > 0, readerOf(parent));
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
    `[${mode}] ${o.changes} changes under ${changed.length} parents: ${lost} parents wrong, ` +
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
    const result: Shown = { kind, ms: [], never: 0, parents: [], refused: 0 };
    for (let k = 0; k < o.watch; k++) {
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
      const statuses = new Map<number, number>();
      while (performance.now() - at < o.showTimeoutMs) {
        const answer = await ask(base, parent, kind === 'transfer', readerOf(parent));
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (answer.status !== 200) result.refused++;
        if (answer.status === 200 && holds(answer)) {
          ms = performance.now() - at;
          break;
        }
        await sleep(50);
      }
      if (ms === undefined) {
        result.never++;
        const polls = [...statuses].map(([status, n]) => `${n} × ${status}`).join(', ');
        log(
          `[${mode}] ${kind} of ${label} under ${parent} not shown in ${o.showTimeoutMs} ms ` +
            `(polls answered ${polls})`,
        );
      } else result.ms.push(ms);
    }
    shown.push(result);
  }
  log(
    `[${mode}] changes under parents nobody asked: ` +
      shown
        .map((s) => `${s.kind} ${s.never > 0 ? `${s.never} never` : fmtSeconds(Math.max(...s.ms))}`)
        .join(', ') +
      `; polls not answered 200: ${shown.reduce((n, s) => n + s.refused, 0)}`,
  );

  // (f) Per-parent figures. Hot parents: those of (d), cached by now, asked again and again from
  // one address (a wallet showing the same parents to its users). Hostile: made-up parents from
  // one address, each new (a client walking names to make the gateway scan).
  const hotParents = [...new Set(shown.flatMap((s) => s.parents))];
  const hotPaths = Array.from({ length: o.hotAsks }, () => hotParents).flat();
  const hot = await burst(base, tally, hotPaths, ASK_CONCURRENCY, (p) => labelsOf(truth, p));
  await sampleRss(worker);
  const hostilePaths = Array.from(
    { length: o.hostile },
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
  const index = await keyBytes(o.redisUrl, `${run.prefix}:registry:*`);
  const all = await keyBytes(o.redisUrl, `${run.prefix}:*`);
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
