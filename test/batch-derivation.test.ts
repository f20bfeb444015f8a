import { getRecordV2Key, Record } from '@bonfida/spl-name-service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { parseDerivationDomain } from '../src/api/sns/names.js';
import { RecordKeyDeriver } from '../src/api/sns/record-key.js';
import { derivationApp } from './support/derivation-app.js';
import { baseUrlOf } from './support/gateway.js';

/** Counts what the routes ask the deriver for, one call and one record at a time. */
class CountingDeriver extends RecordKeyDeriver {
  calls = 0;
  records = 0;
  override derive(...args: Parameters<RecordKeyDeriver['derive']>): string {
    this.calls++;
    this.records++;
    return super.derive(...args);
  }
  override deriveAll(...args: Parameters<RecordKeyDeriver['deriveAll']>): string[] {
    this.calls++;
    this.records += args[1].length;
    return super.deriveAll(...args);
  }
}

const RECORDS = Object.values(Record);
/** The SDK's own derivation, of the name the routes derive (`<domain>.sol`). */
const sdkKey = (domain: string, record: Record) =>
  getRecordV2Key(`${domain}.sol`, record).toBase58();
const batchUrl = (domain: string, records: readonly string[]) =>
  `/record-keys-v2/${encodeURIComponent(domain)}?records=${records.map(encodeURIComponent).join(',')}`;

type Answer = { status: number; body: { s: string; result: unknown; detail?: string } };
const RECORDS_RULE = 'is not one of the values of /types/record, case-sensitive';

/** A deterministic generator of record lists, so a failure names a reproducible list. */
function* recordLists(count: number, seed = 7): Generator<Record[]> {
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  for (let i = 0; i < count; i++) {
    yield Array.from({ length: 1 + next(12) }, () => RECORDS[next(RECORDS.length)] as Record);
  }
}

describe('GET /record-keys-v2/:domain?records=', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = derivationApp();
    await app.ready();
  });
  afterAll(() => app.close());

  const get = async (url: string): Promise<Answer> => {
    const res = await app.inject({ method: 'GET', url });
    return { status: res.statusCode, body: res.json() };
  };
  const single = async (domain: string, record: string) =>
    (await get(`/record-key-v2/${encodeURIComponent(domain)}/${record}`)).body.result;

  const DOMAINS = ['bonfida', 'domain1', 'sub.domain2', 'sub.parent', '中文', 'a-b_c', 'x.🦀'];

  it('gives, for every record type and several domains, the SDK getRecordV2Key and the single route', async () => {
    for (const domain of DOMAINS) {
      // Three times: derived, then derived and kept in the single route's LRU, then read from it.
      for (let round = 0; round < 3; round++) {
        const res = await get(batchUrl(domain, RECORDS));
        expect(res.status, domain).toBe(200);
        const result = res.body.result as { [record: string]: string };
        expect(Object.keys(result)).toEqual(RECORDS);
        for (const record of RECORDS) {
          expect(result[record], `${domain}/${record}`).toBe(sdkKey(domain, record));
          if (round === 0) expect(result[record]).toBe(await single(domain, record));
        }
      }
    }
  });

  it('matches the SDK published vectors', async () => {
    expect((await get('/record-keys-v2/sub.domain2?records=SOL')).body).toEqual({
      s: 'ok',
      result: { SOL: 'A3EFmyCmK5rp73TdgLH8aW49PJ8SJw915arhydRZ6Sws' },
    });
    expect((await get('/record-keys-v2/bonfida?records=SOL,email')).body).toEqual({
      s: 'ok',
      result: {
        SOL: 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6',
        email: 'DPSCfsPuTHDmFknDgs8T1uDaa8HsZqrmUpAwK2MMQVQW',
      },
    });
  });

  it('answers generated lists on generated names like the single route, keys in the order given', async () => {
    let i = 0;
    for (const records of recordLists(60)) {
      const domain = i % 3 === 0 ? `s${i}.p${i % 5}` : `name-${i}`;
      i++;
      const res = await get(batchUrl(domain, records));
      expect(res.status, JSON.stringify([domain, records])).toBe(200);
      const distinct = [...new Set(records)];
      const result = res.body.result as { [record: string]: string };
      expect(Object.keys(result)).toEqual(distinct);
      for (const record of distinct) {
        expect(result[record], `${domain}/${record}`).toBe(await single(domain, record));
      }
    }
  });

  it('keeps the order given, in the bytes too', async () => {
    const forward = await app.inject('/record-keys-v2/bonfida?records=SOL,email,url');
    const backward = await app.inject('/record-keys-v2/bonfida?records=url,email,SOL');
    const keys = ['SOL', 'email', 'url'].map((r) => sdkKey('bonfida', r as Record));
    expect(forward.body).toBe(
      `{"s":"ok","result":{"SOL":"${keys[0]}","email":"${keys[1]}","url":"${keys[2]}"}}`,
    );
    expect(backward.body).toBe(
      `{"s":"ok","result":{"url":"${keys[2]}","email":"${keys[1]}","SOL":"${keys[0]}"}}`,
    );
  });

  it('answers 1 record, and 100 (duplicates included) with each record once', async () => {
    expect(await get('/record-keys-v2/bonfida?records=IPNS')).toEqual({
      status: 200,
      body: { s: 'ok', result: { IPNS: sdkKey('bonfida', Record.IPNS) } },
    });
    // Only 28 record types exist: 100 values repeat them, last first.
    const hundred = Array.from(
      { length: 100 },
      (_, i) => RECORDS[RECORDS.length - 1 - (i % RECORDS.length)] as Record,
    );
    const res = await get(batchUrl('sub.parent', hundred));
    expect(res.status).toBe(200);
    const result = res.body.result as { [record: string]: string };
    expect(Object.keys(result)).toEqual([...RECORDS].reverse());
    for (const record of RECORDS) expect(result[record]).toBe(sdkKey('sub.parent', record));
  });

  it('answers a duplicate once, where it first appears: the same bytes as without it', async () => {
    const plain = await app.inject('/record-keys-v2/bonfida?records=email,SOL');
    const repeated = await app.inject('/record-keys-v2/bonfida?records=email,SOL,email,SOL,SOL');
    expect(repeated.statusCode).toBe(200);
    expect(repeated.body).toBe(plain.body);
    expect(repeated.headers.etag).toBe(plain.headers.etag);
  });

  it('trims and lower-cases the domain, as the single route does', async () => {
    const expected = { s: 'ok', result: { SOL: sdkKey('bonfida', Record.SOL) } };
    for (const raw of ['BONFIDA', '%20Bonfida%09']) {
      expect((await get(`/record-keys-v2/${raw}?records=SOL`)).body).toEqual(expected);
    }
  });

  it('sends the single route caching headers: immutable, an ETag, 304 on If-None-Match', async () => {
    const one = await app.inject('/record-key-v2/bonfida/SOL');
    const res = await app.inject('/record-keys-v2/bonfida?records=SOL,url');
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['cache-control']).toBe(one.headers['cache-control']);
    expect(res.headers['access-control-allow-origin']).toBe(
      one.headers['access-control-allow-origin'],
    );
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers.etag).toMatch(/^"[0-9a-z]+"$/);
    const again = await app.inject({
      url: '/record-keys-v2/bonfida?records=SOL,url',
      headers: { 'if-none-match': String(res.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    // Another order is another body, so another validator.
    const other = await app.inject('/record-keys-v2/bonfida?records=url,SOL');
    expect(other.headers.etag).not.toBe(res.headers.etag);
  });

  const refused = (detail: string): Answer => ({
    status: 400,
    body: { s: 'error', result: 'Invalid input', detail },
  });

  it.each([
    ['a lower-cased record', 'sol', `records: value 1 ${RECORDS_RULE} (got "sol")`],
    ['an enum name', 'SOL,Email', `records: value 2 ${RECORDS_RULE} (got "Email")`],
    ['an unknown record', 'SOL,email,NOPE,url', `records: value 3 ${RECORDS_RULE} (got "NOPE")`],
    ['a space after a comma', 'SOL,%20email', `records: value 2 ${RECORDS_RULE} (got " email")`],
    ['an empty value', 'SOL,,email', `records: value 2 ${RECORDS_RULE} (got "")`],
    ['a trailing comma', 'SOL,', `records: value 2 ${RECORDS_RULE} (got "")`],
    ['an empty list', '', 'querystring/records must NOT have fewer than 1 characters'],
  ])('answers 400 naming the value for %s', async (_why, records, detail) => {
    expect(await get(`/record-keys-v2/bonfida?records=${records}`)).toEqual(refused(detail));
  });

  it('answers 400 for 101 values, a missing or repeated parameter and a bad domain', async () => {
    const many = Array.from({ length: 101 }, () => 'SOL').join(',');
    expect(await get(`/record-keys-v2/bonfida?records=${many}`)).toEqual(
      refused(
        'records must hold 1 to 100 values of /types/record, comma-separated (got more than 100)',
      ),
    );
    // Far over the limit: refused the same way (the split stops at 101).
    const huge = Array.from({ length: 3000 }, () => 'SOL').join(',');
    expect((await get(`/record-keys-v2/bonfida?records=${huge}`)).status).toBe(400);
    expect(await get('/record-keys-v2/bonfida')).toEqual(
      refused("querystring must have required property 'records'"),
    );
    expect(await get('/record-keys-v2/bonfida?records=SOL&records=url')).toEqual(
      refused('querystring/records must be string'),
    );
    const DOMAIN_RULE = 'domain must be one label or sub.parent, without the registry suffix';
    expect(await get('/record-keys-v2/a.b.c?records=SOL')).toEqual(
      refused(`${DOMAIN_RULE} (got "a.b.c")`),
    );
    expect(await get('/record-keys-v2/%20?records=SOL')).toEqual(
      refused(`${DOMAIN_RULE} (got " ")`),
    );
    // An invalid record is named even when the domain is bad too, as on the single route.
    expect((await get('/record-keys-v2/a.b.c?records=sol')).body.detail).toContain('(got "sol")');
  });

  it('answers 500 Internal error when the derivation fails, without leaking the cause', async () => {
    class BrokenDeriver extends RecordKeyDeriver {
      override deriveAll(): string[] {
        throw new Error('secret upstream detail');
      }
    }
    const broken = derivationApp(new BrokenDeriver());
    const res = await broken.inject('/record-keys-v2/bonfida?records=SOL');
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ s: 'error', result: 'Internal error' });
    expect(res.body).not.toContain('secret');
    await broken.close();
  });
});

describe('what a batch costs', () => {
  it('derives each distinct record once, in one call, and shares the single route LRU', async () => {
    const deriver = new CountingDeriver();
    const app = derivationApp(deriver);
    const hundred = Array.from({ length: 100 }, (_, i) => RECORDS[i % RECORDS.length] as Record);
    await app.inject(batchUrl('bonfida', hundred));
    // 100 values, 28 distinct: 28 keys, one call (the domain key derived once).
    expect({ calls: deriver.calls, records: deriver.records }).toEqual({
      calls: 1,
      records: RECORDS.length,
    });
    // The second request admits them into the LRU; the third derives nothing.
    await app.inject(batchUrl('bonfida', hundred));
    const before = { ...deriver };
    const third = await app.inject(batchUrl('bonfida', hundred));
    expect(third.statusCode).toBe(200);
    expect({ calls: deriver.calls, records: deriver.records }).toEqual({
      calls: before.calls,
      records: before.records,
    });
    // The batch warmed the single route, and the single route warms the batch.
    await app.inject('/record-key-v2/bonfida/SOL');
    expect(deriver.calls).toBe(before.calls);
    for (let i = 0; i < 2; i++) await app.inject('/record-key-v2/other/SOL');
    const calls = deriver.calls;
    const mixed = await app.inject('/record-keys-v2/other?records=email,SOL,url');
    expect(deriver.calls).toBe(calls + 1);
    expect(deriver.records).toBe(before.records + 2 + 2);
    const result = mixed.json<{ result: { [record: string]: string } }>().result;
    expect(result).toEqual({
      email: sdkKey('other', Record.Email),
      SOL: sdkKey('other', Record.SOL),
      url: sdkKey('other', Record.Url),
    });
    expect(Object.keys(result)).toEqual(['email', 'SOL', 'url']);
    await app.close();
  });

  it('derives every time with the LRU off, and for names too long to keep', async () => {
    const deriver = new CountingDeriver();
    const off = derivationApp(deriver, { DERIVATION_CACHE_SIZE: '0' });
    for (let i = 0; i < 3; i++) {
      const res = await off.inject('/record-keys-v2/sub.parent?records=SOL,email');
      expect(res.json()).toEqual({
        s: 'ok',
        result: {
          SOL: sdkKey('sub.parent', Record.SOL),
          email: sdkKey('sub.parent', Record.Email),
        },
      });
    }
    expect(deriver.records).toBe(6);
    await off.close();
    deriver.records = 0;
    const on = derivationApp(deriver);
    const long = 'l'.repeat(129);
    for (let i = 0; i < 3; i++) {
      const res = await on.inject(`/record-keys-v2/${long}?records=SOL`);
      expect(res.json()).toEqual({ s: 'ok', result: { SOL: sdkKey(long, Record.SOL) } });
    }
    expect(deriver.records).toBe(3);
    await on.close();
  });

  it('deriveAll equals derive and the SDK, record by record', () => {
    const deriver = new RecordKeyDeriver();
    for (const name of ['bonfida', 'sub.parent', 'ü.中文', 'q'.repeat(300)]) {
      const domain = parseDerivationDomain(name);
      const keys = deriver.deriveAll(domain, RECORDS);
      expect(keys).toEqual(RECORDS.map((record) => deriver.derive(domain, record)));
      expect(keys).toEqual(RECORDS.map((record) => sdkKey(domain.name, record)));
    }
    expect(deriver.deriveAll(parseDerivationDomain('bonfida'), [])).toEqual([]);
  });
});

describe('over HTTP', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = derivationApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  it('takes the list with literal or percent-encoded commas', async () => {
    const expected = {
      s: 'ok',
      result: { SOL: sdkKey('bonfida', Record.SOL), url: sdkKey('bonfida', Record.Url) },
    };
    for (const query of ['SOL,url', 'SOL%2Curl', 'SOL%2curl']) {
      const res = await fetch(`${baseUrlOf(app)}/record-keys-v2/bonfida?records=${query}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(expected);
    }
  });

  const SHAPE =
    'path must be /record-keys-v2/<domain>?records=<record>,<record>,...; a domain of "." or ".." (%2E) is removed from the URL by the client';
  it.each([
    '/record-keys-v2',
    '/record-keys-v2?records=SOL',
    '/record-keys-v2/a/b?records=SOL',
    '/record-keys-v2/%2E?records=SOL',
    '/record-keys-v2/bonfida/SOL',
    '/record-keys-v2/bonfida/?records=SOL',
  ])('answers %s, a path of the wrong shape, 400 with the envelope', async (path) => {
    const res = await fetch(baseUrlOf(app) + path);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ s: 'error', result: 'Invalid input', detail: SHAPE });
  });

  it('lists the route, its query and its answer in /openapi.json', async () => {
    const doc = (await (await fetch(`${baseUrlOf(app)}/openapi.json`)).json()) as {
      paths: { [path: string]: { get: { parameters: { name: string; in: string }[] } } };
    };
    const route = doc.paths['/record-keys-v2/{domain}'];
    expect(route).toBeDefined();
    expect(route?.get.parameters.map((p) => `${p.in}:${p.name}`).sort()).toEqual([
      'path:domain',
      'query:records',
    ]);
    const answers = (
      route as unknown as {
        get: {
          responses: {
            [status: string]: {
              headers?: object;
              content?: { 'application/json'?: { example?: unknown } };
            };
          };
        };
      }
    ).get.responses;
    expect(Object.keys(answers).sort()).toEqual(['200', '304', '400', '500', '503']);
    expect(Object.keys(answers['200']?.headers ?? {})).toEqual(['Cache-Control', 'ETag']);
    // The example is what the route answers, not an invented key.
    const live = await fetch(`${baseUrlOf(app)}/record-keys-v2/bonfida?records=SOL,email`);
    expect(answers['200']?.content?.['application/json']?.example).toEqual(await live.json());
  });
});
