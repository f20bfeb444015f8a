/**
 * The bench scripts' command line (bench/cli.ts): `--help` prints usage, duration and what the run
 * writes, then exits 0; a bad option prints one line and the usage and exits 2, no stack trace.
 * Both happen before a script starts anything, so these runs start no server; so does the refusal
 * of a Node outside `engines`, whose figures would not be the gateway's.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { nodeRefusal } from '../bench/cli.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  scripts: Record<string, string>;
  engines: { node: string };
};
const scripts = pkg.scripts;

/** Every npm script that runs a file of bench/, with that file. */
const benches = Object.entries(scripts).flatMap(([name, command]) => {
  const file = /^tsx (bench\/[\w-]+\.ts)$/.exec(command)?.[1];
  return file ? [{ name, file }] : [];
});

type Run = { code: number; stdout: string; stderr: string };

function run(file: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', file, ...args],
      { cwd: root, timeout: 30_000, env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs `tasks` two at a time (each is a whole process; the machine has two cores). */
async function inTwos<T>(tasks: Array<() => Promise<T>>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < tasks.length; i += 2) {
    out.push(...(await Promise.all(tasks.slice(i, i + 2).map((t) => t()))));
  }
  return out;
}

describe('bench scripts', () => {
  it('are the nine BENCHMARKS.md lists', () => {
    expect(benches.map((b) => b.name).sort()).toEqual(
      [
        'bench',
        'bench:ab',
        'bench:freshness',
        'bench:hostile',
        'bench:longtail',
        'bench:memory',
        'bench:profile',
        'bench:registry',
        'soak',
      ].sort(),
    );
  });

  it('are each in BENCHMARKS.md with how long they take and what they write', () => {
    const doc = readFileSync(`${root}BENCHMARKS.md`, 'utf8');
    const section = doc.slice(doc.indexOf('## Running them'));
    for (const { name } of benches) {
      const start = new RegExp(`^\\| \`npm run ${name}[\` ]`);
      const row = section.split('\n').find((l) => start.test(l)) ?? '';
      const cells = row.split(' | ').map((c) => c.trim());
      expect(cells, name).toHaveLength(4);
      expect(cells[2], name).toMatch(/^about /);
      expect(cells[3], name).not.toBe('');
    }
  });

  it('print usage, duration and what they write on --help, and exit 0', async () => {
    const runs = await inTwos(benches.map((b) => () => run(b.file, ['--help'])));
    benches.forEach(({ name }, i) => {
      const { code, stdout, stderr } = runs[i] as Run;
      expect(code, `${name}: ${stderr}`).toBe(0);
      expect(stdout.split('\n')[0], name).toBe(`usage: npm run ${name} -- [--help] [options]`);
      expect(stdout, name).toMatch(/^Takes about .+ with the defaults/m);
      expect(stdout, name).toMatch(/^Writes /m);
      // Each lists its options, one a line, with what it does.
      expect(stdout, name).toMatch(/^Options:\n {2}--[a-z]+ [A-Z]+ +\S/m);
      expect(stderr, name).toBe('');
    });
  }, 60_000);

  it('refuse an unknown option or a bad value with one line and the usage, exit 2', async () => {
    // The refusals are bench/cli.ts's, the same for every script: four scripts show them.
    const cases = [
      {
        name: 'bench',
        file: 'bench/run.ts',
        args: ['--no-such-option'],
        says: /^npm run bench: Unknown option '--no-such-option'/,
      },
      {
        name: 'bench',
        file: 'bench/run.ts',
        args: ['--seconds', 'soon'],
        says: /--seconds must be a number of at least 1, not 'soon'$/,
      },
      {
        name: 'bench:freshness',
        file: 'bench/freshness.ts',
        args: ['--parents', '3'],
        says: /--parents must be a number of at least 5, not '3'$/,
      },
      {
        name: 'bench:profile',
        file: 'bench/profile.ts',
        args: ['--scenario', 'tepid'],
        says: /--scenario must be one of hot, cold, warm, not 'tepid'$/,
      },
      {
        name: 'bench:hostile',
        file: 'bench/hostile.ts',
        args: ['--only', 'rpc,nope'],
        says: /--only must be a comma-separated list of rpc, spend, .+, not 'nope'$/,
      },
    ];
    const runs = await inTwos(cases.map((c) => () => run(c.file, c.args)));
    cases.forEach(({ name, args, says }, i) => {
      const { code, stdout, stderr } = runs[i] as Run;
      const what = `${name} ${args.join(' ')}`;
      expect(code, `${what}: ${stderr}`).toBe(2);
      expect(stdout, what).toBe('');
      const lines = stderr.trimEnd().split('\n');
      expect(lines, what).toHaveLength(2);
      expect(lines[0], what).toMatch(says);
      expect(lines[1], what).toBe(`usage: npm run ${name} -- [--help] [options]`);
    });
  }, 60_000);

  it('refuse a Node outside engines in one line naming it and the range', () => {
    expect(nodeRefusal(process.version)).toBeUndefined();
    const refusal = nodeRefusal('v20.20.2');
    expect(refusal).toContain('Node v20.20.2');
    expect(refusal).toContain(pkg.engines.node);
    expect(refusal).not.toContain('\n');
  });
});
