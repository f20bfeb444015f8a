import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_PARAM_ACCEPTED } from '../src/core/http/page-params.js';
import { PAGE_LIMIT_PATTERN } from '../src/api/http/paged-answer.js';
import { seedDemo, startGateway, type Gateway } from './support/gateway.js';
import { startRpcSimulator, SimChain, type RpcSimulator } from '../tools/rpc-sim/index.js';

/** Parents by their number of subdomains (the empty, the single, and either side of the 1000 page cap). */
const SIZES = [0, 1, 999, 1000, 1001] as const;
const parentOf = (n: number) => `pages${n}`;

/**
 * Labels that JS's default sort orders unlike their numbers (`s10` before `s2`), so a page
 * boundary is checked in the answer's order, not in the order the labels were made.
 */
const labelsFor = (n: number) => Array.from({ length: n }, (_, i) => `s${i * 7919}`);

/** Labels whose prefixes need the normalization: accents, emoji, CJK, a decomposed accent. */
const UNICODE_LABELS = [
  'éclair',
  'élan',
  'émile',
  'ecole',
  'e\u0301toile', // `e` + combining acute: not the same code units as `é`
  'zebra',
  '🦀crab',
  '🦀rust',
  '🦊fox',
  '中文',
  '中国',
  'straße',
];

/**
 * Labels the parent's normalization would change (capitals, spaces, characters whose case mapping
 * changes their length or depends on context): listed as they are, reached by their own prefixes.
 */
const CASED_LABELS = [
  'ABC',
  'abc',
  'Ábc',
  'ABD',
  'ß',
  'SS',
  'ss',
  '🦀',
  '🦀Crab',
  ' lead', // a leading space
  'trail ', // a trailing space
  'a b',
  'ΑΣΑ', // Greek capitals: the sigma lower-cases to σ inside a word and ς at its end
  'İx', // lower-cases to two code points
];

function pagesChain(): SimChain {
  const chain = seedDemo();
  for (const n of SIZES) {
    chain.addDomain(parentOf(n));
    for (const label of labelsFor(n)) chain.addSubdomain(parentOf(n), label);
  }
  for (const label of UNICODE_LABELS) chain.addSubdomain('unicode', label);
  for (const label of CASED_LABELS) chain.addSubdomain('cased', label);
  return chain;
}

type PageBody = { s: string; result: string[]; next?: string | null };

/** GETs a page and checks what every page answer carries. */
async function getPage(gw: Gateway, path: string): Promise<{ body: PageBody; total: number }> {
  const res = await gw.get(path);
  expect(res.status, path).toBe(200);
  const total = Number(res.headers.get('x-total-count'));
  expect(Number.isInteger(total), `${path}: X-Total-Count`).toBe(true);
  return { body: res.body as PageBody, total };
}

/**
 * Follows `next` from the first page to the end and returns the labels in order; checks that
 * every page but the last is full and ends with its `next`, and that `next` is null on the last.
 */
async function pageThrough(
  gw: Gateway,
  parent: string,
  limit: number,
  prefix?: string,
): Promise<{ labels: string[]; pages: number; totals: Set<number> }> {
  const labels: string[] = [];
  const totals = new Set<number>();
  let after: string | null | undefined;
  let pages = 0;
  do {
    const q = new URLSearchParams({ limit: String(limit) });
    if (prefix !== undefined) q.set('prefix', prefix);
    if (after) q.set('after', after);
    const { body, total } = await getPage(gw, `/subdomains/${parent}?${q.toString()}`);
    totals.add(total);
    expect(Object.keys(body)).toEqual(['s', 'result', 'next']);
    expect(body.result.length).toBeLessThanOrEqual(limit);
    after = body.next;
    if (after !== null) {
      expect(body.result).toHaveLength(limit);
      expect(after).toBe(body.result[body.result.length - 1]);
    }
    labels.push(...body.result);
    pages++;
    if (pages > 2000) throw new Error('next never became null');
  } while (after !== null);
  return { labels, pages, totals };
}

describe('GET /subdomains/:parent pages and prefixes', () => {
  let gw: Gateway;
  // 3,000 subdomains to seed and index before the first test: a bound against a hang, roomy
  // enough for a loaded machine (the suite's 30 s default was passed at load 18).
  beforeAll(async () => {
    gw = await startGateway({ chain: pagesChain() });
  }, 120_000);
  afterAll(() => gw.close());

  const full = async (parent: string) => {
    const res = await gw.get(`/subdomains/${encodeURIComponent(parent)}`);
    expect(res.status).toBe(200);
    return res.body.result as string[];
  };

  describe.each(SIZES)('a parent of %i subdomains', (n) => {
    it.each([1000, 7])(
      'pages of %i concatenate to the whole list, next null at the end',
      async (limit) => {
        const whole = await full(parentOf(n));
        expect(whole).toEqual(labelsFor(n).sort());
        const { labels, pages, totals } = await pageThrough(gw, parentOf(n), limit);
        expect(labels).toEqual(whole);
        // One page when everything fits (none of 0 labels, too); a full last page is not followed
        // by an empty one.
        expect(pages).toBe(Math.max(1, Math.ceil(n / limit)));
        expect([...totals]).toEqual([n]);
      },
    );
  });

  it('takes a limit written in digits, 1 to 1000', async () => {
    const whole = await full(parentOf(1001));
    for (const limit of ['1', '9', '10', '99', '100', '101', '999', '1000']) {
      const { body } = await getPage(gw, `/subdomains/${parentOf(1001)}?limit=${limit}`);
      expect(body.result, limit).toEqual(whole.slice(0, Number(limit)));
      expect(body.next, limit).toBe(whole[Number(limit) - 1]);
    }
  });

  it('starts after a label that is not in the list, at the next one in sort order', async () => {
    const whole = await full(parentOf(1001));
    // Taken as it is: spaces are code units like any other, not trimmed away.
    for (const after of ['', 's4', 's5x', 's9999999', 'r', 't', '\u{10ffff}', ' ', ' s4', 's4 ']) {
      const q = new URLSearchParams({ limit: '5' });
      if (after !== '') q.set('after', after);
      const { body } = await getPage(gw, `/subdomains/${parentOf(1001)}?${q.toString()}`);
      const rest = whole.filter((l) => l > after);
      expect(body.result, after).toEqual(rest.slice(0, 5));
      expect(body.next, after).toBe(rest.length > 5 ? rest[4] : null);
    }
  });

  it('keeps the labels that start with the prefix, as given: not trimmed, not lower-cased', async () => {
    const whole = await full('unicode');
    expect(whole).toEqual([...UNICODE_LABELS].sort());
    const cases: [string, string[]][] = [
      ['é', ['éclair', 'élan', 'émile']],
      ['él', ['élan']],
      [' él', []],
      ['É', []],
      ['e', ['ecole', 'e\u0301toile']],
      // No Unicode normalization form: a decomposed accent is its own text.
      ['e\u0301', ['e\u0301toile']],
      ['🦀', ['🦀crab', '🦀rust']],
      ['中', ['中国', '中文']],
      ['stra', ['straße']],
      ['STRAẞE', []],
      ['strasse', []],
      ['zebra', ['zebra']],
      ['Zebra', []],
      ['zebras', []],
      ['', whole],
      ['  ', []],
    ];
    for (const [prefix, expected] of cases) {
      const q = new URLSearchParams({ prefix });
      const res = await gw.get(`/subdomains/unicode?${q.toString()}`);
      expect(res.status).toBe(200);
      // Without limit: the list of the prefix, and no `next` field.
      expect(res.body, prefix).toEqual({ s: 'ok', result: expected });
      expect(res.headers.get('x-total-count'), prefix).toBe(String(expected.length));
    }
  });

  it('reaches every label listed by each of its own prefixes, as listed', async () => {
    const whole = await full('cased');
    expect(whole).toEqual([...CASED_LABELS].sort());
    const prefixes = new Set<string>();
    for (const label of whole) {
      const points = Array.from(label);
      for (let n = 1; n <= points.length; n++) prefixes.add(points.slice(0, n).join(''));
    }
    for (const prefix of prefixes) {
      const q = new URLSearchParams({ prefix });
      const res = await gw.get(`/subdomains/cased?${q.toString()}`);
      const expected = whole.filter((l) => l.startsWith(prefix));
      expect(res.body, JSON.stringify(prefix)).toEqual({ s: 'ok', result: expected });
      expect(res.headers.get('x-total-count'), JSON.stringify(prefix)).toBe(
        String(expected.length),
      );
    }
    // Capitals are not folded: `AB` is not `ab`.
    expect((await gw.get('/subdomains/cased?prefix=AB')).body.result).toEqual(['ABC', 'ABD']);
    expect((await gw.get('/subdomains/cased?prefix=ab')).body.result).toEqual(['abc']);
    // Pages of a prefix, one label at a time, reach them too; so do the rows of /details.
    for (const prefix of ['A', ' ', '🦀', 'Α']) {
      const { labels } = await pageThrough(gw, 'cased', 1, prefix);
      expect(labels, prefix).toEqual(whole.filter((l) => l.startsWith(prefix)));
    }
    const details = await gw.get(`/subdomains/cased/details?prefix=${encodeURIComponent(' ')}`);
    expect(details.status).toBe(200);
    expect((details.body.result as { label: string }[]).map((r) => r.label)).toEqual([' lead']);
  });

  it('combines the prefix with pages', async () => {
    const whole = await full(parentOf(1001));
    for (const prefix of ['s1', 's12', 'S3', 's3 ', 's99999', 'x']) {
      const matched = whole.filter((l) => l.startsWith(prefix));
      for (const limit of [1000, 7]) {
        const { labels, totals } = await pageThrough(gw, parentOf(1001), limit, prefix);
        expect(labels, `${prefix} by ${limit}`).toEqual(matched);
        expect([...totals]).toEqual([matched.length]);
      }
    }
    // Unicode prefixes page too, and their pages cut inside multi-code-unit labels' runs.
    const { labels } = await pageThrough(gw, 'unicode', 1, '🦀');
    expect(labels).toEqual(['🦀crab', '🦀rust']);
  });

  it('keeps the answer without parameters exactly as it was: same bytes, no next, no count', async () => {
    for (const parent of [parentOf(0), parentOf(1001), 'unicode', '67679']) {
      const whole = await full(parent);
      const res = await fetch(`${gw.baseUrl}/subdomains/${parent}`);
      const text = await res.text();
      expect(text).toBe(JSON.stringify({ s: 'ok', result: whole }));
      expect(text).not.toContain('"next"');
      expect(res.headers.get('x-total-count')).toBeNull();
      expect(res.headers.get('access-control-expose-headers')).toBe(
        'X-Cache, Age, ETag, Retry-After',
      );
      expect(res.headers.get('cache-control')).toMatch(/^public, max-age=\d+, /);
    }
    const demo = await fetch(`${gw.baseUrl}/subdomains/67679`);
    expect(await demo.text()).toBe('{"s":"ok","result":["bullish","hollaaa","testing"]}');
  });

  it('gives each page its own ETag, the list caching headers, and 304 on revalidation', async () => {
    const url = (q: string) => `${gw.baseUrl}/subdomains/${parentOf(1001)}?${q.toString()}`;
    const whole = await fetch(url(''));
    const first = await fetch(url('limit=7'));
    const firstAgain = await fetch(url('limit=7'));
    const second = await fetch(url('limit=7&after=s1001'));
    const prefixed = await fetch(url('prefix=s1'));
    const tags = [whole, first, second, prefixed].map((r) => r.headers.get('etag'));
    expect(new Set(tags).size).toBe(4);
    expect(firstAgain.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(await firstAgain.text()).toBe(await first.text());
    for (const res of [first, second, prefixed]) {
      expect(res.headers.get('cache-control')).toBe(whole.headers.get('cache-control'));
      expect(res.headers.get('age')).toMatch(/^\d+$/);
      expect(res.headers.get('x-cache')).toBe('HIT');
      expect(res.headers.get('access-control-expose-headers')).toBe(
        'X-Cache, Age, ETag, Retry-After, X-Total-Count',
      );
    }
    const revalidated = await fetch(url('limit=7'), {
      headers: { 'if-none-match': first.headers.get('etag') as string },
    });
    expect(revalidated.status).toBe(304);
    expect(revalidated.headers.get('x-total-count')).toBe('1001');
    // Another page's tag does not revalidate this one.
    const other = await fetch(url('limit=7'), {
      headers: { 'if-none-match': second.headers.get('etag') as string },
    });
    expect(other.status).toBe(200);
  });

  const LIMIT = PAGE_PARAM_ACCEPTED.limit as string;
  const AFTER = PAGE_PARAM_ACCEPTED.after as string;
  const PREFIX = PAGE_PARAM_ACCEPTED.prefix as string;
  const BAD_LIMIT = `querystring/limit must match pattern "${PAGE_LIMIT_PATTERN}": ${LIMIT}`;
  it.each([
    // Whatever a number parser would take, only the digits of 1 to 1000 are a limit.
    ...[
      '0',
      '1001',
      '-3',
      '1.5',
      '2.0',
      'ten',
      '',
      '1e3',
      '1e2',
      '0x10',
      '0b11',
      '0o7',
      '%20%202',
      '2%20',
      '%092',
      '+2',
      '%2B2',
      '02',
      '0100',
      'Infinity',
      'NaN',
      'true',
      '1_0',
      '%EF%BC%91', // a fullwidth digit one
      '%D9%A1', // an Arabic-Indic digit one
      '10000000000000000000001',
    ].map((v) => [`limit=${v}`, `limit=${v}`, BAD_LIMIT]),
    ['a bare limit', 'limit', BAD_LIMIT],
    ['two limits', 'limit=2&limit=3', `querystring/limit must be string: ${LIMIT}`],
    ['two equal limits', 'limit=2&limit=2', `querystring/limit must be string: ${LIMIT}`],
    [
      'an empty after',
      'limit=2&after=',
      `querystring/after must NOT have fewer than 1 characters: ${AFTER}`,
    ],
    [
      'a bare after',
      'limit=2&after',
      `querystring/after must NOT have fewer than 1 characters: ${AFTER}`,
    ],
    ['two afters', 'limit=2&after=a&after=b', `querystring/after must be string: ${AFTER}`],
    ['two equal afters', 'limit=2&after=a&after=a', `querystring/after must be string: ${AFTER}`],
    [
      'after without limit',
      'after=s1',
      'after needs limit: ?limit=N&after=<the next of the previous page>',
    ],
    ['two prefixes', 'prefix=a&prefix=b', `querystring/prefix must be string: ${PREFIX}`],
  ])('answers 400 Invalid input for %s, saying which rule', async (_why, query, detail) => {
    const res = await gw.get(`/subdomains/${parentOf(1)}?${query}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ s: 'error', result: 'Invalid input', detail });
  });

  it('documents limit, after, prefix and next in /openapi.json', async () => {
    type Op = {
      parameters: { name: string; in: string; schema: Record<string, unknown> }[];
      responses: Record<string, { content: Record<string, { schema: Record<string, unknown> }> }>;
    };
    const doc = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, { get: Op }>;
      components: { schemas: Record<string, Record<string, unknown>> };
    };
    const op = doc.paths['/subdomains/{parent}']?.get as Op;
    const query = Object.fromEntries(
      op.parameters.filter((p) => p.in === 'query').map((p) => [p.name, p.schema]),
    );
    expect(Object.keys(query).sort()).toEqual(['after', 'limit', 'prefix', 'rpc']);
    // A string of digits, as the route checks it: an integer schema would be coerced from `1e3`.
    expect(query.limit).toMatchObject({ type: 'string', pattern: PAGE_LIMIT_PATTERN });
    // The answer is the shared component SubdomainList (what a generated client names it).
    expect(op.responses['200']?.content['application/json']?.schema).toMatchObject({
      allOf: [{ $ref: '#/components/schemas/SubdomainList' }],
    });
    const schema = doc.components.schemas.SubdomainList as {
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(Object.keys(schema.properties)).toEqual(['s', 'result', 'next']);
    expect(schema.required).not.toContain('next');
  });

  it('still refuses paths of the wrong shape, with page parameters too', async () => {
    for (const path of [
      '/subdomains?limit=2',
      '/subdomains/a/b?limit=2',
      '/subdomains/a/b/c?limit=2&after=x',
    ]) {
      const res = await gw.get(path);
      expect(res.status, path).toBe(400);
      expect(res.body.result).toBe('Invalid input');
      expect((res.body as { detail?: string }).detail, path).toMatch(
        /^path must be \/subdomains\//,
      );
    }
  });
});

describe('pages through ?rpc=', () => {
  let other: RpcSimulator;
  let gw: Gateway;
  beforeAll(async () => {
    const chain = new SimChain();
    for (const label of labelsFor(20)) chain.addSubdomain('67679', label);
    other = await startRpcSimulator({ chain });
    gw = await startGateway({ env: { RPC_OVERRIDE_ALLOWLIST: other.url } });
  });
  afterAll(async () => {
    await gw.close();
    await other.close();
  });

  it("pages the override's own list, not shared (no-store)", async () => {
    const rpc = encodeURIComponent(other.url);
    const first = await gw.get(`/subdomains/67679?rpc=${rpc}&limit=15&prefix=s`);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect(first.headers.get('age')).toBeNull();
    const expected = labelsFor(20).sort();
    expect(first.headers.get('x-total-count')).toBe('20');
    const body = first.body as PageBody;
    expect(body).toEqual({ s: 'ok', result: expected.slice(0, 15), next: expected[14] });
    const second = await gw.get(
      `/subdomains/67679?rpc=${rpc}&limit=15&after=${encodeURIComponent(body.next as string)}`,
    );
    expect(second.body).toEqual({ s: 'ok', result: expected.slice(15), next: null });
    // The default endpoint's list is apart.
    const viaDefault = await gw.get('/subdomains/67679?limit=2');
    expect(viaDefault.body).toEqual({ s: 'ok', result: ['bullish', 'hollaaa'], next: 'hollaaa' });
    expect(viaDefault.headers.get('x-total-count')).toBe('3');
  });
});
