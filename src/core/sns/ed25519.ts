import { pdaMemory, pdaWasm as curve } from './pda-wasm.js';

/**
 * `PublicKey.isOnCurve` of @solana/web3.js 1.99 without BigInt. web3.js decodes with @noble/curves
 * 1.9 per RFC 8032 §5.1.3 (`zip215` false); since `v = d·y² + 1` is never 0 that reduces to:
 *
 *   on curve  ⟺  y < p  and  (u = 0 ? sign bit clear : u·v is a square mod p),  u = y² - 1
 *
 * with `u = 0` exactly for `y = 1` or `y = p - 1`. All of it runs in WebAssembly (./pda.wat, where
 * ./pda.ts's program-address search calls it without leaving the module), whose 64-bit integers
 * hold a product of two 32-bit limbs exactly and a limb of the binary Jacobi symbol 64 bits at a
 * time (BENCHMARKS.md).
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
 * square mod p: the binary Jacobi symbol of ./pda.wat. Exported for tests.
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
  pdaMemory.set(bytes, 0);
  return curve.on_curve() === 1;
}
