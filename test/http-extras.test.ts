import { getRecordV2Key, Record as SnsRecord } from '@bonfida/spl-name-service';
import { readFileSync } from 'node:fs';
import { validate, compileErrors } from '@readme/openapi-parser';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { ifNoneMatchHits } from '../src/api/http/etag.js';
import { ROUTE } from '../src/api/http/routes/paths.js';
import { OPS_ROUTE } from '../src/core/http/ops-routes.js';
import { startGateway, type Gateway } from './support/gateway.js';

/** Sends `request` as bytes and reads until the server closes: status line and body. */
function exchange(baseUrl: string, request: string): Promise<{ head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(baseUrl).port), '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      // A keep-alive answer (HTTP/1.0 with a body length) ends here, not at a close.
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text)?.[1];
      if (
        end !== -1 &&
        length !== undefined &&
        Buffer.byteLength(text.slice(end + 4)) >= Number(length)
      ) {
        socket.destroy();
        resolve({ head: text.slice(0, end), body: text.slice(end + 4) });
      }
    });
    socket.on('end', () => resolve({ head: text.split('\r\n\r\n')[0] ?? '', body: '' }));
    socket.on('error', reject);
    socket.write(request);
  });
}

describe('OpenAPI, docs, the page, CORS and derivation caching', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(() => gw.close());

  it('serves an OpenAPI 3 document that a parser validates, with every public route', async () => {
    const doc = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(doc.openapi).toMatch(/^3\./);
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    // Every route the plugins register, in OpenAPI's spelling; /metrics is on the metrics ports.
    const served = [...Object.values(ROUTE), OPS_ROUTE.healthz, OPS_ROUTE.readyz];
    expect(Object.keys(doc.paths).sort()).toEqual(
      served.map((p) => p.replace(/:(\w+)/g, '{$1}')).sort(),
    );
  });

  it('documents every route: tag, summary, an example, each status and the caching headers', async () => {
    type Media = { example?: unknown };
    type Answer = {
      description: string;
      headers?: Record<string, { description?: string }>;
      content?: Record<string, Media>;
    };
    const doc = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as {
      paths: Record<
        string,
        { get: { tags?: string[]; summary?: string; responses: Record<string, Answer> } }
      >;
    };
    for (const [path, { get }] of Object.entries(doc.paths)) {
      expect(get.tags?.length, path).toBeGreaterThan(0);
      expect(get.summary, path).toBeTruthy();
      for (const [status, answer] of Object.entries(get.responses)) {
        expect(answer.description, `${path} ${status}`).not.toBe('Default Response');
        if (status !== '304') {
          const example = Object.values(answer.content ?? {})[0]?.example;
          expect(example, `${path} ${status} example`).toBeDefined();
        }
      }
      expect(Object.keys(get.responses), path).toEqual(expect.arrayContaining(['200', '503']));
    }
    const answers = (path: string) => doc.paths[path]?.get.responses ?? {};
    const derivation = answers('/record-key-v2/{domain}/{record}');
    expect(Object.keys(derivation).sort()).toEqual(['200', '304', '400', '500', '503']);
    expect(Object.keys(derivation['200']?.headers ?? {})).toEqual(['Cache-Control', 'ETag']);
    // The example is what the route answers, not an invented key.
    const live = await gw.get('/record-key-v2/bonfida/SOL');
    expect(derivation['200']?.content?.['application/json']?.example).toEqual(live.body);
    const list = answers('/subdomains/{parent}');
    expect(Object.keys(list).sort()).toEqual(['200', '304', '400', '429', '500', '502', '503']);
    expect(Object.keys(list['200']?.headers ?? {}).sort()).toEqual(
      ['Age', 'Cache-Control', 'ETag', 'X-Cache', 'X-Total-Count'].sort(),
    );
    expect(list['429']?.headers?.['Retry-After']?.description).toBeTruthy();
    const demo = await gw.get('/subdomains/67679');
    expect(list['200']?.content?.['application/json']?.example).toEqual(demo.body);
    const types = await gw.get('/types/record');
    expect(answers('/types/record')['200']?.content?.['application/json']?.example).toEqual(
      types.body,
    );
  });

  it('lists every route in the README, and every status in docs/api.md', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const table = readme.slice(readme.indexOf('## Routes'));
    const rows = table.slice(0, table.indexOf('\n#')).split('\n');
    const doc = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    // The documented routes, and those the document leaves out (its description names them).
    const routes = [
      ...Object.keys(doc.paths).map((p) => p.replace(/\{(\w+)\}/g, ':$1')),
      '/',
      '/docs',
      '/openapi.json',
      '/admin/queues',
      // On the metrics ports, not the public one.
      OPS_ROUTE.metrics,
    ];
    for (const route of routes) {
      expect(
        rows.some((r) => new RegExp(`^\\| \`GET ${route}[\`[]`).test(r)),
        route,
      ).toBe(true);
    }
    // And none that does not exist (a query string or `[?rpc=URL]` after the path is not a route).
    for (const row of rows.filter((r) => r.startsWith('| `GET '))) {
      const listed = /^\| `GET ([^`[?]+)/.exec(row)?.[1] ?? '';
      expect(routes, row).toContain(listed);
    }
    const api = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    const statuses = api.slice(api.indexOf('| status |')).split('\n\n')[0] ?? '';
    for (const status of [200, 304, 400, 404, 429, 500, 502, 503]) {
      expect(statuses, String(status)).toMatch(new RegExp(`^\\| ${status} `, 'm'));
    }
  });

  it('serves the docs page and the try-it page', async () => {
    const docs = await fetch(`${gw.baseUrl}/docs/`);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toContain('text/html');
    const home = await fetch(`${gw.baseUrl}/`);
    expect(home.status).toBe(200);
    expect(await home.text()).toContain('<form id="lookup">');
  });

  it('answers CORS preflights for any origin', async () => {
    const res = await fetch(`${gw.baseUrl}/subdomains/67679`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('GET');
  });

  it('answers an OPTIONS that is no preflight with the envelope, not text/plain', async () => {
    const cases: Record<string, string>[] = [{}, { origin: 'https://app.example' }];
    for (const headers of cases) {
      const res = await fetch(`${gw.baseUrl}/subdomains/67679`, { method: 'OPTIONS', headers });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await res.json()).toEqual({
        s: 'error',
        result: 'Invalid input',
        detail:
          'OPTIONS is answered for CORS preflights only: send Origin and Access-Control-Request-Method',
      });
    }
  });

  it('answers an HTTP/1.1 request without Host with the envelope, and HTTP/1.0 without it', async () => {
    for (const request of [
      'GET /healthz HTTP/1.1\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost:\r\n\r\n',
    ]) {
      const { head, body } = await exchange(gw.baseUrl, request);
      expect(head).toMatch(/^HTTP\/1\.1 400 /);
      expect(head).toMatch(/\r\ncontent-type: application\/json; charset=utf-8/i);
      expect(JSON.parse(body)).toEqual({
        s: 'error',
        result: 'Invalid input',
        detail: 'an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2)',
      });
    }
    const old = await exchange(gw.baseUrl, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(old.head).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(old.body)).toEqual({ s: 'ok', result: 'live' });
  });

  it.each(['/record-key-v2/bonfida/SOL', '/subdomains/67679', '/types/record', '/healthz'])(
    'answers %s 304 for an If-None-Match list holding its ETag, or *, and 200 otherwise',
    async (path) => {
      const first = await fetch(`${gw.baseUrl}${path}`);
      expect(first.status).toBe(200);
      const tag = first.headers.get('etag');
      expect(tag).toMatch(/^"[^"]+"$/);
      const ask = (field: string, method = 'GET') =>
        fetch(`${gw.baseUrl}${path}`, { method, headers: { 'if-none-match': field } });
      for (const field of [
        tag!,
        `W/${tag}`,
        `"older", ${tag}`,
        `"a,b",W/${tag} , "c"`,
        '*',
        ' * ',
      ]) {
        const res = await ask(field);
        expect(res.status, field).toBe(304);
        expect(await res.text(), field).toBe('');
        expect(res.headers.get('etag'), field).toBe(tag);
        // A 304 carries no Content-Length of its own (RFC 9110 §8.6): never a length of 0.
        expect(res.headers.get('content-length'), field).toBeNull();
      }
      expect((await ask('*', 'HEAD')).status).toBe(304);
      for (const field of ['"older"', `"older", "${tag!.slice(1, -1)}x"`, `${tag!.slice(0, -1)}`]) {
        expect((await ask(field)).status, field).toBe(200);
      }
    },
  );

  it('never turns an error into 304, even for If-None-Match: *', async () => {
    for (const path of ['/record-key-v2/bonfida/sol', '/subdomains/a.b', '/no/such/route']) {
      const res = await fetch(`${gw.baseUrl}${path}`, { headers: { 'if-none-match': '*' } });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
    }
  });

  it('sends the same CORS headers on routes that set them itself as @fastify/cors does', async () => {
    const corsHeaders = (res: Response) =>
      [...res.headers].filter(([name]) => name.startsWith('access-control-'));
    const init = { headers: { origin: 'https://app.example' } };
    const byPlugin = corsHeaders(await fetch(`${gw.baseUrl}/types/record`, init));
    expect(byPlugin).toEqual([
      ['access-control-allow-origin', '*'],
      ['access-control-expose-headers', 'X-Cache, Age, ETag, Retry-After'],
    ]);
    for (const path of ['/record-key-v2/bonfida/SOL', '/subdomains/67679']) {
      expect(corsHeaders(await fetch(`${gw.baseUrl}${path}`, init)), path).toEqual(byPlugin);
    }
    // Their errors too, schema validation included: a page must be able to read them.
    for (const path of ['/record-key-v2/bonfida/NOPE', '/subdomains/a.b', '/subdomains/x?rpc=']) {
      const res = await fetch(`${gw.baseUrl}${path}`, init);
      expect(res.status, path).toBe(400);
      expect(corsHeaders(res), path).toEqual(byPlugin);
    }
  });

  it('lets caches keep derivations for good', async () => {
    const res = await fetch(`${gw.baseUrl}/record-key-v2/bonfida/SOL`);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const again = await fetch(`${gw.baseUrl}/record-key-v2/bonfida/SOL`, {
      headers: { 'if-none-match': res.headers.get('etag')! },
    });
    expect(again.status).toBe(304);
  });

  it('says which root it derives under, that SRS names are not covered, and how a suffix reads', async () => {
    const root = '58PwtjSDuFHuUkYjH9BYnnQKHfwo9reZhC2zMJv9JPkx';
    const doc = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as {
      info: { description: string };
      paths: Record<string, { get: { parameters: Array<{ name: string; description: string }> } }>;
    };
    expect(doc.info.description).toContain(root);
    expect(doc.info.description).toMatch(/`\.sns` TLD/);
    expect(doc.info.description).toMatch(
      /Names\s+issued\s+through\s+SRS[^]*,\s+are\s+not\s+covered/,
    );
    const param = (path: string, name: string) =>
      doc.paths[path]?.get.parameters.find((p) => p.name === name)?.description ?? '';
    expect(param('/record-key-v2/{domain}/{record}', 'domain')).toContain(
      '`bonfida.sol` is the subdomain `bonfida` of `sol`',
    );
    expect(param('/subdomains/{parent}', 'parent')).toMatch(/without the `\.sol`\/`\.sns` suffix/);
    const page = await (await fetch(`${gw.baseUrl}/`)).text();
    expect(page).toContain(root);
    expect(page).toMatch(/Names\s+issued\s+through\s+SRS[^]*,\s+are\s+not\s+covered/);
    expect(page).toContain('aria-describedby="parent-hint"');
    expect(page).toMatch(/id="parent-hint"[^]*<code>bonfida<\/code> of <code>sol<\/code>/);
    // The behaviour those texts describe: the suffix is a label, as the SDK reads `bonfida.sol.sol`.
    const typed = (await gw.get('/record-key-v2/bonfida.sol/SOL')).body;
    expect(typed.result).toBe(getRecordV2Key('bonfida.sol.sol', SnsRecord.SOL).toBase58());
    expect(typed.result).not.toBe(getRecordV2Key('bonfida', SnsRecord.SOL).toBase58());
    expect((await gw.get('/subdomains/67679.sol')).status).toBe(400);
  });

  it('keeps the queue UI off without ADMIN_TOKEN', async () => {
    expect((await fetch(`${gw.baseUrl}/admin/queues`)).status).toBe(404);
  });
});

describe('the queue UI with ADMIN_TOKEN', () => {
  const token = 'a-long-admin-token-123';
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ env: { ADMIN_TOKEN: token } });
  });
  afterAll(() => gw.close());

  it('refuses requests without the token, with the envelope', async () => {
    const res = await fetch(`${gw.baseUrl}/admin/queues`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('Basic');
    expect(await res.json()).toMatchObject({ s: 'error', result: 'Unauthorized' });
    const wrongBasic = Buffer.from(`ops:${token.slice(0, -1)}x`).toString('base64');
    for (const authorization of [
      'Bearer nope',
      `Bearer ${token}x`,
      `Token ${token}`,
      `Basic ${wrongBasic}`,
    ]) {
      const wrong = await fetch(`${gw.baseUrl}/admin/queues`, { headers: { authorization } });
      expect(wrong.status, authorization).toBe(401);
      expect(wrong.headers.get('www-authenticate')).toContain('Basic');
      expect(await wrong.json()).toEqual({
        s: 'error',
        result: 'Unauthorized',
        detail: 'send ADMIN_TOKEN as a Bearer token, or as the password of HTTP Basic',
      });
    }
  });

  it('serves the UI and its API with the token (Bearer or Basic)', async () => {
    const page = await fetch(`${gw.baseUrl}/admin/queues`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<html');
    // The scheme is case-insensitive.
    const lower = await fetch(`${gw.baseUrl}/admin/queues`, {
      headers: { authorization: `bearer ${token}` },
    });
    expect(lower.status).toBe(200);
    await gw.get('/subdomains/67679');
    const basic = Buffer.from(`ops:${token}`).toString('base64');
    const api = await fetch(`${gw.baseUrl}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${basic}` },
    });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: Array<{ name: string }> };
    expect(body.queues.map((q) => q.name)).toContain('subdomain-refresh');
  });

  it('is read-only by default: the token shows the queues but cannot pause, retry or clean them', async () => {
    const bearer = { authorization: `Bearer ${token}` };
    const list = await fetch(`${gw.baseUrl}/admin/queues/api/queues`, { headers: bearer });
    const body = (await list.json()) as { queues: Array<{ name: string; readOnlyMode: boolean }> };
    expect(body.queues.length).toBeGreaterThan(0);
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
    const pause = await fetch(`${gw.baseUrl}/admin/queues/api/queues/pause`, {
      method: 'PUT',
      headers: bearer,
    });
    expect(pause.status).toBeLessThan(500);
    const queue = new Queue(REFRESH_QUEUE, {
      connection: gw.redis,
      prefix: gw.config.QUEUE_PREFIX,
    });
    try {
      expect(await queue.isPaused()).toBe(false);
    } finally {
      await queue.close();
    }
  });
});

describe('the queue UI with ADMIN_TOKEN and ADMIN_QUEUES_WRITE=true', () => {
  const token = 'another-long-admin-token';
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ env: { ADMIN_TOKEN: token, ADMIN_QUEUES_WRITE: 'true' } });
  });
  afterAll(() => gw.close());

  it('lets the token pause and resume the queues', async () => {
    const bearer = { authorization: `Bearer ${token}` };
    const queue = new Queue(REFRESH_QUEUE, {
      connection: gw.redis,
      prefix: gw.config.QUEUE_PREFIX,
    });
    try {
      const pause = await fetch(`${gw.baseUrl}/admin/queues/api/queues/pause`, {
        method: 'PUT',
        headers: bearer,
      });
      expect(pause.status).toBe(200);
      expect(await queue.isPaused()).toBe(true);
      await fetch(`${gw.baseUrl}/admin/queues/api/queues/resume`, {
        method: 'PUT',
        headers: bearer,
      });
      expect(await queue.isPaused()).toBe(false);
    } finally {
      await queue.close();
    }
  });
});

describe('ifNoneMatchHits (RFC 9110 §13.1.2)', () => {
  it.each([
    ['"a"', '"a"', true],
    ['W/"a"', '"a"', true],
    ['"a"', 'W/"a"', true],
    ['"x", "a"', '"a"', true],
    ['"x,a", "y"', '"a"', false],
    ['"x" ,W/"a"', '"a"', true],
    ['*', '"a"', true],
    ['"x"', '"a"', false],
    ['a', '"a"', false],
    ['"a', '"a"', false],
    ['', '"a"', false],
  ])('%s against %s: %s', (field, etag, hit) => {
    expect(ifNoneMatchHits(field, etag)).toBe(hit);
  });
});
