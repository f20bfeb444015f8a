import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  getDomainKeySync,
  getHashedNameSync,
  getNameAccountKeySync,
  getRecordV2Key,
  getReverseKeyFromDomainKey,
  NAME_PROGRAM_ID as SDK_NAME_PROGRAM_ID,
  Record,
  REVERSE_LOOKUP_CLASS as SDK_REVERSE_LOOKUP_CLASS,
  ROOT_DOMAIN_ACCOUNT as SDK_ROOT_DOMAIN_ACCOUNT,
} from '@bonfida/spl-name-service';
import { PublicKey } from '@solana/web3.js';
import bs58 from 'bs58';
import { describe, expect, it } from 'vitest';
import { isOnCurve, isSquareModP } from '../src/core/sns/ed25519.js';
import {
  CENTRAL_STATE_SNS_RECORDS,
  domainKey,
  existingNameAccountKey,
  fromBase58,
  fromBase58Into,
  hashName,
  KeySet,
  NAME_PROGRAM_ID,
  nameAccountKey,
  recordKeyV2,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  ROOT_DOMAIN_ACCOUNT,
  SNS_RECORDS_ID,
  toBase58,
} from '../src/core/sns/pda.js';

/**
 * The fast derivations of src/core/sns/pda.ts against the SDK and web3.js they replace, on published
 * vectors and generated corpora. Everything generated is deterministic (sha256 of a counter, a
 * seeded LCG), so a failure names an input that reproduces.
 */

const P = 2n ** 255n - 19n;

/** 32 pseudo-random bytes: sha256 of a label and a counter. */
const bytesOf = (label: string, i: number): Buffer =>
  createHash('sha256').update(`${label}:${i}`).digest();

/** A 32-byte little-endian encoding of `y` with the sign bit set or not. */
function encodeY(y: bigint, sign: boolean): Uint8Array {
  const out = new Uint8Array(32);
  let v = y;
  for (let i = 0; i < 32; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  if (sign) out[31] = (out[31] as number) | 0x80;
  return out;
}

/**
 * The eight points of small order (the torsion subgroup), as computed once with @noble/curves as
 * `n·P` for points P (n the group order) and checked to satisfy `8·T = 0`.
 */
const SMALL_ORDER = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0000000000000000000000000000000000000000000000000000000000000080',
  '0100000000000000000000000000000000000000000000000000000000000000',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
].map((hex) => Uint8Array.from(Buffer.from(hex, 'hex')));

const webIsOnCurve = (bytes: Uint8Array): boolean => PublicKey.isOnCurve(bytes);

describe('isOnCurve equals web3.js PublicKey.isOnCurve', () => {
  it('on 25,000 pseudo-random 32-byte strings (about half of them points)', () => {
    let onCurve = 0;
    for (let i = 0; i < 25_000; i++) {
      const bytes = bytesOf('curve', i);
      const expected = webIsOnCurve(bytes);
      if (isOnCurve(bytes) !== expected) {
        expect.fail(`bytes ${bytes.toString('hex')}: web3.js says ${expected}`);
      }
      if (expected) onCurve++;
    }
    expect(onCurve).toBeGreaterThan(11_000);
    expect(onCurve).toBeLessThan(14_000);
  });

  it('on edge encodings: y >= p, y = ±1 (x = 0) with either sign, zero, all ones, small order', () => {
    const cases: Uint8Array[] = [new Uint8Array(32), new Uint8Array(32).fill(0xff)];
    for (const sign of [false, true]) {
      // Every non-canonical y (p .. 2^255 - 1), the values around them, and small y.
      for (let y = P - 40n; y < 2n ** 255n; y++) cases.push(encodeY(y, sign));
      for (let y = 0n; y < 64n; y++) cases.push(encodeY(y, sign));
      cases.push(encodeY(2n ** 254n, sign), encodeY(2n ** 254n - 1n, sign));
    }
    for (const t of SMALL_ORDER) {
      cases.push(
        t,
        Uint8Array.from(t, (b, i) => (i === 31 ? b ^ 0x80 : b)),
      );
    }
    let onCurve = 0;
    for (const bytes of cases) {
      const expected = webIsOnCurve(bytes);
      expect(isOnCurve(bytes), Buffer.from(bytes).toString('hex')).toBe(expected);
      if (expected) onCurve++;
    }
    // Every small-order point is accepted (web3.js does not check the order).
    for (const t of SMALL_ORDER) expect(isOnCurve(t)).toBe(true);
    // The decoding is RFC 8032's, not ZIP-215's: y = 1 and y = p - 1 with the sign bit set (x = 0)
    // and every y >= p are refused, as web3.js 1.99 refuses them.
    expect(isOnCurve(encodeY(1n, true))).toBe(false);
    expect(isOnCurve(encodeY(P - 1n, true))).toBe(false);
    expect(isOnCurve(encodeY(1n, false))).toBe(true);
    expect(isOnCurve(encodeY(P, false))).toBe(false);
    expect(isOnCurve(encodeY(P + 1n, false))).toBe(false);
    expect(onCurve).toBeGreaterThan(0);
  });

  it('on random y in the top and bottom 2^32 of the field, where limbs are all ones or zeros', () => {
    for (let i = 0; i < 2_000; i++) {
      const r = BigInt(`0x${bytesOf('edge-y', i).subarray(0, 4).toString('hex')}`);
      for (const y of [P - 1n - r, r, 2n ** 128n + r, P - 2n ** 128n - r]) {
        const bytes = encodeY(y, i % 2 === 0);
        expect(isOnCurve(bytes), y.toString()).toBe(webIsOnCurve(bytes));
      }
    }
  });

  it('refuses anything but 32 bytes', () => {
    expect(() => isOnCurve(new Uint8Array(31))).toThrow(RangeError);
  });
});

describe('isSquareModP (binary Jacobi symbol, WebAssembly) equals Euler’s criterion', () => {
  const words32 = (value: bigint): number[] =>
    Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(32 * i)) & 0xffffffffn));
  const euler = (a: bigint): boolean => {
    let result = 1n;
    let base = a % P;
    for (let e = (P - 1n) / 2n; e > 0n; e >>= 1n) {
      if (e & 1n) result = (result * base) % P;
      base = (base * base) % P;
    }
    return result === 1n;
  };

  it('on random values below 2^256, and on values sharing low limbs with p (the rare branch)', () => {
    // Powers of two and multiples of 2^64: the first step drops whole limbs before it shifts.
    const values: bigint[] = [1n, 2n, 3n, P - 1n, P + 1n, 2n ** 256n - 1n, 2n ** 255n, 2n ** 64n];
    values.push(3n * 2n ** 128n, 2n ** 192n + 2n ** 200n, 2n ** 63n, 5n * 2n ** 65n);
    for (let i = 0; i < 300; i++) {
      const r = BigInt(`0x${bytesOf('jacobi', i).toString('hex')}`);
      values.push(r % P || 1n, r);
      // Low 64, 128 or 192 bits equal to p's: a - b has whole zero 64-bit limbs.
      const k = BigInt(64 * (1 + (i % 3)));
      const high = (r >> k) << k;
      const v = high | (P & ((1n << k) - 1n));
      if (v % P !== 0n) values.push(v);
      const below = v % P;
      if (below !== 0n) values.push(below);
    }
    for (const v of values) expect(isSquareModP(words32(v)), v.toString()).toBe(euler(v));
  });

  it('runs src/core/sns/pda.wasm as assembled from its .wat (npm run build:wasm)', () => {
    const check = spawnSync(process.execPath, ['scripts/build-wasm.mjs', '--check'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
    });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });
});

describe('base58', () => {
  it('writes keys as web3.js does, leading zero bytes included, and reads them back', () => {
    for (let i = 0; i < 5_000; i++) {
      const bytes = bytesOf('b58', i);
      bytes.fill(0, 0, i % 5 === 0 ? i % 33 : 0);
      const text = new PublicKey(bytes).toBase58();
      expect(toBase58(bytes)).toBe(text);
      expect(fromBase58(text).equals(bytes)).toBe(true);
    }
    expect(toBase58(new Uint8Array(0))).toBe('');
    expect(() => fromBase58('0OIl')).toThrow(TypeError);
    expect(() => fromBase58('1ü')).toThrow(TypeError);
    // Any length, as web3.js reads it (bs58 under it).
    for (let n = 0; n <= 80; n++) {
      const random = [bytesOf('len', n), bytesOf('len+', n), bytesOf('len++', n)];
      const bytes = Buffer.concat([Buffer.alloc(n % 3), ...random]).subarray(0, n);
      const text = bs58.encode(bytes);
      expect(toBase58(bytes)).toBe(text);
      expect(fromBase58(text).equals(Buffer.from(bs58.decode(text)))).toBe(true);
    }
  });

  it('fromBase58Into reads into a buffer exactly what fromBase58 reads of its length, no other', () => {
    const out = Buffer.alloc(32);
    const texts = ['', '1', '1'.repeat(32), '1'.repeat(33), 'z'.repeat(44), '2'.repeat(43)];
    for (let i = 0; i < 3_000; i++) {
      const n = 28 + (i % 9);
      const bytes = Buffer.concat([Buffer.alloc(i % 4), bytesOf('into', i)]).subarray(0, n);
      if (i % 7 === 0) bytes.fill(0, 0, i % (bytes.length + 1));
      texts.push(bs58.encode(bytes), `1${bs58.encode(bytes)}`);
    }
    for (const text of texts) {
      const whole = fromBase58(text);
      const read = fromBase58Into(text, out);
      expect(read, text).toBe(whole.length === 32);
      if (read) expect(out.equals(whole), text).toBe(true);
    }
    expect(fromBase58Into('0OIl', out)).toBe(false);
    expect(() => fromBase58Into('1', new Uint8Array(3))).toThrow(RangeError);
  });
});

describe('constants', () => {
  it('equal the SDK’s', () => {
    expect(toBase58(NAME_PROGRAM_ID)).toBe(SDK_NAME_PROGRAM_ID.toBase58());
    expect(toBase58(ROOT_DOMAIN_ACCOUNT)).toBe(SDK_ROOT_DOMAIN_ACCOUNT.toBase58());
    expect(toBase58(REVERSE_LOOKUP_CLASS)).toBe(SDK_REVERSE_LOOKUP_CLASS.toBase58());
    const [central] = PublicKey.findProgramAddressSync(
      [SNS_RECORDS_ID],
      new PublicKey(SNS_RECORDS_ID),
    );
    expect(toBase58(CENTRAL_STATE_SNS_RECORDS)).toBe(central.toBase58());
  });
});

describe('derivations equal the SDK', () => {
  it.each([
    ['domain1', Record.SOL, 'GBrd6Q53eu1T2PiaQAtm92r3DwxmoGvZ2D6xjtVtN1Qt'],
    ['sub.domain2', Record.SOL, 'A3EFmyCmK5rp73TdgLH8aW49PJ8SJw915arhydRZ6Sws'],
    ['domain3', Record.Url, 'DMZmnjcAnUwSje4o2LGJhipCfNZ5b37GEbbkwbQBWEW1'],
  ])('recordKeyV2 gives the published vector %s/%s', (name, record, key) => {
    expect(toBase58(recordKeyV2(name, record))).toBe(key);
  });

  it('domainKey gives the published vector for bonfida', () => {
    expect(toBase58(domainKey('bonfida'))).toBe('Crf8hzfthWGbGbLTVCiqRqV5MVnbpHB1L9KQMd6gsinb');
  });

  const ALPHABET = [
    ...'abcdefghijklmnopqrstuvwxyz0123456789-_',
    'é',
    'ß',
    'ü',
    'İ',
    '中',
    '文',
    '🦀',
    '\u0000',
    '\u200d',
    '\ud800', // a lone surrogate: U+FFFD in UTF-8, for the SDK and for Node alike
  ];
  /** Deterministic names: one or two labels, 1 to 24 characters each, some very long. */
  function* names(count: number, seed: number): Generator<string> {
    let state = seed;
    const next = (n: number) => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state % n;
    };
    const label = () => {
      const len = next(50) === 0 ? 200 + next(400) : 1 + next(24);
      return Array.from({ length: len }, () => ALPHABET[next(ALPHABET.length)]).join('');
    };
    for (let i = 0; i < count; i++) yield next(2) === 0 ? label() : `${label()}.${label()}`;
  }
  const RECORDS = Object.values(Record);

  it('recordKeyV2 and domainKey on 2,500 generated names, every Record value', () => {
    let i = 0;
    for (const name of names(2_500, 7)) {
      const record = RECORDS[i++ % RECORDS.length] as Record;
      // What RecordKeyDeriver asked the SDK for: the name with the registry suffix.
      const sdkRecord = getRecordV2Key(`${name}.sol`, record).toBase58();
      expect(toBase58(recordKeyV2(name, record)), JSON.stringify([name, record])).toBe(sdkRecord);
      if (i % 4 === 0) {
        const sdkDomain = getDomainKeySync(`${name}.sol`).pubkey.toBase58();
        expect(toBase58(domainKey(name)), JSON.stringify(name)).toBe(sdkDomain);
      }
    }
  });

  it('recordKeyV2 of many subdomains under few parents, records repeated (the memos hit)', () => {
    const parents = ['bonfida', 'sns', '中文', 'a', 'p'.repeat(65)];
    for (let i = 0; i < 300; i++) {
      const name = `s${i}.${parents[i % parents.length] as string}`;
      const record = RECORDS[i % 3] as Record;
      expect(toBase58(recordKeyV2(name, record)), name).toBe(
        getRecordV2Key(`${name}.sol`, record).toBase58(),
      );
    }
  });

  it('domainKey on names the route never sends: empty labels, a trailing ".sol"', () => {
    for (const name of ['', '.', 'a.', '.a', 'x.sol', 'sol']) {
      expect(toBase58(domainKey(name)), JSON.stringify(name)).toBe(
        getDomainKeySync(`${name}.sol`).pubkey.toBase58(),
      );
    }
    expect(() => domainKey('a.b.c')).toThrow(RangeError);
  });

  it('reverseKeyFromDomainKey on 1,500 generated keys, with and without a parent', () => {
    for (let i = 0; i < 1_500; i++) {
      const child = new PublicKey(bytesOf('child', i));
      const parent = i % 5 === 0 ? undefined : new PublicKey(bytesOf('parent', i % 40));
      const expected = getReverseKeyFromDomainKey(child, parent).toBase58();
      const fromText = reverseKeyFromDomainKey(child.toBase58(), parent?.toBuffer());
      const fromBytes = reverseKeyFromDomainKey(child.toBytes(), parent?.toBuffer());
      expect(toBase58(fromText), child.toBase58()).toBe(expected);
      expect(toBase58(fromBytes)).toBe(expected);
    }
  });

  it('existingNameAccountKey finds the SDK key among accounts, and nothing without it', () => {
    const wrong: string[] = [];
    /** Keys whose bump is past the candidates looked up before the search. */
    let deep = 0;
    for (let i = 0; i < 1_000; i++) {
      const child = new PublicKey(bytesOf('child', i));
      const parent = new PublicKey(bytesOf('parent', i % 40));
      const expected = getReverseKeyFromDomainKey(child, parent).toBase58();
      const [, bump] = PublicKey.findProgramAddressSync(
        [
          getHashedNameSync(child.toBase58()),
          SDK_REVERSE_LOOKUP_CLASS.toBuffer(),
          parent.toBuffer(),
        ],
        SDK_NAME_PROGRAM_ID,
      );
      if (bump < 248) deep++;
      const args = [child.toBase58(), REVERSE_LOOKUP_CLASS, parent.toBuffer()] as const;
      // The derived key among other accounts: found; among none: nothing.
      const others = new KeySet<string>(2);
      for (const k of [expected, toBase58(bytesOf('other', i))]) others.add(fromBase58(k), k);
      if (existingNameAccountKey(...args, others) !== expected) wrong.push(expected);
      expect(existingNameAccountKey(...args, new KeySet(0))).toBe(undefined);
    }
    expect(wrong).toEqual([]);
    expect(deep).toBeGreaterThan(0);
    expect(() =>
      existingNameAccountKey('name', REVERSE_LOOKUP_CLASS, new Uint8Array(31), new KeySet(0)),
    ).toThrow(RangeError);
  });

  it('KeySet finds each key added by its words, and no other, first words shared or not', () => {
    const keys = Array.from({ length: 3_000 }, (_, i) => bytesOf('set', i));
    // Keys sharing their first word (and so their slot) with another.
    for (let i = 0; i < 50; i++) {
      const twin = Buffer.from(bytesOf('twin', i));
      (keys[i] as Buffer).copy(twin, 0, 0, 4);
      keys.push(twin);
    }
    const set = new KeySet<number>(keys.length);
    keys.forEach((key, i) => set.add(key, i));
    set.add(keys[0] as Buffer, -1);
    expect(set.size).toBe(keys.length);
    const words = (key: Uint8Array) => new Uint32Array(Uint8Array.from(key).buffer);
    keys.forEach((key, i) => expect(set.find(words(key), 0)).toBe(i));
    for (let i = 0; i < 3_000; i++)
      expect(set.find(words(bytesOf('absent', i)), 0)).toBe(undefined);
    const padded = new Uint32Array(16);
    padded.set(words(keys[7] as Buffer), 5);
    expect(set.find(padded, 5)).toBe(7);
    expect(() => set.add(bytesOf('over', 0), 0)).toThrow(RangeError);
    expect(() => new KeySet(1).add(new Uint8Array(31), 0)).toThrow(RangeError);
  });

  it('hashName and nameAccountKey on generated seeds, class and parent optional', () => {
    for (let i = 0; i < 800; i++) {
      const name = `name-${i}-${'ü'.repeat(i % 7)}`;
      expect(hashName(name).equals(getHashedNameSync(name))).toBe(true);
      const hashed = bytesOf('hashed', i);
      const nameClass = i % 3 === 0 ? undefined : new PublicKey(bytesOf('class', i));
      const parent = i % 4 === 0 ? undefined : new PublicKey(bytesOf('parent', i));
      expect(toBase58(nameAccountKey(hashed, nameClass?.toBuffer(), parent?.toBuffer()))).toBe(
        getNameAccountKeySync(hashed, nameClass, parent).toBase58(),
      );
    }
    expect(() => nameAccountKey(new Uint8Array(31))).toThrow(RangeError);
  });

  it('hashName on names of every block count, and past what the module hashes (node:crypto)', () => {
    // Message lengths around the 55- and 119-byte padding edges, then a name too long for the
    // module's memory, hashed by node:crypto instead.
    for (const length of [0, 1, 38, 39, 40, 47, 48, 102, 103, 104, 500, 4096, 30_000]) {
      for (const name of ['x'.repeat(length), `${'x'.repeat(length)}ü`, `ü${'x'.repeat(length)}`]) {
        expect(hashName(name).equals(getHashedNameSync(name)), String(name.length)).toBe(true);
      }
    }
  });
});
