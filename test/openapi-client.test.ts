import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from './support/gateway.js';

/**
 * The OpenAPI document as a client sees it (README, "Routes"; /docs): every operation named, its
 * answers shared components, its examples runnable against the demo chain as `npm run rpc:sim`
 * serves it (Swagger UI's "Try it out" fills them in), and a client generated from it by a
 * maintained generator (openapi-typescript, with openapi-fetch as its runtime) compiles under the
 * project's strictness and gets the demo's answers.
 */

type Schema = { $ref?: string; allOf?: Schema[]; type?: string };
type Media = { schema?: Schema; example?: unknown };
type Parameter = { name: string; in: 'path' | 'query'; example?: string; required?: boolean };
type Operation = {
  operationId?: string;
  parameters?: Parameter[];
  responses: Record<string, { content?: Record<string, Media> }>;
};
type Document = {
  paths: Record<string, { get: Operation }>;
  components?: { schemas?: Record<string, Schema> };
};

const ROOT = fileURLToPath(new URL('..', import.meta.url));

let gw: Gateway;
let doc: Document;
beforeAll(async () => {
  gw = await startGateway();
  // What Swagger UI loads (/docs/json); /openapi.json serves the same document.
  const res = await fetch(`${gw.baseUrl}/docs/json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Document;
});
afterAll(() => gw.close());

const operations = () => Object.entries(doc.paths).map(([path, { get }]) => ({ path, op: get }));

/** The request "Try it out" makes with every parameter's example filled in. */
function exampleRequest(path: string, op: Operation): string {
  let url = path;
  const query = new URLSearchParams();
  for (const p of op.parameters ?? []) {
    if (p.example === undefined) continue;
    if (p.in === 'path') url = url.replace(`{${p.name}}`, encodeURIComponent(String(p.example)));
    else query.set(p.name, String(p.example));
  }
  const q = query.toString();
  return q ? `${url}?${q}` : url;
}

/** Every string in `value`, with where it is. */
function* strings(value: unknown, at = '#'): Generator<[string, string]> {
  if (typeof value === 'string') yield [at, value];
  else if (Array.isArray(value))
    for (const [i, v] of value.entries()) yield* strings(v, `${at}/${i}`);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) yield* strings(v, `${at}/${k}`);
  }
}

describe('the OpenAPI document', () => {
  it('names every operation and answers with shared component schemas', () => {
    const ids = operations().map(({ op }) => op.operationId);
    expect(
      ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id)),
      String(ids),
    ).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(Object.keys(doc.components?.schemas ?? {})).toEqual(
      expect.arrayContaining([
        'ErrorEnvelope',
        'RecordKey',
        'RecordKeys',
        'RecordTypes',
        'SubdomainList',
        'SubdomainDetail',
        'SubdomainDetails',
        'Liveness',
        'Readiness',
        'NotReady',
      ]),
    );
    for (const { path, op } of operations()) {
      for (const [status, answer] of Object.entries(op.responses)) {
        const schema = answer.content?.['application/json']?.schema;
        if (!schema) continue;
        const ref = schema.$ref ?? schema.allOf?.[0]?.$ref;
        expect(ref, `${path} ${status}`).toMatch(/^#\/components\/schemas\/[A-Z]\w+$/);
      }
    }
  });

  it('names no host but loopback and gives no URL to look up', () => {
    const hosts = [...strings(doc)].flatMap(([at, text]) =>
      [...text.matchAll(/\b[a-z][a-z0-9+.-]*:\/\/([^/\s`'")?#]+)/gi)].map((m) => `${at}: ${m[1]}`),
    );
    expect(hosts.filter((h) => !/: (127\.0\.0\.1|localhost)(:\d+)?$/.test(h))).toEqual([]);
    // A URL example would be sent by "Try it out" (?rpc= makes a DNS lookup of its host).
    for (const { path, op } of operations()) {
      for (const p of op.parameters ?? []) {
        expect(URL.canParse(String(p.example)), `${path} ${p.name}`).toBe(false);
      }
    }
  });

  it('has examples that the demo chain answers, pages that are not empty', async () => {
    for (const { path, op } of operations()) {
      const url = exampleRequest(path, op);
      const res = await fetch(gw.baseUrl + url, { signal: AbortSignal.timeout(10_000) });
      expect(res.status, url).toBe(200);
      if (path.endsWith('/events')) {
        const reader = res.body!.getReader();
        const { value } = (await reader.read()) as { value?: Uint8Array };
        const first = new TextDecoder().decode(value);
        await reader.cancel();
        expect(first, url).toContain('event: subdomains');
        continue;
      }
      const text = await res.text();
      if (path === '/metrics') continue;
      const body = JSON.parse(text) as { s: string; result: unknown; next?: unknown };
      expect(body.s, url).toBe('ok');
      if (Array.isArray(body.result)) expect(body.result.length, url).toBeGreaterThan(0);
    }
    // The paged examples together (limit, after, prefix) pick a page of the demo's list.
    const list = doc.paths['/subdomains/{parent}']!.get;
    expect(
      await (await fetch(gw.baseUrl + exampleRequest('/subdomains/{parent}', list))).json(),
    ).toEqual({ s: 'ok', result: ['hollaaa'], next: null });
    // The /details example row is the demo's.
    const details = doc.paths['/subdomains/{parent}/details']!.get;
    const example = details.responses['200']?.content?.['application/json']?.example as {
      result: unknown[];
    };
    const live = (await (await fetch(`${gw.baseUrl}/subdomains/67679/details`)).json()) as {
      result: unknown[];
    };
    expect(live.result).toContainEqual(example.result[0]);
  });
});

/** A small program using the generated types by their names, checked and run by the test. */
const CLIENT = `
import createClient from 'openapi-fetch';
import type { components, operations, paths } from './api.js';

export type SubdomainList = components['schemas']['SubdomainList'];
export type SubdomainDetails = components['schemas']['SubdomainDetails'];
export type RecordKey = components['schemas']['RecordKey'];
export type RecordTypes = components['schemas']['RecordTypes'];
export type ErrorEnvelope = components['schemas']['ErrorEnvelope'];
type PageQuery = NonNullable<operations['getSubdomains']['parameters']['query']>;

export function demoClient(baseUrl: string) {
  const client = createClient<paths>({ baseUrl });
  return {
    async recordKey(domain: string, record: string): Promise<RecordKey> {
      const { data, error } = await client.GET('/record-key-v2/{domain}/{record}', {
        params: { path: { domain, record } },
      });
      if (!data) throw new Error(JSON.stringify(error));
      return data;
    },
    async recordTypes(): Promise<RecordTypes> {
      const { data, error } = await client.GET('/types/record');
      if (!data) throw new Error(JSON.stringify(error));
      return data;
    },
    async subdomains(parent: string, query: PageQuery = {}): Promise<SubdomainList> {
      const { data, error } = await client.GET('/subdomains/{parent}', {
        params: { path: { parent }, query },
      });
      if (!data) throw new Error(JSON.stringify(error));
      return data;
    },
    async details(parent: string): Promise<SubdomainDetails> {
      const { data, error } = await client.GET('/subdomains/{parent}/details', {
        params: { path: { parent } },
      });
      if (!data) throw new Error(JSON.stringify(error));
      return data;
    },
    async refusal(parent: string): Promise<{ status: number; error: ErrorEnvelope | undefined }> {
      const { response, error } = await client.GET('/subdomains/{parent}', {
        params: { path: { parent } },
      });
      return { status: response.status, error };
    },
  };
}
`;

type DemoClient = {
  recordKey(domain: string, record: string): Promise<{ s: 'ok'; result: string }>;
  recordTypes(): Promise<{ s: 'ok'; result: Record<string, string> }>;
  subdomains(
    parent: string,
    query?: { limit?: string; after?: string; prefix?: string },
  ): Promise<{ s: 'ok'; result: string[]; next?: string | null }>;
  details(parent: string): Promise<{ s: 'ok'; result: { label: string; key: string }[] }>;
  refusal(parent: string): Promise<{ status: number; error: unknown }>;
};

describe('a client generated by openapi-typescript', () => {
  let dir: string | undefined;
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('compiles by the names of operations and components, and gets the demo chain', async () => {
    const made = mkdtempSync(join(tmpdir(), 'sns-gateway-client-'));
    dir = made;
    const generated = astToString(await openapiTS(doc as never));
    writeFileSync(join(made, 'api.d.ts'), generated);
    writeFileSync(join(made, 'client.ts'), CLIENT);
    writeFileSync(join(made, 'package.json'), JSON.stringify({ type: 'module' }));
    symlinkSync(join(ROOT, 'node_modules'), join(made, 'node_modules'), 'dir');

    // The project's strictness; any error (a missing operationId or component name) fails here.
    const program = ts.createProgram([join(made, 'client.ts')], {
      strict: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
      noEmit: true,
    });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);

    const { demoClient } = (await import(pathToFileURL(join(made, 'client.ts')).href)) as {
      demoClient: (baseUrl: string) => DemoClient;
    };
    const client = demoClient(gw.baseUrl);
    expect(await client.recordKey('bonfida', 'SOL')).toEqual({
      s: 'ok',
      result: 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6',
    });
    const types = await client.recordTypes();
    expect(types.result).toMatchObject({ SOL: 'SOL', Email: 'email' });
    expect(await client.subdomains('67679')).toEqual({
      s: 'ok',
      result: ['bullish', 'hollaaa', 'testing'],
    });
    expect(await client.subdomains('67679', { limit: '2' })).toEqual({
      s: 'ok',
      result: ['bullish', 'hollaaa'],
      next: 'hollaaa',
    });
    expect((await client.details('67679')).result.map((r) => r.label)).toEqual([
      'bullish',
      'hollaaa',
      'testing',
    ]);
    const refusal = await client.refusal('a.b');
    expect(refusal.status).toBe(400);
    expect(refusal.error).toMatchObject({ s: 'error', result: 'Invalid input' });
    // A whole TypeScript program is type-checked above, CPU-bound: beside other suites on two
    // cores it took past the 30 s default (32.8 s once). The bound only guards against a hang.
  }, 120_000);
});
