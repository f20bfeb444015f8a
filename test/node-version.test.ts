/**
 * One Node release everywhere: names are lower-cased with the Unicode tables of the running
 * Node's ICU and derivations are cached as immutable, so the Node that CI tests, the one the image
 * runs and the Unicode version docs/operations.md documents must be one and the same. Moving to another
 * Node makes this fail until docs/operations.md, the docstring of normalizeName and the Dockerfile say so.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { normalizeName } from '../src/api/sns/names.js';

/** The Unicode version the normalization follows, as docs/operations.md states it. */
const UNICODE = '17.0';

// semver (a dev dependency, the one scripts/check-engines.mjs uses) ships no types.
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
};

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

describe('Node release and Unicode version', () => {
  it('runs on the Unicode version docs/operations.md and normalizeName document', () => {
    expect(process.versions.unicode).toBe(UNICODE);
    expect(read('docs/operations.md')).toContain(`Unicode ${UNICODE}`);
    expect(read('src/api/sns/names.ts')).toContain(`Unicode ${UNICODE}`);
    // A character cased only since Unicode 16.0 (U+1C89 CYRILLIC CAPITAL LETTER TJE): an older
    // Node leaves it as it is, so the same name would derive another key there.
    expect(normalizeName('\u1C89')).toBe('\u1C8A');
  });

  it('pins the image to the Node release that runs the tests, and checks its Unicode version', () => {
    const dockerfile = read('Dockerfile');
    const image = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-slim$/m.exec(dockerfile)?.[1];
    expect(image).toBe(process.versions.node);
    expect(dockerfile.match(/^FROM \$\{NODE_IMAGE\} AS \w+$/gm)).toHaveLength(2);
    expect(dockerfile).not.toMatch(/^FROM node:/m);
    expect(dockerfile).toContain(`u!=='${UNICODE}'`);
  });

  it('accepts only that Node line in package.json engines', () => {
    const range = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    expect(semver.satisfies(process.versions.node, range)).toBe(true);
    for (const other of ['20.18.0', '21.0.0', '22.12.0', '24.0.0']) {
      expect(semver.satisfies(other, range), other).toBe(false);
    }
  });
});
