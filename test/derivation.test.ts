import { getRecordV2Key, Record } from '@bonfida/spl-name-service';
import { get as httpGet } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { RecordKeyDeriver } from '../src/api/sns/record-key.js';
import { RECORD_ENUM } from '../src/api/sns/records.js';
import { derivationApp } from './support/derivation-app.js';
import { baseUrlOf } from './support/gateway.js';

const RECORDS = Object.values(Record);
const ALPHABET = [
  ...'abcdefghijklmnopqrstuvwxyz0123456789-_',
  'é',
  'ß',
  'ü',
  '中',
  '文',
  '🦀',
  'ñ',
  'ø',
];

/** A deterministic generator, so a failure names a reproducible name. */
function* names(count: number, seed = 42): Generator<string> {
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  const label = () =>
    Array.from({ length: 1 + next(20) }, () => ALPHABET[next(ALPHABET.length)]).join('');
  for (let i = 0; i < count; i++) {
    let name = label();
    if (next(2) === 0) name = `${name}.${label()}`;
    if (name.endsWith('.sol')) name += 'x'; // the route would read `x.sol` as a subdomain of "sol"
    yield name;
  }
}

describe('the record types', () => {
  it("are the SDK's Record enum, name for name, in its order", () => {
    // The API keeps a copy so it does not load the SDK at run time; an SDK upgrade that adds or
    // renames a record fails here until the copy follows.
    expect(Object.entries(RECORD_ENUM)).toEqual(Object.entries(Record));
  });
});

describe('GET /record-key-v2/:domain/:record', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = derivationApp();
    await app.ready();
  });
  afterAll(() => app.close());

  const get = async (url: string) => {
    const res = await app.inject({ method: 'GET', url });
    return { status: res.statusCode, body: res.json<{ s: string; result: unknown }>() };
  };

  it.each([
    ['domain1', 'SOL', 'GBrd6Q53eu1T2PiaQAtm92r3DwxmoGvZ2D6xjtVtN1Qt'],
    ['sub.domain2', 'SOL', 'A3EFmyCmK5rp73TdgLH8aW49PJ8SJw915arhydRZ6Sws'],
    ['domain3', 'url', 'DMZmnjcAnUwSje4o2LGJhipCfNZ5b37GEbbkwbQBWEW1'],
  ])('matches the SDK published vector %s/%s', async (domain, record, key) => {
    expect(await get(`/record-key-v2/${domain}/${record}`)).toEqual({
      status: 200,
      body: { s: 'ok', result: key },
    });
  });

  it('equals getRecordV2Key on 400 generated one- and two-label names, unicode included', async () => {
    let i = 0;
    for (const name of names(400)) {
      const record = RECORDS[i++ % RECORDS.length] as Record;
      const expected = getRecordV2Key(name, record).toBase58();
      const res = await get(
        `/record-key-v2/${encodeURIComponent(name)}/${encodeURIComponent(record)}`,
      );
      expect(res, name).toEqual({ status: 200, body: { s: 'ok', result: expected } });
    }
  });

  it('trims and lower-cases the domain before deriving', async () => {
    const expected = getRecordV2Key('bonfida', Record.SOL).toBase58();
    for (const raw of ['BONFIDA', '  Bonfida ', '%20bonfida%09']) {
      expect(await get(`/record-key-v2/${raw}/SOL`)).toEqual({
        status: 200,
        body: { s: 'ok', result: expected },
      });
    }
  });

  it('answers labels of several hundred characters with JSON', async () => {
    const label = 'a'.repeat(700);
    expect(await get(`/record-key-v2/${label}/SOL`)).toEqual({
      status: 200,
      body: { s: 'ok', result: getRecordV2Key(label, Record.SOL).toBase58() },
    });
    const sub = `${'ü'.repeat(300)}.${'b'.repeat(300)}`;
    expect((await get(`/record-key-v2/${encodeURIComponent(sub)}/SOL`)).body.result).toBe(
      getRecordV2Key(sub, Record.SOL).toBase58(),
    );
  });

  const DOMAIN_RULE = 'domain must be one label or sub.parent, without the registry suffix';
  const RECORD_RULE = 'record must be one of the values of /types/record, case-sensitive';
  it.each([
    ['empty after trimming', '%20%20', 'SOL', `${DOMAIN_RULE} (got "  ")`],
    ['empty first label', '.bonfida', 'SOL', `${DOMAIN_RULE} (got ".bonfida")`],
    ['empty last label', 'bonfida.', 'SOL', `${DOMAIN_RULE} (got "bonfida.")`],
    ['empty middle label', 'a..b', 'SOL', `${DOMAIN_RULE} (got "a..b")`],
    ['three labels', 'a.b.c', 'SOL', `${DOMAIN_RULE} (got "a.b.c")`],
    ['a lower-cased record', 'bonfida', 'sol', `${RECORD_RULE} (got "sol")`],
    ['an unknown record', 'bonfida', 'NOPE', `${RECORD_RULE} (got "NOPE")`],
    ['a record with spaces', 'bonfida', '%20SOL', `${RECORD_RULE} (got " SOL")`],
  ])(
    'answers 400 Invalid input for %s, saying what is accepted',
    async (_why, domain, record, detail) => {
      expect(await get(`/record-key-v2/${domain}/${record}`)).toEqual({
        status: 400,
        body: { s: 'error', result: 'Invalid input', detail },
      });
    },
  );

  it('repeats at most 40 characters of the input in a detail, without control characters', async () => {
    const res = await get(
      `/record-key-v2/bonfida/${encodeURIComponent('"\u0000\u001b[31m\u202e\n' + 'x'.repeat(5000))}`,
    );
    expect(res.status).toBe(400);
    const detail = (res.body as { detail?: string }).detail ?? '';
    const echoed = /\(got (".*")\)$/.exec(detail)?.[1];
    expect(echoed).toBeDefined();
    // A JSON string: the quote escaped, the control and bidi characters gone (the printable rest
    // of the escape sequence stays), cut at 40.
    expect(JSON.parse(echoed!)).toBe('"[31m' + 'x'.repeat(35) + '…');
    expect(detail).not.toMatch(/[\p{Cc}\u202e]/u);
  });

  it('answers 500 Internal error when the derivation itself fails, without leaking the cause', async () => {
    class BrokenDeriver extends RecordKeyDeriver {
      override derive(): string {
        throw new Error('secret upstream detail');
      }
    }
    const broken = derivationApp(new BrokenDeriver());
    const res = await broken.inject({ method: 'GET', url: '/record-key-v2/bonfida/SOL' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ s: 'error', result: 'Internal error' });
    expect(res.body).not.toContain('secret');
    await broken.close();
  });

  it('serves repeated names from its bounded LRU, admitted on their second request', async () => {
    class CountingDeriver extends RecordKeyDeriver {
      calls = 0;
      override derive(...args: Parameters<RecordKeyDeriver['derive']>): string {
        this.calls++;
        return super.derive(...args);
      }
    }
    const deriver = new CountingDeriver();
    const small = derivationApp(deriver, { DERIVATION_CACHE_SIZE: '2' });
    const get = (url: string) => small.inject({ method: 'GET', url });
    const expected = getRecordV2Key('bonfida', Record.SOL).toBase58();
    // Asked once: derived, not kept. Asked again: derived and kept. Then served from the LRU.
    const first = await get('/record-key-v2/bonfida/SOL');
    const second = await get('/record-key-v2/bonfida/SOL');
    expect(deriver.calls).toBe(2);
    const third = await get('/record-key-v2/bonfida/SOL');
    expect(deriver.calls).toBe(2);
    for (const res of [second, third]) {
      expect(res.body).toBe(first.body);
      expect(res.headers.etag).toBe(first.headers.etag);
    }
    expect(third.json()).toEqual({ s: 'ok', result: expected });
    // Kept answers never stand in for a different record or an invalid one.
    expect((await get('/record-key-v2/bonfida/ETH')).json()).toEqual({
      s: 'ok',
      result: getRecordV2Key('bonfida', Record.ETH).toBase58(),
    });
    expect((await get('/record-key-v2/bonfida/sol')).statusCode).toBe(400);
    // Two other names kept push bonfida/SOL out: it is derived again, to the same key.
    for (const name of ['x', 'x', 'y', 'y']) await get(`/record-key-v2/${name}/SOL`);
    let calls = deriver.calls;
    expect((await get('/record-key-v2/bonfida/SOL')).json()).toEqual({ s: 'ok', result: expected });
    expect(deriver.calls).toBe(calls + 1);
    // Names longer than 128 characters are never kept (the LRU's bound is a count).
    calls = deriver.calls;
    const long = `/record-key-v2/${'a'.repeat(129)}/SOL`;
    for (let i = 0; i < 3; i++) await get(long);
    expect(deriver.calls).toBe(calls + 3);
    await small.close();
  });
});

describe('GET /types/record and unknown routes', () => {
  it('returns the SDK Record enum object', async () => {
    const app = derivationApp();
    const res = await app.inject({ method: 'GET', url: '/types/record' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ s: 'ok', result: { ...Record } });
    await app.close();
  });

  it('answers unknown routes and methods with the envelope', async () => {
    const app = derivationApp();
    const res = await app.inject({ method: 'GET', url: '/nope' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ s: 'error', result: 'Not found' });
    const post = await app.inject({ method: 'POST', url: '/record-key-v2/bonfida/SOL' });
    expect(post.statusCode).toBe(404);
    expect(post.json()).toMatchObject({ s: 'error' });
    await app.close();
  });

  it('answers the subdomain routes 500 without RPC_URL, Redis down (the contract)', async () => {
    const app = derivationApp();
    for (const url of [
      '/subdomains/bonfida',
      '/subdomains/bonfida?limit=2',
      '/subdomains/bonfida/details',
      '/subdomains/bonfida/events',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(500);
      expect(res.json(), url).toMatchObject({ s: 'error', result: 'Internal error' });
    }
    await app.close();
  });

  it('answers a broken percent-escape with 400 Invalid input', async () => {
    const app = derivationApp();
    const res = await app.inject({ method: 'GET', url: '/record-key-v2/%E0%A4%A/SOL' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      s: 'error',
      result: 'Invalid input',
      detail: 'the URL holds a malformed percent-escape (%XX must encode UTF-8)',
    });
    await app.close();
  });
});

describe('paths with encoded dots and slashes, on both routes', () => {
  let app: FastifyInstance;
  let port: number;
  beforeAll(async () => {
    app = derivationApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = Number(new URL(baseUrlOf(app)).port);
  });
  afterAll(() => app.close());

  /** GET with the request target sent exactly as given (node:http does not normalize it). */
  const raw = (path: string) =>
    new Promise<{ status: number; body: unknown }>((resolve, reject) => {
      httpGet({ host: '127.0.0.1', port, path }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      }).on('error', reject);
    });

  const DERIVE_SHAPE =
    'path must be /record-key-v2/<domain>/<record>; a domain of "." or ".." (%2E) is removed from the URL by the client';
  const PARENT_SHAPE =
    'path must be /subdomains/<parent>, one label; a parent of "." (%2E) is removed from the URL by the client';

  // What fetch, browsers and curl send: the URL parser drops `.`/`%2E` segments first
  // (`/record-key-v2/%2E/SOL` is sent as `/record-key-v2/SOL`), which used to answer 404.
  it.each([
    ['/record-key-v2/%2E/SOL', DERIVE_SHAPE],
    ['/record-key-v2/%2e/SOL', DERIVE_SHAPE],
    ['/record-key-v2/./SOL', DERIVE_SHAPE],
    ['/record-key-v2/x/%2E%2E', DERIVE_SHAPE],
    ['/record-key-v2/a/b/SOL', DERIVE_SHAPE],
    ['/record-key-v2', DERIVE_SHAPE],
    ['/subdomains/a/b', PARENT_SHAPE],
    ['/subdomains/bonfida/', PARENT_SHAPE],
    ['/subdomains', PARENT_SHAPE],
  ])('answers %s, as a URL parser sends it, 400 with the envelope', async (path, detail) => {
    const res = await fetch(baseUrlOf(app) + path);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ s: 'error', result: 'Invalid input', detail });
  });

  const DOMAIN_RULE = 'domain must be one label or sub.parent, without the registry suffix';
  const PARENT_RULE = 'parent must be one label without the registry suffix';
  const SLASH = '"/" (%2F) is not allowed in a label';
  // What a client that sends the target as typed (curl --path-as-is, raw HTTP) makes reach the
  // route: the parameter decodes to `.`, `..` or holds a `/`. A `/` used to be derived (200) or
  // looked up (500 without an RPC).
  it.each([
    ['/record-key-v2/%2E/SOL', `${DOMAIN_RULE} (got ".")`],
    ['/record-key-v2/%2E%2E/SOL', `${DOMAIN_RULE} (got "..")`],
    ['/record-key-v2/a%2Fb/SOL', `${DOMAIN_RULE}; ${SLASH} (got "a/b")`],
    ['/record-key-v2/sub.a%2fb/SOL', `${DOMAIN_RULE}; ${SLASH} (got "sub.a/b")`],
    ['/record-key-v2/%2F/SOL', `${DOMAIN_RULE}; ${SLASH} (got "/")`],
    [
      '/record-key-v2/bonfida/%2E',
      'record must be one of the values of /types/record, case-sensitive (got ".")',
    ],
    [
      '/record-key-v2/bonfida/SOL%2F',
      'record must be one of the values of /types/record, case-sensitive (got "SOL/")',
    ],
    ['/subdomains/%2E', `${PARENT_RULE} (got ".")`],
    ['/subdomains/%2E%2E', `${PARENT_RULE} (got "..")`],
    ['/subdomains/a%2Fb', `${PARENT_RULE}; ${SLASH} (got "a/b")`],
    ['/subdomains/%2F', `${PARENT_RULE}; ${SLASH} (got "/")`],
  ])('answers %s, sent as is, 400 with the envelope', async (path, detail) => {
    expect(await raw(path)).toEqual({
      status: 400,
      body: { s: 'error', result: 'Invalid input', detail },
    });
  });
});
