/**
 * `npm run bench:profile -- --scenario hot|cold|warm`: one load scenario of bench/run.ts against
 * the API alone, with V8's CPU profiler on in the API process, then the functions that took the
 * most self time, grouped by package. For finding what a request costs, not for the record:
 * profiling slows the process, so its requests per second are not comparable with `npm run bench`.
 *
 * Options, how long it takes and what it writes: `npm run bench:profile -- --help` (the spec
 * below). Environment: `REDIS_URL` (redis://127.0.0.1:6379/9). The run's Redis keys are deleted at the end.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseBenchArgs } from './cli.js';
import {
  BENCH_REDIS_URL,
  ceilingPath,
  fmt,
  gatewayEnv,
  isScenario,
  load,
  scenarioPaths,
  SCENARIOS,
  table,
  WARM_PARENT,
  withBenchRun,
} from './lib.js';

const flags = parseBenchArgs({
  command: 'npm run bench:profile',
  summary:
    "One load scenario against the API alone with V8's CPU profiler on, then the functions with " +
    'the most self time, grouped by package. Not for the record: profiling slows the process.',
  duration:
    'about half a minute with the defaults: start-up, 2 s of warm-up, --seconds profiled, the report.',
  writes:
    'api-<scenario>.cpuprofile in --dir, a new temporary directory by default (open it in ' +
    'Chrome DevTools); no file of the repository.',
  options: {
    scenario: { value: 'NAME', default: 'hot', choices: SCENARIOS, description: 'load scenario' },
    server: {
      value: 'NAME',
      default: 'gateway',
      choices: ['gateway', 'ceiling'],
      description: 'process to profile (ceiling: bench/child.ts answering the same paths)',
    },
    seconds: { value: 'N', default: '10', min: 1, description: 'seconds profiled' },
    connections: { value: 'N', default: '16', min: 1, description: 'concurrent connections' },
    top: { value: 'N', default: '40', min: 1, description: 'functions listed' },
    dir: { value: 'PATH', description: 'where the .cpuprofile is kept' },
  },
});
const REDIS_URL = BENCH_REDIS_URL;

type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type Profile = { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };

/** Where a script belongs: a package name, `sns-gateway` for our sources, or `node`. */
function owner(url: string): string {
  if (url === '') return '(vm)';
  const inModules = url.lastIndexOf('node_modules/');
  if (inModules >= 0) {
    const rest = url.slice(inModules + 'node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? url);
  }
  if (url.startsWith('node:')) return 'node';
  return 'sns-gateway';
}

/** Self time of each function and each owner, in microseconds, from a V8 `.cpuprofile`. */
function summarize(profile: Profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byFunction = new Map<string, number>();
  const byOwner = new Map<string, number>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    const file = frame.url.replace(/^file:\/\//, '');
    const where = file ? `${path.relative(process.cwd(), file)}:${frame.lineNumber + 1}` : '';
    const name = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const who = owner(file);
    byOwner.set(who, (byOwner.get(who) ?? 0) + us);
    total += us;
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { total, functions: sorted(byFunction), owners: sorted(byOwner) };
}

async function main(): Promise<void> {
  const scenario = flags.scenario;
  if (!isScenario(scenario)) throw new Error(`unknown scenario ${scenario} (hot, cold or warm)`);
  const dir = flags.dir ?? mkdtempSync(path.join(os.tmpdir(), 'snsgw-profile-'));
  await withBenchRun(REDIS_URL, async ({ prefix, start }) => {
    const sim = await start('sim');
    const env = gatewayEnv(REDIS_URL, sim.info.url as string, prefix);
    const ceiling = flags.server === 'ceiling';
    const api = ceiling ? await start('ceiling') : await start('api', env);
    const base = `http://127.0.0.1:${api.info.port}`;
    const paths = scenarioPaths(scenario);
    if (scenario === 'warm' && !ceiling) {
      await start('worker', env);
      const res = await fetch(`${base}/subdomains/${WARM_PARENT}`);
      if (res.status !== 200) throw new Error(`priming /subdomains/${WARM_PARENT}: ${res.status}`);
    }
    const next = ceiling ? () => ceilingPath(paths()) : paths;
    const opts = { seconds: 2, warmupSeconds: 0, connections: Number(flags.connections) };
    await load(base, next, opts); // warm-up: JIT, caches, connections
    await api.request('profileStart');
    const r = await load(base, next, { ...opts, seconds: Number(flags.seconds), server: api });
    const file = path.join(dir, `api-${scenario}.cpuprofile`);
    await api.request('profileStop', file);
    process.stdout.write(
      `${scenario}: ${fmt.int(r.rps)} req/s under the profiler, ` +
        `${fmt.int(r.cpuUsPerRequest ?? NaN)} µs CPU/req, failures ${r.failures}\n`,
    );
    const { total, functions, owners } = summarize(
      JSON.parse(readFileSync(file, 'utf8')) as Profile,
    );
    const share = (us: number) => fmt.pct(us / total);
    const top = Number(flags.top);
    process.stdout.write(
      `\n${table(
        ['owner', 'self', 'share'],
        owners.map(([o, us]) => [o, `${fmt.int(us / 1000)} ms`, share(us)]),
      )}\n\n${table(
        ['function', 'self', 'share'],
        functions.slice(0, top).map(([f, us]) => [f, `${fmt.int(us / 1000)} ms`, share(us)]),
      )}\n\nprofile: ${file}\n`,
    );
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
