/**
 * The scan before JSON.parse (worker/rpc/bounded-json.ts): it counts every value a parse would build,
 * numbers and literals included, so a body within the reply bound cannot cost unbounded heap.
 */
import { describe, expect, it } from 'vitest';
import {
  checkJsonBounds,
  JsonBoundsError,
  parseBoundedJson,
  RPC_JSON_BOUNDS,
} from '../worker/rpc/bounded-json.js';

const bytes = (text: string) => Buffer.from(text);
const repeat = (unit: string, n: number) => Array.from({ length: n }, () => unit).join(',');

describe('checkJsonBounds', () => {
  it.each([
    ['numbers', `[${repeat('0', 100_000)}]`],
    ['literals in short arrays', `[${repeat('[null]', 100_000)}]`],
    ['empty arrays', `[${repeat('[]', 100_000)}]`],
    ['one-key objects', `[${repeat('{"a":0}', 100_000)}]`],
    ['distinct keys', `{${Array.from({ length: 100_000 }, (_, i) => `"${i}":0`).join(',')}}`],
    ['short strings', `[${repeat('""', 100_000)}]`],
  ])('refuses %s packed denser than the bound', (_name, text) => {
    expect(() => checkJsonBounds(bytes(text), RPC_JSON_BOUNDS)).toThrow(JsonBoundsError);
  });

  it('refuses nesting past the bound, whatever the padding', () => {
    const deep = `${'['.repeat(9)}${' '.repeat(1000)}${']'.repeat(9)}`;
    expect(() => checkJsonBounds(bytes(deep), RPC_JSON_BOUNDS)).toThrow(/nested deeper than 8/);
  });

  it('does not count what is inside strings, escaped quotes included', () => {
    const text = JSON.stringify({ a: `[[[[[[[[[[{,:,:,"\\"${'[,'.repeat(10_000)}` });
    expect(parseBoundedJson(bytes(text))).toMatchObject({ a: expect.any(String) as unknown });
  });

  it('passes a getProgramAccounts reply of sliced accounts', () => {
    const account = {
      account: {
        data: ['A'.repeat(88), 'base64'],
        executable: false,
        lamports: 1_000_000,
        owner: 'namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX',
        rentEpoch: 18_446_744_073_709_552_000,
        space: 130,
      },
      pubkey: '11111111111111111111111111111111',
    };
    const reply = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      result: { context: { slot: 1, apiVersion: '2.0.0' }, value: Array(10_000).fill(account) },
    });
    expect(() => checkJsonBounds(bytes(reply), RPC_JSON_BOUNDS)).not.toThrow();
  });
});

describe('parseBoundedJson', () => {
  const loose = { maxDepth: 8, maxValuesPerByte: 1 };
  const parse = (text: string) => parseBoundedJson(Buffer.from(text), loose);
  const outcome = (f: () => unknown) => {
    try {
      return { value: f() };
    } catch (err) {
      return { error: (err as Error).name };
    }
  };

  it.each([
    [' { "a" : [1, 2.5e3, "x\\"]y", {"b": null}] , "c":true, "d" :{}, "e":[] } '],
    ['[[1,2],[3,[4,5]],"ü中🦀",{"k":"v","k":"last"}]'],
    ['{"__proto__":{"polluted":1},"2":"two","1":"one"}'],
    ['[{"a":1},{"b":[false,"s\\\\"]},-0.5,"\\u00e9"]'],
    [
      '{"jsonrpc":"2.0","id":1,"result":{"context":{"slot":42},"value":[{"pubkey":"k","account":{"data":["AAAA","base64"]}}]}}',
    ],
  ])('builds what JSON.parse builds from %s', (text) => {
    const got = parse(text);
    expect(got).toEqual(JSON.parse(text));
    expect(JSON.stringify(got)).toBe(JSON.stringify(JSON.parse(text)));
    expect(Object.getPrototypeOf(got)).toBe(Object.getPrototypeOf(JSON.parse(text)));
  });

  it.each([
    ['[1,,2]'],
    ['[1,2,]'],
    ['[1,2}'],
    ['{"a":}'],
    ['{1:2}'],
    ['[1 2]'],
    ['<html>not json</html>'],
    ['[1,2] x'],
  ])('fails %s as JSON.parse does', (text) => {
    expect(outcome(() => parse(text))).toEqual({ error: 'SyntaxError' });
  });

  it('counts at least every value the parse builds, keys included', () => {
    const count = (v: unknown): number =>
      1 +
      (Array.isArray(v)
        ? v.reduce((n: number, x) => n + count(x), 0)
        : typeof v === 'object' && v !== null
          ? Object.values(v).reduce((n: number, x) => n + 1 + count(x), 0)
          : 0);
    for (const text of ['[1,2,[3,{"a":[true,null,"x"]}]]', '{"a":{"b":{"c":[[],{}]}}}', '"s"']) {
      expect(checkJsonBounds(bytes(text), loose)).toBeGreaterThanOrEqual(count(JSON.parse(text)));
    }
  });

  it('parses a body past the small size in one go', () => {
    const big = `[${repeat('{"i":1}', 60_000)}]`;
    expect(parse(big)).toEqual(JSON.parse(big));
  });
});
