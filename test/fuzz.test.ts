import { connect } from 'node:net';
import { getRecordV2Key, Record } from '@bonfida/spl-name-service';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from './support/gateway.js';
import { demoLabels } from '../tools/rpc-sim/index.js';

/**
 * Property-based tests of both routes through real HTTP (the listening API, the real worker, the
 * RPC simulator healthy): hostile path segments, Unicode, path tricks and junk query strings must
 * always get the JSON envelope with a 200, 400, 404, 414 or 431, never a 5xx, a framework page or
 * a hang; a successful derivation must equal the SDK's; the process must keep serving.
 */

const RECORDS: readonly string[] = Object.values(Record);
const ALLOWED = new Set([200, 400, 404, 414, 431]);
/** Fastify's `maxParamLength` (src/api/http/app.ts): a longer parameter is refused with 400. */
const MAX_PARAM_LENGTH = 8192;
/** Node's header limit (16 KiB) bounds the request line: a URL near it may get 431. */
const NEAR_HEADER_LIMIT = 16 * 1024 - 512;
const REQUEST_TIMEOUT_MS = 8_000;
const RUNS = 400;

const DEMO_LABELS = demoLabels();

/** A small deterministic generator, so a fast-check seed replays the same encoding choices. */
function prng(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

const hex = (byte: number, lower: boolean) => {
  const h = byte.toString(16).padStart(2, '0');
  return `%${lower ? h : h.toUpperCase()}`;
};

/**
 * Percent-encodes `text` as a path segment, choosing per character at random between leaving it
 * raw (fetch's URL parser then encodes what must be encoded) and `%XX` in either hex case. The
 * characters that would change the path's structure (`/ ? # \ %`) or that the URL parser drops
 * (tab, newline) are always encoded, so the segment reaches the server as one parameter.
 */
function encodeSegment(text: string, seed: number): string {
  const rand = prng(seed);
  let out = '';
  for (const ch of text) {
    const structural = /[/?#\\%\t\n\r]/.test(ch);
    if (!structural && rand() < 0.5) {
      out += ch;
      continue;
    }
    const lower = rand() < 0.5;
    for (const byte of Buffer.from(ch, 'utf8')) out += hex(byte, lower);
  }
  return out;
}

/** Percent-encodes raw bytes, leaving unreserved ASCII raw at random. */
function encodeBytes(bytes: Uint8Array, seed: number): string {
  const rand = prng(seed);
  let out = '';
  for (const byte of bytes) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(ch) && rand() < 0.5 ? ch : hex(byte, rand() < 0.5);
  }
  return out;
}

/** Whitespace of every kind String.prototype.trim knows, and some it does not (U+200B, U+180E). */
const WHITESPACE = [
  ' ',
  '\t',
  '\n',
  '\r',
  '\v',
  '\f',
  '\u00a0',
  '\u1680',
  '\u2000',
  '\u2003',
  '\u200a',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\ufeff',
  '\u180e',
  '\u200b',
];
const UNICODE_PIECES = [
  ...WHITESPACE,
  'a',
  'Z',
  '0',
  '-',
  '_',
  '.',
  'é',
  'e\u0301', // combining acute
  'a\u0308\u0323', // stacked combining marks
  '\u20dd',
  'İ', // lower-cases to two code points
  'ẞ',
  'Σ',
  'ǅ',
  'K', // Kelvin sign
  'ß',
  '中文',
  'עברית',
  'العربية',
  '\u202e', // right-to-left override
  '\u200f',
  '\u200d',
  '𝔘',
  '🦀',
  '👩‍👩‍👧',
  '\u{10ffff}',
  '\u{e0001}',
  '。', // ideographic full stop
  '．',
  '\u0000',
  '\u001f',
  '\u007f',
  '\u0085',
];

const BROKEN_ESCAPES = [
  '%',
  '%%',
  '%2',
  '%zz',
  '%G0',
  '%E0%A4%A',
  '%E0%A4',
  '%00',
  '%C0%AF', // overlong '/'
  '%ED%A0%80', // an encoded surrogate
  '%F4%90%80%80', // past U+10FFFF
  '%FF',
  '%80',
  '%u0041',
  '%2F',
  '%2f',
  '%5C',
  '%3F',
  '%23',
  '%25',
  '%2e%2e',
  '%2E',
];

const PATH_TRICKS = [
  '..',
  '.',
  './',
  '../',
  '//',
  '/',
  '\\',
  '\\..',
  '%2F..',
  ';',
  '?',
  '#',
  '&',
  '=',
];

/** A label for a derivation or a parent, written the way a hostile client might write it. */
const segment: fc.Arbitrary<string> = fc.oneof(
  // Unicode of every kind, encoded at random.
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.array(fc.constantFrom(...UNICODE_PIECES), { maxLength: 12 }), fc.nat())
      .map(([pieces, seed]) => encodeSegment(pieces.join(''), seed)),
  },
  // Any code points fast-check can make (astral included).
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.string({ unit: 'binary', maxLength: 24 }), fc.nat())
      .map(([text, seed]) => encodeSegment(text, seed)),
  },
  // Random bytes, invalid UTF-8 included.
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.uint8Array({ maxLength: 32 }), fc.nat())
      .map(([bytes, seed]) => encodeBytes(bytes, seed)),
  },
  // Broken escapes and path tricks among ordinary characters, sent as written.
  {
    weight: 3,
    arbitrary: fc
      .array(
        fc.oneof(
          fc.constantFrom(...BROKEN_ESCAPES),
          fc.constantFrom(...PATH_TRICKS),
          fc.stringMatching(/^[a-z0-9.-]{1,6}$/),
        ),
        { minLength: 1, maxLength: 6 },
      )
      .map((parts) => parts.join('')),
  },
  // Huge labels: up to several thousand characters, some past every limit.
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('a', 'Z', 'é', '中', '🦀', '-', '%41'),
        fc.integer({ min: 100, max: 6000 }),
      )
      .map(([unit, n]) => (unit.startsWith('%') ? unit : encodeURIComponent(unit)).repeat(n)),
  },
  // Names that are valid as written.
  {
    weight: 2,
    arbitrary: fc.oneof(
      fc.constantFrom('bonfida', '67679', 'demo', 'empty', 'sub.domain2', ' DeMo ', 'BONFIDA'),
      fc.stringMatching(/^[a-z0-9-]{1,20}(\.[a-z0-9-]{1,20})?$/),
    ),
  },
);

const recordSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...RECORDS) },
  { weight: 1, arbitrary: fc.constantFrom(...RECORDS).chain((r) => fc.mixedCase(fc.constant(r))) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...RECORDS), fc.constantFrom(...WHITESPACE))
      .map(([r, ws]) => encodeURIComponent(ws + r)),
  },
  { weight: 2, arbitrary: segment },
);

/** URLs an attacker might try as `?rpc=`; with no allowlist every one must be refused (400). */
const hostileRpc = fc.oneof(
  fc.constantFrom(
    'http://127.0.0.1:8899',
    'https://127.0.0.1',
    'https://[::1]/',
    'https://0x7f.1/',
    'https://2130706433/',
    'https://localhost/',
    'https://rpc.localhost/',
    'https://metadata.google.internal/',
    'https://printer.local/',
    'https://169.254.169.254/latest/meta-data',
    'https://intranet/',
    'file:///etc/passwd',
    'redis://127.0.0.1:6379',
    'javascript:alert(1)',
    'gopher://127.0.0.1:6379/_FLUSHALL',
    'https://user:pass@127.0.0.1/',
    '//127.0.0.1',
    'https://',
    'https:// x .invalid/',
  ),
  // A DNS name (the test's resolver maps every name to a private address).
  fc.stringMatching(/^[a-z0-9-]{1,12}$/).map((h) => `https://${h}.example.com/`),
);

/** Query strings: junk keys and values, `rpc=` with junk or hostile URLs, repeated keys. */
const queryString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  {
    weight: 5,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(
            fc.constantFrom('rpc', 'RPC', 'rpc[]', 'r%70c', '__proto__', 'constructor', 'x', ''),
            segment,
          ),
          fc.oneof(
            fc.constant(''),
            hostileRpc.map((u) => encodeURIComponent(u)),
            hostileRpc,
            segment,
          ),
          fc.boolean(),
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map(
        (pairs) => '?' + pairs.map(([k, v, withEq]) => (withEq || v ? `${k}=${v}` : k)).join('&'),
      ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('?', '??', '?&&', '?=', '?rpc', '?rpc=', '?rpc=%', '?#x'),
  },
);

/** A whole request path: mostly the two routes, sometimes near misses of them. */
const requestPath: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(segment, recordSegment, queryString)
      .map(([d, r, q]) => `/record-key-v2/${d}/${r}${q}`),
  },
  {
    weight: 6,
    arbitrary: fc.tuple(segment, queryString).map(([p, q]) => `/subdomains/${p}${q}`),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(
          '/record-key-v2/',
          '/record-key-v2',
          '//record-key-v2/',
          '/subdomains/',
          '/subdomains',
          '/SUBDOMAINS/',
          '/subdomains//',
          '/./subdomains/',
          '/x/../subdomains/',
          '/types/record/',
          '/%73ubdomains/',
        ),
        segment,
        fc.constantFrom('', '/', '/SOL', '/x/y', '/..', '/.'),
        queryString,
      )
      .map((parts) => parts.join('')),
  },
);

type Oracle =
  | { route: 'derive'; domain: string | undefined; record: string | undefined; long: boolean }
  | { route: 'subdomains'; parent: string | undefined; rpc: boolean; long: boolean }
  | { route: 'other' };

function decode(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/**
 * What the router should see for the URL fetch sends: WHATWG URL parsing first resolves dot
 * segments and backslashes, then each parameter is percent-decoded (undefined when it cannot be).
 */
function oracle(url: URL): Oracle {
  const derive = /^\/record-key-v2\/([^/]*)\/([^/]*)$/.exec(url.pathname);
  if (derive) {
    const [, d = '', r = ''] = derive;
    return {
      route: 'derive',
      domain: decode(d),
      record: decode(r),
      long: d.length > MAX_PARAM_LENGTH || r.length > MAX_PARAM_LENGTH,
    };
  }
  const sub = /^\/subdomains\/([^/]*)$/.exec(url.pathname);
  if (sub) {
    const [, p = ''] = sub;
    return {
      route: 'subdomains',
      parent: decode(p),
      rpc: new URLSearchParams(url.search).has('rpc'),
      long: p.length > MAX_PARAM_LENGTH,
    };
  }
  return { route: 'other' };
}

/**
 * The routes' normalization and shape rule (docs/design.md, "Endpoints and the error contract").
 */
function labelsOf(raw: string, max: number): string | undefined {
  const name = raw.trim().toLowerCase();
  const labels = name.split('.');
  return labels.length <= max && labels.every((l) => l.length > 0) && !name.includes('/')
    ? name
    : undefined;
}

const sdkKey = (name: string, record: string) =>
  getRecordV2Key(`${name}.sol`, record as Record).toBase58();

type Answer = { status: number; contentType: string | null; text: string };

async function send(url: URL): Promise<Answer> {
  const res = await fetch(url, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    text: await res.text(),
  };
}

/** Parses a JSON envelope and checks it matches the status; throws with the evidence if not. */
function envelope(answer: Answer, what: string): { s: string; result: unknown } {
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    throw new Error(
      `${what}: HTTP ${answer.status} with a non-JSON body: ${answer.text.slice(0, 200)}`,
    );
  }
  expect(answer.contentType, what).toMatch(/^application\/json/);
  const { detail, ...envelope } = body as { detail?: unknown };
  expect(envelope, what).toEqual({
    s: answer.status === 200 ? 'ok' : 'error',
    result: expect.anything() as unknown,
  });
  const result = (body as { result: unknown }).result;
  if (answer.status !== 200) expect(typeof result, what).toBe('string');
  // An error may explain itself, in bounded text without control characters.
  if (detail !== undefined) {
    expect(answer.status, what).not.toBe(200);
    expect(typeof detail, what).toBe('string');
    expect((detail as string).length, what).toBeLessThanOrEqual(300);
    expect(detail, what).not.toMatch(/\p{Cc}/u);
  }
  return body as { s: string; result: unknown };
}

/** Checks one answer against the oracle: envelope, allowed status, and the exact result. */
function check(url: URL, answer: Answer): void {
  const what = `GET ${url.pathname.slice(0, 300)}${url.search.slice(0, 200)}`;
  expect(ALLOWED.has(answer.status), `${what}: status ${answer.status}`).toBe(true);
  const expected = oracle(url);
  // A dot segment can take the URL out of the API (`/subdomains/..` is `/`, the HTML home page):
  // such a path is not under test beyond "answered, no 5xx".
  if (expected.route === 'other' && !/^\/(record-key-v2|subdomains)(\/|$)/.test(url.pathname)) {
    return;
  }
  const body = envelope(answer, what);
  const oversize = url.pathname.length + url.search.length > NEAR_HEADER_LIMIT;
  // A refusal for size (400 past maxParamLength, 431 past the header limit) is always fine.
  const sizeRefusal = (long: boolean) =>
    (long && answer.status === 400) || (oversize && answer.status === 431);

  if (expected.route === 'derive') {
    const name = expected.domain === undefined ? undefined : labelsOf(expected.domain, 2);
    const record = expected.record;
    const valid = name !== undefined && record !== undefined && RECORDS.includes(record);
    if (answer.status === 200) {
      expect(valid, `${what}: derived a name the rules refuse`).toBe(true);
      expect(body.result, what).toBe(sdkKey(name!, record!));
    } else if (!sizeRefusal(expected.long)) {
      expect(answer.status, what).toBe(valid ? 200 : 400);
    }
  } else if (expected.route === 'subdomains') {
    const parent = expected.parent === undefined ? undefined : labelsOf(expected.parent, 1);
    const valid = parent !== undefined && !expected.rpc;
    if (answer.status === 200) {
      expect(valid, `${what}: answered a parent or ?rpc= the rules refuse`).toBe(true);
      expect(body.result, what).toEqual(DEMO_LABELS.get(parent!) ?? []);
    } else if (!sizeRefusal(expected.long)) {
      expect(answer.status, what).toBe(valid ? 200 : 400);
    }
  } else {
    // No route of ours (e.g. a dot segment took the path elsewhere): 404, or 400 for a bad escape.
    expect([400, 404, 431], what).toContain(answer.status);
  }
}

/** Sends raw bytes as the request target over a socket and reads until the server closes. */
function rawRequest(port: number, target: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(`raw request hung: ${JSON.stringify(target.toString('latin1')).slice(0, 200)}`),
      );
    }, REQUEST_TIMEOUT_MS);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => undefined); // a reset is a closed connection: allowed
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    socket.write(
      Buffer.concat([
        Buffer.from('GET '),
        target,
        Buffer.from(' HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'),
      ]),
    );
  });
}

/** Splits a byte stream into the HTTP/1.1 responses it holds (Content-Length framed). */
function parseResponses(data: Buffer): Array<{ status: number; head: string; body: string }> {
  const out: Array<{ status: number; head: string; body: string }> = [];
  let rest = data;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0)
      throw new Error(`truncated response head: ${rest.toString('latin1').slice(0, 200)}`);
    const head = rest.subarray(0, end).toString('latin1');
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1];
    if (!status) throw new Error(`not an HTTP/1.1 status line: ${head.slice(0, 200)}`);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
    if (length === undefined) throw new Error(`response without Content-Length: ${head}`);
    const bodyEnd = end + 4 + Number(length);
    out.push({ status: Number(status), head, body: rest.subarray(end + 4, bodyEnd).toString() });
    rest = rest.subarray(bodyEnd);
  }
  return out;
}

describe('fuzz: hostile input over real HTTP', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      env: {
        // Every cold parent is a refresh: let them all through at once.
        RPC_MAX_PER_SECOND: '100000',
        WORKER_CONCURRENCY: '16',
        // One client sends every cold miss here: the per-client limit is not under test.
        COLD_MISS_LIMIT: '1000000',
        LOG_LEVEL: 'warn',
      },
      // No real DNS: every name an `?rpc=` carries "resolves" to a private address.
      resolveHost: async () => ['10.0.0.1'],
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('answers every generated request on both routes with the envelope, and derives as the SDK', async () => {
    await fc.assert(
      fc.asyncProperty(requestPath, async (path) => {
        let url: URL;
        try {
          url = new URL(gw.baseUrl + path);
        } catch {
          fc.pre(false);
          return;
        }
        check(url, await send(url));
      }),
      { numRuns: RUNS },
    );
  });

  it('derives every well-formed Unicode name exactly as the SDK does', async () => {
    const name = fc
      .tuple(
        fc.array(fc.constantFrom(...UNICODE_PIECES.filter((p) => p !== '.')), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.option(
          fc.array(fc.constantFrom(...UNICODE_PIECES.filter((p) => p !== '.')), {
            minLength: 1,
            maxLength: 8,
          }),
        ),
      )
      .map(([a, b]) => (b ? `${a.join('')}.${b.join('')}` : a.join('')));
    await fc.assert(
      fc.asyncProperty(
        name,
        fc.constantFrom(...RECORDS),
        fc.nat(),
        async (domain, record, seed) => {
          const url = new URL(
            `${gw.baseUrl}/record-key-v2/${encodeSegment(domain, seed)}/${record}`,
          );
          const answer = await send(url);
          check(url, answer);
          const normalized = labelsOf(domain, 2);
          if (normalized !== undefined) {
            expect(answer.status).toBe(200);
            expect(envelope(answer, domain).result).toBe(sdkKey(normalized, record));
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('answers raw request lines fetch refuses (spaces, controls, invalid UTF-8) with the envelope or a closed connection', async () => {
    const port = Number(new URL(gw.baseUrl).port);
    const rawSegment = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 40 }),
      fc
        .array(
          fc.oneof(
            fc.constantFrom(
              ' ',
              '\t',
              '\r',
              '\n',
              '\r\n',
              '\0',
              '\x01',
              '\x7f',
              '\\',
              '..',
              '"',
              '<',
              '>',
              '{',
              '}',
              '|',
              '^',
              '`',
              ' HTTP/1.1\r\nX: y',
              ' HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz',
            ),
            fc.stringMatching(/^[a-z0-9]{1,5}$/),
          ),
          { minLength: 1, maxLength: 6 },
        )
        .map((parts) => Buffer.from(parts.join(''), 'latin1')),
      fc
        .uint8Array({ minLength: 1, maxLength: 12 })
        .map((b) => Buffer.from(b.map((x) => x | 0x80))),
    );
    // Each target starts inside the API's routes: the request a smuggled line ends (` HTTP/1.1`)
    // is then for one of them, never for `/` (the HTML home page).
    const prefix = fc.constantFrom('/record-key-v2/', '/subdomains/', '/record-key-v2/bonfida/');
    const suffix = fc.constantFrom('/SOL', '', '?rpc=x', '/email');
    await fc.assert(
      fc.asyncProperty(prefix, rawSegment, suffix, async (pre, seg, suf) => {
        const target = Buffer.concat([Buffer.from(pre), seg, Buffer.from(suf)]);
        const data = await rawRequest(port, target);
        const what = `raw ${JSON.stringify(target.toString('latin1')).slice(0, 200)}`;
        for (const res of parseResponses(data)) {
          expect(ALLOWED.has(res.status), `${what}: status ${res.status}`).toBe(true);
          envelope(
            {
              status: res.status,
              contentType: /content-type: *([^\r]*)/i.exec(res.head)?.[1] ?? null,
              text: res.body,
            },
            what,
          );
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps serving afterwards, with nothing logged as an error', async () => {
    expect(await gw.get('/healthz')).toMatchObject({ status: 200, body: { s: 'ok' } });
    expect((await gw.get('/subdomains/67679')).body.result).toEqual([
      'bullish',
      'hollaaa',
      'testing',
    ]);
    const errors = gw.logs.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
    expect(errors).toEqual([]);
  });
});
