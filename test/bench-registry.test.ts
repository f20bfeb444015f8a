/**
 * `npm run bench:registry` runs end to end on a tiny registry: the simulator seeded, the gateway
 * started as processes, parents asked over HTTP and checked against the SDK, the report printed,
 * BENCHMARKS.md left alone (`--write no`), and its Redis keys deleted. The bench's one address may
 * start exactly as many refreshes a window as (c) asks for: the changed parents of (b) and (d) are
 * asked by readers of their own, so none of their answers is a 429 of that address's limit.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The cold-miss limit of one address: exactly the parents (c) asks from the bench's address. */
const ASKED = '20';

const TINY = [
  ...['--top-level', '300', '--subdomains', '120', '--parents', '80', '--largest', '10'],
  ...['--records', '20', '--v1-records', '10', '--orphans', '5'],
  ...[
    '--changes',
    '6',
    '--asked',
    ASKED,
    '--watch',
    '1',
    '--lag',
    '200',
    '--write',
    'no',
    '--give-up',
    '3',
  ],
];

type Run = { code: number; stdout: string; stderr: string };

function run(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'bench/registry.ts', ...args],
      {
        cwd: root,
        timeout: 280_000,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          ...process.env,
          REDIS_URL: inject('redisUrl'),
          COLD_MISS_LIMIT: ASKED,
          COLD_MISS_WINDOW_SECONDS: '600',
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The cells of the report's row starting with `measure`. */
function row(stdout: string, measure: string): string[] {
  const line = stdout.split('\n').find((l) => l.startsWith(`| ${measure}`)) ?? '';
  return line
    .replace(/^\|\s*|\s*\|$/g, '')
    .split(' | ')
    .map((c) => c.trim());
}

describe('npm run bench:registry', () => {
  it('runs on a tiny registry and reports every measure', { timeout: 300_000 }, async () => {
    const { code, stdout, stderr } = await run([...TINY, '--index', 'parents']);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain('seeded 875 accounts');
    expect(stdout).toMatch(
      /\| measure +\| target +\| `registry` +\| met +\| `parents` \(baseline\)/,
    );
    // The per-parent path: every answer 200 and the SDK's, a scan per parent never asked.
    const identical = row(stdout, '(c) answers 200 and identical to `findSubdomains`');
    expect(identical[4]).toBe('20 (20 × 200)');
    expect(row(stdout, '(c) 20 parents never asked, one address')[4]).toMatch(/^\d+$/);
    expect(row(stdout, '(b) 6 changes while it is built')[4]).toMatch(
      /^0 of \d+ wrong, 0 not answered 200 /,
    );
    // Every poll of (d) answered: a change is shown or not, never hidden behind a 429.
    expect(stdout).toMatch(/changes under parents nobody asked: .*; polls not answered 200: 0\n/);
    for (const kind of ['created', 'transferred', 'deleted']) {
      expect(stdout, kind).toMatch(new RegExp(`\\| \\(d\\) subdomain ${kind}`));
    }
    expect(stdout).toContain('--write no: BENCHMARKS.md left as it was');
    expect(stderr).toMatch(/deleted \d+ Redis keys under snsgw-bench-/);
  });
});
