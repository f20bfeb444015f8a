/**
 * The account list read without a parse (worker/sns/canonical-accounts.ts) through
 * `parseBoundedJsonSplit`: an account list written as Agave writes it is read from its bytes, and
 * gives what the parse gives; any other body is parsed, with the outcome it always had.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  JsonBoundsError,
  JsonHeapError,
  parseBoundedJsonSplit,
  type SplitJson,
} from '../worker/rpc/bounded-json.js';
import { canonicalAccounts, type CanonicalAccounts } from '../worker/sns/canonical-accounts.js';
import { classifyProgramAccounts } from '../worker/sns/discovery-decode.js';
import { warmUpReply } from '../worker/sns/warm-up.js';
import { toBase58 } from '../src/core/sns/base58.js';

const PATH = ['result', 'value'];
const MAX_TEXT = 132;
const reader = canonicalAccounts(MAX_TEXT);
const KEY_A = 'namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX';
const KEY_B = '11111111111111111111111111111111';
/** The longest key base58 writes: 44 characters. */
const KEY_C = toBase58(Buffer.alloc(32, 0xff));

/** One element as Agave writes it, each part replaceable. */
function element(
  parts: Partial<
    Record<'data' | 'exec' | 'lamports' | 'owner' | 'rent' | 'space' | 'pubkey', string>
  > = {},
): string {
  const p = {
    data: 'BQQhjPCKbeYsAWtCVCzK2CewW/H4XmQgqsiOe2I/jz3Z+A==',
    exec: 'false',
    lamports: '15479040',
    owner: KEY_A,
    rent: '18446744073709551615',
    space: '2096',
    pubkey: KEY_B,
    ...parts,
  };
  return (
    `{"account":{"data":["${p.data}","base64"],"executable":${p.exec},"lamports":${p.lamports},` +
    `"owner":"${p.owner}","rentEpoch":${p.rent},"space":${p.space}},"pubkey":"${p.pubkey}"}`
  );
}

const reply = (
  list: string,
  around = (v: string) => `{"context":{"apiVersion":"2.2.0","slot":7},"value":${v}}`,
) => Buffer.from(`{"jsonrpc":"2.0","result":${around(`[${list}]`)},"id":1}`);

/** What a caller makes of a split: the accounts' keys and texts, from the reader or the parse. */
function accountsOf(split: SplitJson<CanonicalAccounts>): CanonicalAccounts {
  if (split.read) return split.read;
  const list = split.elements
    ? Array.from({ length: split.elements.count }, (_, i) => split.elements?.at(i))
    : (split.value as { result: { value: unknown[] } }).result.value;
  const items = list as Array<{ pubkey: string; account: { data: [string, string] } }>;
  return { pubkeys: items.map((a) => a.pubkey), texts: items.map((a) => a.account.data[0]) };
}

/** The outcome of a body, with and without the reader: what was read or parsed, or the error. */
function outcome(body: Buffer, withReader: boolean) {
  try {
    const split = parseBoundedJsonSplit(
      body,
      PATH,
      undefined,
      undefined,
      withReader ? reader : undefined,
    );
    const value = JSON.stringify(split.value);
    try {
      return { value, accounts: accountsOf(split) };
    } catch (err) {
      return { value, error: (err as Error).name };
    }
  } catch (err) {
    return { error: (err as Error).name };
  }
}

describe('an account list as Agave writes it', () => {
  it.each([
    ['one account', element()],
    [
      'several, data of every length and padding',
      [
        element({ data: '' }),
        element({ data: 'AA==' }),
        element({ data: 'A'.repeat(MAX_TEXT) }),
        element({ data: 'AAA=' }),
      ].join(','),
    ],
    [
      'executable, zeros, short and long keys',
      [
        element({ exec: 'true', lamports: '0', rent: '0', space: '0' }),
        element({ pubkey: KEY_A, owner: KEY_B }),
        element({ pubkey: KEY_C, owner: KEY_C }),
      ].join(','),
    ],
    ['padding inside the data, as the parse keeps it', element({ data: 'AA=A==AA' })],
    ['whitespace between the elements', ` \n${element()} ,\t${element({ pubkey: KEY_A })}\r\n`],
    ['no accounts', ''],
    ['no accounts, whitespace', '  \n '],
  ])('%s: read from its bytes, as the parse gives it', (_name, list) => {
    const body = reply(list);
    const split = parseBoundedJsonSplit(body, PATH, undefined, undefined, reader);
    expect(split.read).toBeDefined();
    expect(split.elements).toBeUndefined();
    expect(outcome(body, true)).toEqual(outcome(body, false));
  });

  it('reads a result that is the list itself (no context)', () => {
    const body = reply(`${element()},${element({ pubkey: KEY_A })}`, (v) => v);
    const split = parseBoundedJsonSplit(body, PATH, undefined, undefined, reader);
    expect(split.read?.pubkeys).toEqual([KEY_B, KEY_A]);
    expect(outcome(body, true)).toEqual(outcome(body, false));
  });

  it("is what the warm-up's reply holds, and classifies as its parse does", () => {
    const { body, parentKey } = warmUpReply(70);
    expect(parseBoundedJsonSplit(body, PATH, undefined, undefined, reader).read).toBeDefined();
    // The same reply indented takes the parse: the classification must not tell them apart.
    const pretty = Buffer.from(JSON.stringify(JSON.parse(Buffer.from(body).toString()), null, 1));
    expect(parseBoundedJsonSplit(pretty, PATH, undefined, undefined, reader).read).toBeUndefined();
    const read = classifyProgramAccounts('getProgramAccounts', body, 1, parentKey);
    const parsed = classifyProgramAccounts('getProgramAccounts', pretty, 1, parentKey);
    expect(read).toEqual(parsed);
    expect(read.labels.length).toBeGreaterThan(60);
  });
});

describe('any other body is parsed, with the outcome it always had', () => {
  const swapped = element().replace(/^\{("account":\{.*\}),("pubkey":"[^"]*")\}$/, '{$2,$1}');
  it.each([
    ['keys in another order', swapped],
    ['whitespace inside an element', element().replace('"lamports":', '"lamports": ')],
    ['an escape in a key', element({ pubkey: `\\u0031${KEY_B.slice(1)}` })],
    ['an escape in the data', element({ data: 'AB\\/C' })],
    ['a character outside base64 in the data', element({ data: 'AB.C' })],
    ['a raw control character in the data', element({ data: 'AB\u0001C' })],
    ['a non-ASCII character in the data', element({ data: 'ABé' })],
    ['data longer than the slice', element({ data: 'A'.repeat(MAX_TEXT + 4) })],
    ['data one character longer than the slice', element({ data: 'A'.repeat(MAX_TEXT + 1) })],
    ['a key too short', element({ pubkey: KEY_B.slice(1) })],
    ['a key too long', element({ pubkey: `${KEY_A}11` })],
    ['a character outside base58 in a key', element({ pubkey: `0${KEY_B.slice(1)}` })],
    ['an owner outside base58', element({ owner: `l${KEY_A.slice(1)}` })],
    ['a number with a leading zero', element({ lamports: '0123' })],
    ['a negative number', element({ space: '-1' })],
    ['a fraction', element({ rent: '1.5' })],
    ['an exponent', element({ lamports: '1e3' })],
    ['executable not a boolean', element({ exec: 'null' })],
    ['another encoding', element().replace('"base64"]', '"base58"]')],
    ['a field more', element().replace(',"space":', ',"extra":1,"space":')],
    ['a key repeated', element().replace(/\}$/, `,"pubkey":"${KEY_A}"}`)],
    ['an element that is not an account', '7'],
    ['two commas', `${element()},,${element()}`],
    ['a trailing comma', `${element()},`],
    ['garbage after an element', `${element()}x`],
    ['a vertical tab between elements', `${element()}\u000b,${element()}`],
    ['a form feed between elements', `${element()},\f${element()}`],
    ['a no-break space between elements', `${element()}\u00a0,${element()}`],
  ])('%s', (_name, list) => {
    const body = reply(`${element({ pubkey: KEY_A })},${list}`);
    expect(parseBoundedJsonSplit(body, PATH, undefined, undefined, reader).read).toBeUndefined();
    expect(outcome(body, true)).toEqual(outcome(body, false));
  });

  it.each([
    ['no list at the path', reply('', () => '{"value":3}')],
    ['the path twice', reply(element(), (v) => `{"value":${v},"value":[]}`)],
    [
      'a second list at the path later',
      reply(element(), (v) => `{"context":{"value":${v}},"value":${v}}`),
    ],
    ['a truncated body', reply(element()).subarray(0, -3)],
    // Not JSON, and the scan finds no list there: no way may read these.
    ['an element left open before the next', reply(`${element().slice(0, -1)} ,${element()}`)],
    ['a brace for a comma', reply(`${element()}}${element()}`)],
    ['junk after the body', Buffer.concat([reply(element()), Buffer.from('}')])],
    [
      'nesting past the bound after the list',
      reply(element(), (v) => `{"value":${v},"x":${'['.repeat(9)}${']'.repeat(9)}}`),
    ],
    [
      'values past the bound after the list',
      reply(element(), (v) => `{"value":${v},"x":[${'0,'.repeat(5000)}0]}`),
    ],
  ])('%s', (_name, body) => {
    expect(outcome(body, true)).toEqual(outcome(body, false));
  });

  it('fails a list read in a body whose rest is not JSON at the one parse of that rest', () => {
    // The slow way would split at the same list and parse the same text: a body built to fail
    // there must not pay for two scans and two parses.
    const body = Buffer.concat([reply(element()), Buffer.from('}')]);
    const parse = vi.spyOn(JSON, 'parse');
    try {
      expect(() => parseBoundedJsonSplit(body, PATH, undefined, undefined, reader)).toThrow(
        SyntaxError,
      );
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
  });

  it('refuses past the bounds as the parse does', () => {
    const body = reply(element(), (v) => `{"value":${v},"x":${'['.repeat(9)}${']'.repeat(9)}}`);
    expect(() => parseBoundedJsonSplit(body, PATH, undefined, undefined, reader)).toThrow(
      JsonBoundsError,
    );
  });
});

describe("the reader's heap check", () => {
  it('asks the heap before each stretch of accounts, and its refusal stands', () => {
    const list = Array.from({ length: 2_000 }, () => element()).join(',');
    const asked: number[] = [];
    const read = reader(reply(list), reply(list).indexOf('['), (bytes) => asked.push(bytes));
    expect(read?.read.pubkeys).toHaveLength(2_000);
    // 2,000 accounts of some 200 bytes: more than one stretch.
    expect(asked.length).toBeGreaterThan(1);
    const refused = () =>
      reader(reply(list), reply(list).indexOf('['), () => {
        throw new JsonHeapError('no room');
      });
    expect(refused).toThrow(JsonHeapError);
  });
});
