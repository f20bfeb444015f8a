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
 * d. a subdomain created, transferred and deleted under parents nobody asked: time until shown,
 *    and the polls not answered 200;
 * e. Redis bytes of the index per subdomain indexed, and the worker's RSS.
 *
 * (b) and (d) ask each changed parent as a reader of its own (`X-Forwarded-For`, `TRUST_PROXY=1`):
 * the one address of (c) and (f) spends its cold-miss limit there, and its 429s said nothing of
 * whether a change showed.
 *
 * In `parents` mode there is no bootstrap: the same steps measure today's per-parent path, the
 * baseline. Options, how long it takes and what it writes: `npm run bench:registry -- --help`.
 * Environment: `REDIS_URL` (redis://127.0.0.1:6379/9). The run's Redis keys are deleted at the end.
 */
import { SimChain, seedRegistry, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { benchSetting, fmtSeconds, machine, publishReport, withBenchRun } from './lib.js';
import { FAST_DERIVATION, pools, seededInts, truthOf } from './registry/chain-truth.js';
import { measureMode, type ModeResult } from './registry/measure.js';
import { registryOptions } from './registry/options.js';
import { CallTally } from './registry/probes.js';
import { report } from './registry/report.js';

const log = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const o = registryOptions();
  const startedAt = new Date();
  const m = await benchSetting(o.redisUrl);
  const { redis, code, database } = m;
  log(
    `bench:registry: ${o.sizes.topLevel} top-level names, ${o.sizes.subdomains} subdomains under ` +
      `${o.sizes.parents} parents (largest ${o.sizes.largest}), ${o.sizes.records} records, ` +
      `${o.sizes.v1Records} v1 records, ${o.sizes.orphanReverses} orphan reverse records; modes ` +
      `${o.modes.join(', ')}; ${m.cores} cores, Node ${m.node}, Redis ${redis} (db ${database}), ` +
      `load ${m.load}, commit ${code}`,
  );
  const results: ModeResult[] = [];
  let seedMs = 0;
  let accounts = 0;
  for (const mode of o.modes) {
    // A chain of its own per mode: the first mode's changes and asks leave the second's as new.
    const chain = new SimChain();
    const seeding = performance.now();
    const registry = seedRegistry(chain, { ...o.sizes, seed: o.seed, derive: FAST_DERIVATION });
    seedMs = performance.now() - seeding;
    accounts = registry.accounts;
    log(`seeded ${registry.accounts} accounts in ${fmtSeconds(seedMs)}`);
    const tally = new CallTally();
    const sim = await startRpcSimulator({
      chain,
      httpLagMs: o.lagMs,
      onCall: (call) => tally.record(call),
    });
    try {
      const truth = truthOf(registry);
      const chosen = pools(registry, mode, seededInts(o.seed), o);
      results.push(
        await withBenchRun(o.redisUrl, (run) =>
          measureMode(mode, run, sim, tally, registry, truth, chosen, o),
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
    o,
  );
  await publishReport('registry', markdown, took, o.write);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:registry: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
