import { readFileSync } from 'node:fs';

/**
 * `PublicKey.isOnCurve` of @solana/web3.js 1.99 without BigInt. web3.js decodes with @noble/curves
 * 1.9 per RFC 8032 §5.1.3 (`zip215` false); since `v = d·y² + 1` is never 0 that reduces to:
 *
 *   on curve  ⟺  y < p  and  (u = 0 ? sign bit clear : u·v is a square mod p),  u = y² - 1
 *
 * with `u = 0` exactly for `y = 1` or `y = p - 1`. The square test is a binary Jacobi symbol in
 * WebAssembly on 64-bit limbs (./legendre.wat), far cheaper than a square root and than the same
 * algorithm on the 30-bit limbs JavaScript's bit operations allow (BENCHMARKS.md); products use
 * 16-bit limbs in doubles (exact under 2^53).
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

function limbs16(value: bigint): Float64Array {
  const out = new Float64Array(16);
  for (let i = 0; i < 16; i++) out[i] = Number((value >> BigInt(16 * i)) & 0xffffn);
  return out;
}

/** `d = -121665/121666 mod p`, computed rather than transcribed. */
const D = limbs16(((P - 121665n) * modPow(121666n, P - 2n)) % P);
const TWO16 = 65536;
const TWO32 = 2 ** 32;

/** Node's global `WebAssembly`, the part used here: the project's libs (ES2023, Node) declare none. */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: object };
};

/** ./legendre.wat assembled: compiled once, at load, from the file beside this module. */
const legendre = new WebAssembly.Instance(
  new WebAssembly.Module(readFileSync(new URL('./legendre.wasm', import.meta.url))),
).exports as {
  is_square: (...words: [number, number, number, number, number, number, number, number]) => number;
};

// Scratch space: the check runs synchronously, so one set per process is enough.
const y = new Float64Array(16);
const s = new Float64Array(16);
const u = new Float64Array(16);
const v = new Float64Array(16);
const w = new Float64Array(16);
const prod = new Float64Array(31);
const words = new Float64Array(8);

/** Spreads carries so every limb is in [0, 2^16); the top carry wraps as ×38 (2^256 ≡ 38). */
function carry(o: Float64Array): void {
  for (let pass = 0; pass < 2; pass++) {
    let c = 0;
    for (let i = 0; i < 16; i++) {
      const t = (o[i] as number) + c;
      c = Math.floor(t / TWO16);
      o[i] = t - c * TWO16;
    }
    o[0] = (o[0] as number) + 38 * c;
  }
}

/** `o = a·b` mod p, up to a multiple of p; inputs with non-negative limbs below 2^17. */
function mul(o: Float64Array, a: Float64Array, b: Float64Array): void {
  prod.fill(0);
  for (let i = 0; i < 16; i++) {
    const ai = a[i] as number;
    for (let j = 0; j < 16; j++) prod[i + j] = (prod[i + j] as number) + ai * (b[j] as number);
  }
  for (let i = 0; i < 15; i++) o[i] = (prod[i] as number) + 38 * (prod[i + 16] as number);
  o[15] = prod[15] as number;
  carry(o);
}

/**
 * Whether `value` (eight 32-bit words, little-endian: below 2^256, not a multiple of p) is a
 * square mod p: the binary Jacobi symbol of ./legendre.wat. Exported for tests.
 */
export function isSquareModP(value: ArrayLike<number>): boolean {
  return (
    legendre.is_square(
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
  for (let i = 0; i < 16; i++)
    y[i] = (bytes[2 * i] as number) | ((bytes[2 * i + 1] as number) << 8);
  y[15] = (y[15] as number) & 0x7fff;
  mul(s, y, y); // s = y²
  // u = y² - 1 + 2p (2p = 2^256 - 38 in limbs: 0xffda, then 0xffff): keeps every limb positive.
  u[0] = (s[0] as number) + 0xffda - 1;
  for (let i = 1; i < 16; i++) u[i] = (s[i] as number) + 0xffff;
  mul(v, D, s);
  v[0] = (v[0] as number) + 1; // v = d·y² + 1
  mul(w, u, v);
  // Into 32-bit words. Below 2^256 + 38 (carry's top wrap), so at most one 2^256, folded as 38.
  let c = 0;
  for (let i = 0; i < 8; i++) {
    const x = (w[2 * i] as number) + (w[2 * i + 1] as number) * TWO16 + c;
    c = x >= TWO32 ? 1 : 0;
    words[i] = x - c * TWO32;
  }
  words[0] = (words[0] as number) + 38 * c;
  return isSquareModP(words);
}
