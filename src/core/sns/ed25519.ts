/**
 * `PublicKey.isOnCurve` of @solana/web3.js 1.99 without BigInt. web3.js decodes with @noble/curves
 * 1.9 per RFC 8032 §5.1.3 (`zip215` false); since `v = d·y² + 1` is never 0 that reduces to:
 *
 *   on curve  ⟺  y < p  and  (u = 0 ? sign bit clear : u·v is a square mod p),  u = y² - 1
 *
 * with `u = 0` exactly for `y = 1` or `y = p - 1`. The square test is a binary Jacobi symbol on
 * 30-bit limbs, far cheaper than a square root; products use 16-bit limbs in doubles (exact
 * under 2^53).
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
/** `p` in 30-bit limbs. */
const P30 = (() => {
  const out = new Int32Array(9);
  for (let i = 0; i < 9; i++) out[i] = Number((P >> BigInt(30 * i)) & 0x3fffffffn);
  return out;
})();

const MASK30 = 0x3fffffff;
const TWO16 = 65536;

// Scratch space: the check runs synchronously, so one set per process is enough.
const y = new Float64Array(16);
const s = new Float64Array(16);
const u = new Float64Array(16);
const v = new Float64Array(16);
const w = new Float64Array(16);
const prod = new Float64Array(31);
const w30 = new Int32Array(9);
const ja = new Int32Array(9);
const jb = new Int32Array(9);

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

/** Loads a non-negative 16-bit-limb value (below 2^257) into 30-bit limbs. */
function toLimbs30(out: Int32Array, a: Float64Array): void {
  let acc = 0;
  let scale = 1;
  let k = 0;
  for (let i = 0; i < 16; i++) {
    acc += (a[i] as number) * scale;
    scale *= TWO16;
    while (scale >= 2 ** 30) {
      const low = acc % 2 ** 30;
      out[k++] = low;
      acc = (acc - low) / 2 ** 30;
      scale /= 2 ** 30;
    }
  }
  out[k] = acc;
}

/**
 * Whether `value` (nine 30-bit limbs, LE, not a multiple of p) is a square mod p, by the binary
 * Jacobi algorithm. Invariant: `b` odd, answer `(a/b)·(-1)^flip`. Exported for tests.
 */
export function isSquareModP(value: Int32Array): boolean {
  let a = ja;
  let b = jb;
  a.set(value);
  b.set(P30);
  let flip = 0;
  let n = 9;
  // Make a odd. Whole zero limbs are dropped freely: (2/b)^30 = 1.
  while (a[0] === 0) {
    let k = 1;
    while (k < n && a[k] === 0) k++;
    if (k === n) return false; // a = 0: not reached for the values isOnCurve passes
    for (let i = 0; i < n; i++) a[i] = i + k < n ? (a[i + k] as number) : 0;
  }
  let low = a[0] as number;
  let tz = 31 - Math.clz32(low & -low);
  if (tz > 0) {
    const up = 30 - tz;
    for (let i = 0; i < n - 1; i++) {
      a[i] = ((a[i] as number) >> tz) | (((a[i + 1] as number) << up) & MASK30);
    }
    a[n - 1] = (a[n - 1] as number) >> tz;
    if (tz & 1) flip ^= 1; // b = p ≡ 5 (mod 8): (2/p) = -1
  }
  for (;;) {
    // Both odd. Keep a >= b.
    let i = n - 1;
    while (i > 0 && a[i] === b[i]) i--;
    if ((a[i] as number) < (b[i] as number)) {
      const t = a;
      a = b;
      b = t;
      if (((a[0] as number) & 3) === 3 && ((b[0] as number) & 3) === 3) flip ^= 1;
    } else if (i === 0 && a[0] === b[0]) {
      // a = b: the gcd, 1 since p is prime and a is not a multiple of it.
      return flip === 0;
    }
    low = ((a[0] as number) - (b[0] as number)) & MASK30;
    if (low === 0) {
      // Rare (about 2^-30 a step): subtract, drop the zero limbs of the (positive, even)
      // difference, then shift. 30·k + tz factors of two: only tz's parity counts.
      let borrow = 0;
      for (let j = 0; j < n; j++) {
        const d = (a[j] as number) - (b[j] as number) + borrow;
        a[j] = d & MASK30;
        borrow = d >> 30;
      }
      while (a[0] === 0) {
        let k = 1;
        while (a[k] === 0) k++;
        for (let j = 0; j < n; j++) a[j] = j + k < n ? (a[j + k] as number) : 0;
      }
      low = a[0] as number;
      tz = 31 - Math.clz32(low & -low);
      if (tz > 0) {
        const up = 30 - tz;
        for (let j = 0; j < n - 1; j++) {
          a[j] = ((a[j] as number) >> tz) | (((a[j + 1] as number) << up) & MASK30);
        }
        a[n - 1] = (a[n - 1] as number) >> tz;
      }
    } else {
      tz = 31 - Math.clz32(low & -low);
      const up = 30 - tz;
      // a = (a - b) >> tz, limb by limb: d is the difference limb, prev the one below it.
      let d = (a[0] as number) - (b[0] as number);
      let borrow = d >> 30;
      let prev = d & MASK30;
      for (let j = 1; j < n; j++) {
        d = (a[j] as number) - (b[j] as number) + borrow;
        borrow = d >> 30;
        d &= MASK30;
        a[j - 1] = (prev >> tz) | ((d << up) & MASK30);
        prev = d;
      }
      a[n - 1] = prev >> tz;
    }
    const b8 = (b[0] as number) & 7;
    if (tz & 1 && (b8 === 3 || b8 === 5)) flip ^= 1;
    while (n > 1 && a[n - 1] === 0 && b[n - 1] === 0) n--;
  }
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
  toLimbs30(w30, w);
  return isSquareModP(w30);
}
