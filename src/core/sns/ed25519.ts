import { readFileSync } from 'node:fs';

/**
 * `PublicKey.isOnCurve` of @solana/web3.js 1.99 without BigInt. web3.js decodes with @noble/curves
 * 1.9 per RFC 8032 §5.1.3 (`zip215` false); since `v = d·y² + 1` is never 0 that reduces to:
 *
 *   on curve  ⟺  y < p  and  (u = 0 ? sign bit clear : u·v is a square mod p),  u = y² - 1
 *
 * with `u = 0` exactly for `y = 1` or `y = p - 1`. Those edge cases are decided here; `u·v` and
 * its square test run in WebAssembly (./ed25519.wat), whose 64-bit integers hold a product of two
 * 32-bit limbs exactly and a limb of the binary Jacobi symbol 64 bits at a time (BENCHMARKS.md).
 */

const P = 2n ** 255n - 19n;

function modPow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = base % P;
  for (let e = exp; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}

/** Node's global `WebAssembly`, the part used here: the project's libs (ES2023, Node) declare none. */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: object };
};

/** ./ed25519.wat assembled: compiled once, at load, from the file beside this module. */
const curve = new WebAssembly.Instance(
  new WebAssembly.Module(readFileSync(new URL('./ed25519.wasm', import.meta.url))),
).exports as {
  memory: { buffer: ArrayBuffer };
  /** Where d's eight 32-bit limbs go, one an i64. */
  D: { value: number };
  on_curve_square: () => number;
  is_square: (...words: [number, number, number, number, number, number, number, number]) => number;
};
/** The module's memory; it never grows, so the view stays valid. */
const memory = new Uint8Array(curve.memory.buffer);

{
  /** `d = -121665/121666 mod p`, computed rather than transcribed. */
  const d = ((P - 121665n) * modPow(121666n, P - 2n)) % P;
  const view = new DataView(curve.memory.buffer);
  for (let i = 0; i < 8; i++) {
    view.setBigUint64(curve.D.value + 8 * i, (d >> BigInt(32 * i)) & 0xffffffffn, true);
  }
}

/**
 * Whether `value` (eight 32-bit words, little-endian: below 2^256, not a multiple of p) is a
 * square mod p: the binary Jacobi symbol of ./ed25519.wat. Exported for tests.
 */
export function isSquareModP(value: ArrayLike<number>): boolean {
  return (
    curve.is_square(
      value[0] as number,
      value[1] as number,
      value[2] as number,
      value[3] as number,
      value[4] as number,
      value[5] as number,
      value[6] as number,
      value[7] as number,
    ) === 1
  );
}

/**
 * Whether 32 `bytes` encode an ed25519 point, bit-identical to web3.js 1.99's
 * `PublicKey.isOnCurve`; a program-derived address is valid exactly when false.
 */
export function isOnCurve(bytes: Uint8Array): boolean {
  if (bytes.length !== 32) throw new RangeError('expected 32 bytes');
  const top = (bytes[31] as number) & 0x7f;
  const sign = (bytes[31] as number) >> 7;
  // y >= p: the top 255 bits are all ones from bit 5 up, and the low byte is at least 0xed.
  let allOnes = top === 0x7f;
  for (let i = 1; allOnes && i < 31; i++) allOnes = bytes[i] === 0xff;
  if (allOnes && (bytes[0] as number) >= 0xed) return false;
  // y = p - 1 (…ffec) or y = 1: x = 0, valid only with the sign bit clear.
  if (allOnes && bytes[0] === 0xec) return sign === 0;
  if (bytes[0] === 1 && top === 0) {
    let rest = 0;
    for (let i = 1; i < 31; i++) rest |= bytes[i] as number;
    if (rest === 0) return sign === 0;
  }
  memory.set(bytes, 0);
  return curve.on_curve_square() === 1;
}
