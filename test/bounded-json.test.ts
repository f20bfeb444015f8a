/**
 * The scan before JSON.parse (worker/rpc/bounded-json.ts): it counts every value a parse would build,
 * numbers and literals included, so a body within the reply bound cannot cost unbounded heap.
 */
import { describe, expect, it } from 'vitest';
import {
  checkJsonBounds,
  JsonBoundsError,
  parseBoundedJson,
  parseBoundedJsonSplit,
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

describe('parseBoundedJsonSplit', () => {
  const path = ['result', 'value'];
  /** The split parse put back together: what one JSON.parse of the body builds. */
  const whole = (text: string) => {
    const { value, elements } = parseBoundedJsonSplit(bytes(text), path);
    if (!elements) return { split: false, value };
    const items = Array.from({ length: elements.count }, (_, i) => elements.at(i));
    const result = (value as { result: unknown }).result;
    const list = Array.isArray(result) ? result : (result as { value: unknown[] }).value;
    expect(list).toEqual([]);
    list.push(...items);
    return { split: true, value };
  };

  it.each([
    [
      '{"jsonrpc":"2.0","result":{"context":{"slot":7},"value":[{"a":[1,{"b":"]"}]}, 2 ,"x\\"]"]},"id":1}',
    ],
    ['{"id":1,"result":[ {"pubkey":"k"} , [] ,{}]}'],
    ['{"result":{"value":[]},"id":1}'],
    ['{"result":{"value":[ \n ]},"id":1}'],
    ['{"result":{"value":["ü中🦀",{"k":"\\u00e9"}]},"id":1}'],
    ['{"result":{"context":{"value":[1]},"value":[[1,2],[3]]},"id":1}'],
  ])('builds what JSON.parse builds from %s, the array apart', (text) => {
    expect(whole(text)).toEqual({ split: true, value: JSON.parse(text) as unknown });
  });

  it.each([
    ['no array there', '{"result":{"value":null},"id":1}'],
    ['a key repeated', '{"result":{"value":[1],"value":[2]},"id":1}'],
    ['an escaped key', '{"result":{"v\\u0061lue":[1]},"id":1}'],
    ['an array at the top', '[{"result":{"value":[1]}}]'],
  ])('parses the body whole when the path finds %s', (_name, text) => {
    expect(whole(text)).toEqual({ split: false, value: JSON.parse(text) as unknown });
  });

  it.each([['[1,,2]'], ['[1,2,]'], ['[1 2]'], ['[1,{]']])(
    'fails the element of %s that is not JSON, as JSON.parse does',
    (list) => {
      const text = `{"result":{"value":${list}},"id":1}`;
      expect(() => JSON.parse(text) as unknown).toThrow(SyntaxError);
      expect(() => whole(text)).toThrow(SyntaxError);
    },
  );

  it('parses a range of elements as one parse, each as at() parses it', () => {
    const text = `{"result":{"value":[ {"a":[1,"],"]} ,2,"x\\"", [] ,{"b":null}]},"id":1}`;
    const { elements } = parseBoundedJsonSplit(bytes(text), path);
    if (!elements) throw new Error('not split');
    const each = Array.from({ length: elements.count }, (_, i) => elements.at(i));
    expect(elements.range(0, elements.count)).toEqual(each);
    expect(elements.range(1, 4)).toEqual(each.slice(1, 4));
    expect(elements.range(2, 2)).toEqual([]);
  });

  it.each([['[1,,2]'], ['[1,2,]'], ['[1 2]']])(
    'fails a range holding an element of %s that is not JSON',
    (list) => {
      const { elements } = parseBoundedJsonSplit(
        bytes(`{"result":{"value":${list}},"id":1}`),
        path,
      );
      expect(() => elements?.range(0, elements.count)).toThrow(SyntaxError);
    },
  );

  it('keeps the bounds over the whole body', () => {
    const text = `{"result":{"value":[${repeat('[]', 100_000)}]},"id":1}`;
    expect(() => parseBoundedJsonSplit(bytes(text), path)).toThrow(JsonBoundsError);
  });
});
