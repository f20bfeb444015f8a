/**
 * Where a cold scan of a large parent spends its time, phase by phase, in one process on the
 * loopback simulator: the reply, the bounded parse (whole, and 256 accounts at a time), the
 * classification, the split store's put (two parents: the first two runs write each anew, the
 * later ones rescan them) and the read of the labels. Each phase's wall time and this process's
 * CPU time, median and range of `--runs`; the put's Redis CPU from `INFO cpu` (the Redis of
 * `REDIS_URL`, shared with whatever else uses it). `--profile DIR` writes a V8 CPU profile of each
 * classification there. Keys are made under a prefix of the run's own and deleted.
 *
 *   npx tsx bench/cold-phases.ts --count 10000 --runs 5
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import {
  ELEMENTS_PER_RANGE,
  parseBoundedJson,
  parseBoundedJsonSplit,
} from '../worker/rpc/bounded-json.js';
import { classifyProgramAccounts, SCAN_SLICE } from '../worker/sns/discovery-decode.js';
import { SplitEntries } from '../src/core/cache/split-entries.js';
import { redisKeys } from '../src/core/redis-keys.js';
import type { Member } from '../src/core/cache/entry.js';
import { NAME_PROGRAM_ID, toBase58 } from '../src/core/sns/pda.js';
import { SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { BENCH_REDIS_URL } from './lib.js';
import { seedParent } from './seed-parent.js';

const { values: args } = parseArgs({
  options: {
    count: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '5' },
    profile: { type: 'string' },
  },
});
const COUNT = Number(args.count);
const RUNS = Number(args.runs);

const chain = new SimChain();
const { parentKey } = seedParent(chain, { parent: 'phases', count: COUNT, seed: 1 });
const sim = await startRpcSimulator({ chain, maxBodyBytes: 1 << 30 });
const redis = new Redis(BENCH_REDIS_URL);
const prefix = `bench-phases-${process.pid}`;
const keys = redisKeys(prefix);
const entries = new SplitEntries(redis, keys, 3_600_000);

const profiler = new Session();
profiler.connect();
await profiler.post('Profiler.enable');

/** Per phase: wall ms and this process's CPU ms, each run. */
const times = new Map<string, { wall: number[]; cpu: number[] }>();
const time = async <T>(name: string, fn: () => T | Promise<T>): Promise<T> => {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const out = await fn();
  const c = process.cpuUsage(c0);
  const list = times.get(name) ?? { wall: [], cpu: [] };
  list.wall.push(performance.now() - t0);
  list.cpu.push((c.user + c.system) / 1000);
  times.set(name, list);
  return out;
};

const request = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'getProgramAccounts',
  params: [
    toBase58(NAME_PROGRAM_ID),
    {
      encoding: 'base64',
      commitment: 'confirmed',
      withContext: true,
      filters: [{ memcmp: { offset: 0, bytes: toBase58(parentKey) } }],
      dataSlice: SCAN_SLICE,
    },
  ],
});

try {
  for (let run = 0; run < RUNS; run++) {
    const body = await time('reply (simulator, HTTP)', async () => {
      const res = await fetch(sim.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: request,
      });
      return new Uint8Array(await res.arrayBuffer());
    });
    await time('parse whole (bounds, text, JSON.parse)', () => parseBoundedJson(body));
    await time('parse split (bounds, 256 accounts a parse)', () => {
      const { elements } = parseBoundedJsonSplit(body, ['result', 'value']);
      const kept: unknown[] = [];
      const count = elements?.count ?? 0;
      for (let i = 0; i < count; i += ELEMENTS_PER_RANGE) {
        kept.push(...(elements?.range(i, Math.min(i + ELEMENTS_PER_RANGE, count)) ?? []));
      }
      return kept;
    });
    if (args.profile) await profiler.post('Profiler.start');
    const found = await time('classify (parse included)', () =>
      classifyProgramAccounts('getProgramAccounts', body, 1, parentKey),
    );
    if (args.profile) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(`${args.profile}/classify-${run}.cpuprofile`, JSON.stringify(profile));
    }
    const members: Record<string, Member> = {};
    const reverses = new Map<string, string>();
    found.labels.forEach((l, i) => {
      members[found.children[i] as string] = [l, found.owners[i] as string];
      reverses.set(found.children[i] as string, found.reverses[i] as string);
    });
    const parent = `phases${run % 2}`;
    const redisCpu = async () => {
      const info = await redis.info('cpu');
      const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1]);
      return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
    };
    const redis0 = await redisCpu();
    await time(run < 2 ? 'put (first scan)' : 'put (rescan)', () =>
      entries.put(
        'e',
        parent,
        { labels: found.labels, fetchedAt: Date.now(), slot: found.slot },
        members,
        reverses,
      ),
    );
    const redisMs = (await redisCpu()) - redis0;
    const list = times.get('put: Redis CPU') ?? { wall: [], cpu: [] };
    list.wall.push(NaN);
    list.cpu.push(redisMs);
    times.set('put: Redis CPU', list);
    const got = await time('get (labels read)', () => entries.get('e', parent));
    if (got?.labels.length !== found.labels.length)
      throw new Error(`read ${got?.labels.length} labels`);
  }
  const median = (l: number[]) => [...l].sort((a, b) => a - b)[Math.floor(l.length / 2)] as number;
  const r = (n: number) => n.toFixed(0).padStart(5);
  for (const [name, { wall, cpu }] of times) {
    console.log(
      `${name.padEnd(42)} wall ${r(median(wall))} ms (${r(Math.min(...wall))} to ${r(Math.max(...wall))})` +
        `  CPU ${r(median(cpu))} ms (${r(Math.min(...cpu))} to ${r(Math.max(...cpu))})`,
    );
  }
} finally {
  const stale = await redis.keys(`${prefix}:*`);
  if (stale.length > 0) await redis.del(...stale);
  await redis.quit();
  await sim.close();
}
