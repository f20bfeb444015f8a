/**
 * `npm run bench:registry`'s options, parsed from the command line once (bench/cli.ts), and the
 * figures the bench holds fixed: targets, prices, concurrency.
 */
import { parseBenchArgs } from '../cli.js';
import { BENCH_REDIS_URL } from '../lib.js';

export const MODES = ['registry', 'parents'] as const;
export type Mode = (typeof MODES)[number];

/** The targets (BENCHMARKS.md, "registry"). */
export const TARGETS = {
  credits: 5_000,
  bootstrapMs: 10 * 60_000,
  p99Ms: 50,
  showMs: 2_000,
  bytesPerSubdomain: 300,
  rssBytes: 300e6,
};
/** Helius's prices: `getProgramAccounts` and each `getProgramAccountsV2` page 10, every other call 1. */
export const HELIUS_CREDITS = (method: string) =>
  method === 'getProgramAccounts' || method === 'getProgramAccountsV2' ? 10 : 1;
/** Requests of the never-asked parents at once, all from one address (the bench's). */
export const ASK_CONCURRENCY = 4;
/** How long the index may take to serve, and a change to show, before the bench gives up. */
export const BUILD_TIMEOUT_MS = 15 * 60_000;
/** Requests in flight at once from the one address of (f)'s hostile client. */
export const HOSTILE_CONCURRENCY = 8;

/** What one run was asked to do. */
export type RegistryOptions = Readonly<{
  sizes: Readonly<{
    topLevel: number;
    subdomains: number;
    parents: number;
    largest: number;
    records: number;
    v1Records: number;
    orphanReverses: number;
  }>;
  /** Name-program changes made while the index is built. */
  changes: number;
  /** Parents never asked, in (c). */
  asked: number;
  /** Milliseconds the simulator's HTTP reads lag its websocket node. */
  lagMs: number;
  /** Requests of each hot parent in (f). */
  hotAsks: number;
  /** Made-up parents asked in (f). */
  hostile: number;
  seed: number;
  /** Parents per kind of change measured in (d). */
  watch: number;
  /** How long a change may take to show in (d) before it counts as never. */
  showTimeoutMs: number;
  modes: readonly Mode[];
  /** Whether to write the registry section of BENCHMARKS.md. */
  write: boolean;
  /** Whether the gateway's processes run the compiled build (bench/lib.ts `Child.start`). */
  compiled: boolean;
  /** The options as given, for the report. */
  args: string;
  redisUrl: string;
}>;

/** Parses `argv` (exits with the usage on a bad option, with the help on `--help`). */
export function registryOptions(argv: readonly string[] = process.argv.slice(2)): RegistryOptions {
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
      'about 1.5 minutes with the defaults on 2 cores lightly loaded, about 4 at a load average ' +
      'near 20 (seeding the registry, then each mode: the bootstrap, 1,000 parents asked and ' +
      'checked with the SDK); a tiny registry (--top-level 200 ' +
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
        description:
          'parents nobody asked per kind of change timed (created, transferred, deleted)',
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
  return Object.freeze({
    sizes: Object.freeze({
      topLevel: count('top-level'),
      subdomains: count('subdomains'),
      parents: count('parents'),
      largest: count('largest'),
      records: count('records'),
      v1Records: count('v1-records'),
      orphanReverses: count('orphans'),
    }),
    changes: count('changes'),
    asked: count('asked'),
    lagMs: count('lag'),
    hotAsks: count('hot'),
    hostile: count('hostile'),
    seed: count('seed'),
    watch: count('watch'),
    showTimeoutMs: count('give-up') * 1000,
    modes: (flags.index ?? '').split(',').map((m) => m.trim()) as Mode[],
    write: flags.write === 'yes',
    compiled: process.env.BENCH_CODE === 'dist',
    args: argv.join(' '),
    redisUrl: BENCH_REDIS_URL,
  });
}
