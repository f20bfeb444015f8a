/**
 * Where the code lives (docs/design.md, "Shape"): a file's folder says which process runs it.
 * src/api/ runs only in the API, worker/ only in the worker, src/core/ in both; tools/ holds
 * the simulator. The folder-level graph drawn in the design is the one the imports make, and each
 * folder holds what its name claims: nothing under src/core/ that only one process reaches.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Every TypeScript file of the built code and the tools, repository-relative, `/`-separated. */
function sources(): string[] {
  const under = (dir: string) =>
    readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join(dir, f).split('\\').join('/'));
  return ['main.ts', ...under('src'), ...under('worker'), ...under('tools')];
}

/** The repository files a source imports (static and dynamic relative imports). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*'(\.\.?\/[^']+)'/g)].map((m) =>
    normalize(join(dirname(file), (m[1] ?? '').replace(/\.js$/, '.ts')))
      .split('\\')
      .join('/'),
  );
}

/** The folder a file belongs to in the graph: main.ts, worker, src/<part> or tools/<tool>. */
function partOf(file: string): string {
  if (file === 'main.ts') return file;
  const [top, part] = file.split('/');
  if (top === 'worker') return top;
  return `${top}/${part}`;
}

const files = sources();
const graph = new Map(files.map((f) => [f, importsOf(f)]));

/** Every file reached from `start` through imports, `start` included. */
function reach(start: string): Set<string> {
  const seen = new Set<string>();
  const todo = [start];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    todo.push(...(graph.get(file) ?? []));
  }
  return seen;
}

describe('the layout', () => {
  it('puts every file of src/ under api/ or core/', () => {
    const elsewhere = files.filter((f) => f.startsWith('src/') && !/^src\/(api|core)\//.test(f));
    expect(elsewhere).toEqual([]);
  });

  it('draws in docs/design.md the folder graph the imports make', () => {
    const made = new Map<string, Set<string>>();
    for (const [file, imports] of graph) {
      const from = partOf(file);
      const to = made.get(from) ?? new Set<string>();
      made.set(from, to);
      for (const target of imports) {
        expect(files, `${file} imports ${target}`).toContain(target);
        if (partOf(target) !== from) to.add(partOf(target));
      }
    }
    const design = readFileSync(join(ROOT, 'docs/design.md'), 'utf8');
    const drawn = new Map<string, Set<string>>();
    for (const line of design.matchAll(/^(main\.ts|worker|src\/\w+|tools\/[\w-]+) +-> (.+)$/gm)) {
      const targets = line[2] === '(nothing)' ? [] : (line[2] ?? '').split(', ');
      drawn.set(line[1] ?? '', new Set(targets));
    }
    const sorted = (m: Map<string, Set<string>>): [string, string[]][] =>
      [...m]
        .map(([k, v]): [string, string[]] => [k, [...v].sort()])
        .sort(([a], [b]) => a.localeCompare(b));
    expect(sorted(drawn)).toEqual(sorted(made));
  });

  it('keeps in src/core/ only what both processes run', () => {
    const api = reach('src/api/runtime.ts');
    const worker = reach('worker/runtime.ts');
    // What the entry imports itself, beside the two runtimes, runs whatever the role.
    const entry = (graph.get('main.ts') ?? [])
      .filter((f) => !f.startsWith('src/api/') && !f.startsWith('worker/'))
      .flatMap((f) => [...reach(f)]);
    const shared = new Set([...entry, ...[...api].filter((f) => worker.has(f))]);
    const onlyOne = files.filter((f) => f.startsWith('src/core/') && !shared.has(f));
    expect(onlyOne.map((f) => relative('src/core', f))).toEqual([]);
  });
});

describe('the runtime dependencies', () => {
  type Manifest = {
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
  };
  const manifest = (path: string) =>
    JSON.parse(readFileSync(join(ROOT, path, 'package.json'), 'utf8')) as Manifest;
  const runtime = Object.keys(manifest('.').dependencies ?? {});
  /** The packages the code that runs loads (type-only imports load nothing), with who loads them. */
  const loaded = new Map<string, string[]>();
  for (const file of files.filter((f) => !f.startsWith('tools/'))) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const specs = text.matchAll(
      /^\s*import\s+(?!type\b)[^;]*?\bfrom\s+'([^'./][^']*)'|^\s*import\s+'([^'./][^']*)'|\bimport\(\s*'([^'./][^']*)'/gm,
    );
    for (const m of specs) {
      const spec = m[1] ?? m[2] ?? m[3] ?? '';
      if (spec.startsWith('node:')) continue;
      const name = spec
        .split('/')
        .slice(0, spec.startsWith('@') ? 2 : 1)
        .join('/');
      loaded.set(name, [...(loaded.get(name) ?? []), file]);
    }
  }

  it('are every package the code of main.ts, src/ and worker/ loads', () => {
    const missing = [...loaded].filter(([name]) => !runtime.includes(name));
    expect(missing.map(([name, by]) => `${name} (${by.join(', ')})`)).toEqual([]);
    // What the image leaves out: the SDK and web3.js serve the tests and the simulator only.
    expect(loaded.has('@solana/web3.js')).toBe(false);
    expect(loaded.has('@bonfida/spl-name-service')).toBe(false);
  });

  it('are nothing else, bar the peers of those packages', () => {
    const peers = new Set(
      [...loaded.keys()].flatMap((name) =>
        Object.keys(manifest(`node_modules/${name}`).peerDependencies ?? {}),
      ),
    );
    expect(runtime.filter((name) => !loaded.has(name) && !peers.has(name))).toEqual([]);
  });
});

describe('file sizes', () => {
  it('names in docs/design.md every file of src/, worker/ or tools/ over 400 lines', () => {
    const design = readFileSync(join(ROOT, 'docs/design.md'), 'utf8');
    const section = /\*\*Files over about 400 lines\.\*\*([\s\S]*?)\n\*\*/.exec(design)?.[1] ?? '';
    const named = new Set(
      [...section.matchAll(/`((?:src|worker|tools)\/[^`]+\.ts)`/g)].map((m) => m[1]),
    );
    const long = files.filter(
      (f) => f !== 'main.ts' && readFileSync(join(ROOT, f), 'utf8').split('\n').length > 400,
    );
    expect(long.filter((f) => !named.has(f))).toEqual([]);
  });
});

describe('what the repository cites', () => {
  /** Every text file a reader meets: code, tests, benches, tools, scripts and the documents. */
  const texts = (): string[] => {
    const under = (dir: string) =>
      readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => /\.(ts|mjs|sh|md|lua)$/.test(f))
        .map((f) => join(dir, f).split('\\').join('/'));
    const top = readdirSync(ROOT).filter((f) => /\.(ts|md)$/.test(f));
    return [
      ...top,
      ...['src', 'worker', 'test', 'bench', 'tools', 'scripts', 'docs'].flatMap(under),
    ];
  };
  // An issue or pull request by its number (a hash and digits, `issue` and digits, with or
  // without `owner/repo` before it) or a folder beside the repository (dot-dot, `shared`): a
  // reader of this repository cannot open either.
  const CITATION =
    /(?:^|[\s(,;])#\d+\b|[\w.-]+\/[\w.-]+#\d+|\bissues? \d+|\bissue's\b|\.\.\/shared\b/i;

  it('names nothing outside the repository: no issue numbers, no paths beside it', () => {
    const cited: string[] = [];
    for (const file of texts()) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const hit = CITATION.exec(line);
          if (hit) cited.push(`${file}:${i + 1}: ${hit[0].trim()}`);
        });
    }
    expect(cited).toEqual([]);
  });
});
