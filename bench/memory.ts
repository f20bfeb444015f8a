/**
 * `npm run bench:memory`: mixed load on the gateway's API for five minutes (40% derivations of
 * 100 hot names, 30% derivations of names never seen before, 30% warm /subdomains), sampling the
 * API process's RSS; prints the samples and writes them to BENCHMARKS.md. The verdict is about
 * growth: the highest sample of the last minute must stay within 10% of the median of the first
 * minute of settled load (from `--settle` seconds on). A fall (V8 handing pages back) is shown,
 * not counted against it. The sample before the load is shown but is no baseline: it is taken
 * right after start-up, before V8's first major GC has collected the start-up garbage. The spread
 * of all settled samples and the lowest samples of the first and last minute are reported too.
 *
 * Options, how long it takes and what it writes: `npm run bench:memory -- --help` (the spec below).
 */
import { parseBenchArgs } from './cli.js';
import {
  BENCH_REDIS_URL,
  fmt,
  gatewayEnv,
  load,
  machine,
  table,
  withBenchRun,
  writeSection,
} from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench:memory',
  summary:
    "Mixed load on the gateway's API (hot and new derivations, warm /subdomains), sampling the API " +
    "process's RSS; the verdict is whether it grows. Prints the samples.",
  duration: 'about 5.5 minutes with the defaults: --seconds of load, plus start-up.',
  writes:
    'BENCHMARKS.md, only the part between its bench:memory:start and bench:memory:end markers.',
  options: {
    seconds: { value: 'N', default: '300', min: 1, description: 'seconds of load' },
    sample: { value: 'N', default: '5', min: 1, description: 'seconds between RSS samples' },
    settle: {
      value: 'N',
      default: '30',
      min: 0,
      description: 'seconds of load before the samples the verdict uses',
    },
    connections: { value: 'N', default: '16', min: 1, description: 'concurrent connections' },
  },
});
const SECONDS = Number(flags.seconds);
const SAMPLE = Number(flags.sample);
const SETTLE = Number(flags.settle);
const CONNECTIONS = Number(flags.connections);
const REDIS_URL = BENCH_REDIS_URL;
const PARENTS = ['67679', 'demo', 'bonfida', 'empty'];

const log = (line: string) => process.stdout.write(`${line}\n`);
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const m = machine();
  const started = new Date();
  log(`sns-gateway memory check: ${SECONDS} s of mixed load; ${m.cores} cores, Node ${m.node}`);
  await withBenchRun(REDIS_URL, async ({ prefix, start }) => {
    const sim = await start('sim');
    const env = gatewayEnv(REDIS_URL, sim.info.url as string, prefix);
    const api = await start('api', env);
    await start('worker', env);
    const base = `http://127.0.0.1:${api.info.port}`;
    for (const parent of PARENTS) {
      const res = await fetch(`${base}/subdomains/${parent}`);
      if (res.status !== 200) throw new Error(`priming /subdomains/${parent}: ${res.status}`);
    }

    let i = 0;
    const next = () => {
      const n = i++;
      const kind = n % 10;
      if (kind < 4) return `/record-key-v2/hot${n % 100}/SOL`;
      if (kind < 7) return `/record-key-v2/${n % 3 === 0 ? `s${n}.p${n % 5000}` : `m${n}`}/SOL`;
      return `/subdomains/${PARENTS[n % PARENTS.length] as string}`;
    };

    const samples: Array<{ t: number; rss: number }> = [];
    const t0 = performance.now();
    const sample = async () => {
      const { rss } = await api.stats();
      samples.push({ t: (performance.now() - t0) / 1000, rss });
    };
    await sample();
    const timer = setInterval(() => void sample().catch(() => undefined), SAMPLE * 1000);
    const result = await load(base, next, {
      seconds: SECONDS,
      warmupSeconds: 0,
      connections: CONNECTIONS,
    });
    clearInterval(timer);
    await sample();

    const first = samples[0] as { t: number; rss: number };
    const last = samples[samples.length - 1] as { t: number; rss: number };
    const peak = Math.max(...samples.map((s) => s.rss));
    const settled = samples.filter((s) => s.t >= SETTLE - SAMPLE / 2);
    const low = Math.min(...settled.map((s) => s.rss));
    const high = Math.max(...settled.map((s) => s.rss));
    const sortedRss = (from: number, to: number) =>
      samples
        .filter((s) => s.t >= from && s.t <= to)
        .map((s) => s.rss)
        .sort((a, b) => a - b);
    const median = (rss: number[]) => rss[Math.floor(rss.length / 2)] ?? NaN;
    const window = Math.min(60, SECONDS / 4);
    const earlyRss = sortedRss(SAMPLE / 2, window);
    const lateRss = sortedRss(SECONDS - window, SECONDS + 1);
    const early = median(earlyRss);
    const late = median(lateRss);
    // The lowest samples come right after a major GC: what is live, without the garbage.
    const earlyLow = earlyRss[0] ?? NaN;
    const lateLow = lateRss[0] ?? NaN;
    const baseline = median(sortedRss(SETTLE - SAMPLE / 2, SETTLE + window));
    const lateHigh = lateRss[lateRss.length - 1] ?? NaN;
    const growth = lateHigh / baseline - 1;
    const every = Math.max(1, Math.round(30 / SAMPLE));
    const shown = samples.filter((_, k) => k % every === 0 || k === samples.length - 1);
    const md = [
      `## Memory under mixed load (${started.toISOString().slice(0, 10)})`,
      '',
      `Machine: ${m.cores} cores, ${m.cpu}, Node ${m.node}; load average at start ${m.load}.`,
      `Run: \`npm run bench:memory -- --seconds ${SECONDS} --settle ${SETTLE}\`:` +
        ` ${fmt.int(result.requests)}` +
        ` requests (${fmt.int(result.rps)}/s, ${result.failures} failures), 40% hot derivations,` +
        ' 30% derivations of new names, 30% warm /subdomains; RSS of the API process.',
      '',
      table(
        ['t (s)', 'RSS'],
        shown.map((s) => [s.t.toFixed(0), mb(s.rss)]),
      ),
      '',
      table(
        ['measure', 'value'],
        [
          ['first sample (before load)', mb(first.rss)],
          ['last sample', mb(last.rss)],
          [
            `RSS from ${SETTLE} s of load on: lowest → highest (spread)`,
            `${mb(low)} → ${mb(high)} (${fmt.pct(high / low - 1)})`,
          ],
          [
            `highest of the last minute vs median of the first settled minute (target: <= +10%)`,
            `${mb(lateHigh)} vs ${mb(baseline)}, ${fmt.pct(growth)}: ${growth <= 0.1 ? 'met' : '**not met**'}`,
          ],
          [`median of the first ${window.toFixed(0)} s of load`, mb(early)],
          [`median of the last ${window.toFixed(0)} s`, mb(late)],
          ['first minute → last minute (medians)', fmt.pct(late / early - 1)],
          [
            'first minute → last minute (lowest samples, after major GCs)',
            `${mb(earlyLow)} → ${mb(lateLow)} (${fmt.pct(lateLow / earlyLow - 1)})`,
          ],
          ['peak (between major GCs)', mb(peak)],
        ],
      ),
    ].join('\n');
    log(`\n${md}\n`);
    await writeSection('memory', md);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(
    `memory check failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
});
