/**
 * The command line of every bench script: node:util `parseArgs` with `--help`, and refusals that
 * are one line and a usage, not a stack trace. Called at the top of a script, before it starts
 * anything, so `--help`, a bad option and an unsupported Node cost no server, Redis key or file.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

// semver (a dev dependency, the one scripts/check-engines.mjs uses) ships no types.
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
};

export type BenchOption = {
  /** What the option does, for `--help`. */
  description: string;
  /** The value's placeholder in `--help` (`N`, `REV`, `PATH`). */
  value: string;
  default?: string;
  /** The value must be a number of at least this (seconds, counts). */
  min?: number;
  /** The value must be one of these (each of them, with `list`). */
  choices?: readonly string[];
  /** The value is a comma-separated list, each item one of `choices`. */
  list?: boolean;
};

export type BenchCommand<O extends Record<string, BenchOption>> = {
  /** How to run it: `npm run bench`. */
  command: string;
  /** What it measures and prints, one or two sentences. */
  summary: string;
  /** How long a run takes with the defaults, and what that depends on. */
  duration: string;
  /** Which files it writes, or that it writes none. */
  writes: string;
  options: O;
};

/** The options of every script that drives load through alternating slices (run, ab). */
export const LOAD_OPTIONS = {
  slice: { value: 'N', default: '2', min: 1, description: 'seconds of each alternating slice' },
  warmup: { value: 'N', default: '2', min: 0, description: 'unrecorded seconds per server first' },
  connections: { value: 'N', default: '16', min: 1, description: 'concurrent connections' },
} as const satisfies Record<string, BenchOption>;

/** Parsed values: a string for options with a default, `string | undefined` for the others. */
export type BenchFlags<O extends Record<string, BenchOption>> = {
  [K in keyof O]: O[K] extends { default: string } ? string : string | undefined;
};

/** Where option descriptions start in `--help`. */
const COLUMN = 22;

/** Exit status of a refused command line (the convention of sh and getopt tools). */
const USAGE_ERROR = 2;

/** Exit status of a bench refused on a Node outside `engines` (as scripts/check-engines.mjs). */
const UNSUPPORTED_NODE = 1;

/**
 * Why a bench may not run on Node `version`, in one line, or undefined when package.json's
 * `engines.node` accepts it. On another Node the gateway is not the one deployed (it may fail
 * where a supported one answers), so its figures would mislead rather than measure.
 */
export function nodeRefusal(version: string = process.version): string | undefined {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    engines: { node: string };
  };
  const range = pkg.engines.node;
  if (semver.satisfies(version, range)) return undefined;
  return `Node ${version} is not supported (package.json engines: node ${range}); run the bench on one of those`;
}

/** `text` broken into lines of at most `width` characters, each after `indent`. */
function wrap(text: string, width = 80, indent = ''): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((l, i) => (i === 0 ? l : indent + l)).join('\n');
}

function usageLine(spec: BenchCommand<Record<string, BenchOption>>): string {
  return `usage: ${spec.command} -- [--help] [options]`;
}

/** The `--help` text: usage, what it does, how long it takes, what it writes, the options. */
export function helpText(spec: BenchCommand<Record<string, BenchOption>>): string {
  const rows = Object.entries(spec.options).map(([name, o]) => {
    const left = `  --${name} ${o.value}`.padEnd(COLUMN);
    const choices = o.choices ? `${o.list ? ', any of' : ':'} ${o.choices.join(', ')}` : '';
    const def = o.default !== undefined ? ` [default: ${o.default}]` : '';
    return left + wrap(`${o.description}${choices}${def}`, 80, ' '.repeat(COLUMN));
  });
  return [
    usageLine(spec),
    '',
    wrap(spec.summary),
    '',
    wrap(`Takes ${spec.duration}`, 80, '  '),
    wrap(`Writes ${spec.writes}`, 80, '  '),
    wrap(
      'Environment: REDIS_URL (redis://127.0.0.1:6379/9); the run deletes the Redis keys it made.',
      80,
      '  ',
    ),
    '',
    'Options:',
    ...rows,
    `${'  --help, -h'.padEnd(COLUMN)}print this and exit`,
    '',
  ].join('\n');
}

/**
 * Parses `argv` against `spec`. On a Node outside `engines` ({@link nodeRefusal}) it prints one
 * line on stderr and exits 1, whatever `argv` says. `--help` prints {@link helpText} on stdout and
 * exits 0; an unknown option, a positional, a missing value, a value out of `choices` or under
 * `min` prints one line and the usage on stderr and exits 2.
 */
export function parseBenchArgs<O extends Record<string, BenchOption>>(
  spec: BenchCommand<O>,
  argv: readonly string[] = process.argv.slice(2),
): BenchFlags<O> {
  const unsupported = nodeRefusal();
  if (unsupported !== undefined) {
    process.stderr.write(`${spec.command}: ${unsupported}\n`);
    process.exit(UNSUPPORTED_NODE);
  }
  const refuse = (message: string): never => {
    process.stderr.write(
      `${spec.command}: ${message.split('\n')[0] ?? message}\n${usageLine(spec)}\n`,
    );
    process.exit(USAGE_ERROR);
  };
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; default?: string }> =
    { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) {
    options[name] = { type: 'string', ...(o.default !== undefined ? { default: o.default } : {}) };
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }));
  } catch (err) {
    return refuse(err instanceof Error ? err.message : String(err));
  }
  if (values.help === true) {
    process.stdout.write(helpText(spec));
    process.exit(0);
  }
  for (const [name, o] of Object.entries(spec.options)) {
    const value = values[name];
    if (typeof value !== 'string') continue;
    const items = o.list ? value.split(',').map((s) => s.trim()) : [value];
    const bad = o.choices && items.find((item) => !o.choices?.includes(item));
    if (o.choices && bad !== undefined) {
      const what = o.list ? 'a comma-separated list of' : 'one of';
      refuse(`--${name} must be ${what} ${o.choices.join(', ')}, not '${bad.slice(0, 40)}'`);
    }
    if (o.min !== undefined && !(Number(value) >= o.min && value.trim() !== '')) {
      refuse(`--${name} must be a number of at least ${o.min}, not '${value.slice(0, 40)}'`);
    }
  }
  delete values.help;
  return values as BenchFlags<O>;
}
