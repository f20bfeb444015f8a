;; The arithmetic of ./ed25519.ts's curve check, in WebAssembly for its 64-bit integers. The
;; source of ./ed25519.wasm: `wat2wasm` of the `wabt` package (`npm run build:wasm`);
;; test/pda.test.ts checks that the two agree, and the answers against web3.js and Euler's
;; criterion.
;;
;; (on_curve_square): whether u·v is a square mod p = 2^255 - 19, for u = y² - 1 and v = d·y² + 1,
;; y the 32 bytes at address 0 with the top bit cleared (the caller writes them, and d's limbs at
;; $D once). Returns 1 or 0.
;;
;; Field elements are eight 32-bit limbs, little-endian, each in an i64 of memory: a product is
;; then exact in 64 bits. Values are kept below 2^256 (not fully reduced mod p).
;;
;; (is_square w0 .. w7): whether w = sum of wi * 2^(32 i) is a square mod p, w below 2^256 and not
;; a multiple of p: the binary Jacobi symbol on four 64-bit limbs held in locals, each step picking
;; its branch with `select`, not `if`. Loop invariant: a and b odd, the answer is
;; (a/b) * (-1)^flip. A step replaces (a, b) by (a - b, b) if a >= b, else by (b - a, a)
;; (quadratic reciprocity: the sign flips if both are 3 mod 4), then shifts the factors of two
;; out of the new a ((2/b) = -1 for b = 3 or 5 mod 8). a = b ends it: then both are the gcd, 1
;; since p is prime.
(module
  (memory (export "memory") 1)
  ;; Addresses: the input y at 0 (32 bytes), then field elements of 64 bytes each.
  (global $Y i32 (i32.const 64))
  (global $S i32 (i32.const 128))
  (global $U i32 (i32.const 192))
  (global $V i32 (i32.const 256))
  (global $W i32 (i32.const 320))
  (global $D (export "D") i32 (i32.const 384))
  (global $COL i32 (i32.const 448))

  ;; Carries limb k's bits above 32 into limb k + 1, eight limbs from $o; returns the carry out
  ;; of the top limb.
  (func $carry (param $o i32) (result i64)
    (local $k i32) (local $c i64) (local $x i64)
    (loop $limbs
      (local.set $x (i64.add (i64.load (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 3))))
                             (local.get $c)))
      (i64.store (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 3)))
                 (i64.and (local.get $x) (i64.const 0xffffffff)))
      (local.set $c (i64.shr_u (local.get $x) (i64.const 32)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $limbs (i32.lt_u (local.get $k) (i32.const 8))))
    (local.get $c))

  ;; Normalizes limbs below 2^64 each (values below 2^43 here) into 32-bit limbs of a value below
  ;; 2^256: a carry out of the top is 2^256 = 38 (mod p), added back at the bottom until none.
  (func $reduce (param $o i32)
    (local $c i64)
    (loop $again
      (local.set $c (call $carry (local.get $o)))
      (if (i64.ne (local.get $c) (i64.const 0))
        (then
          (i64.store (local.get $o)
                     (i64.add (i64.load (local.get $o)) (i64.mul (local.get $c) (i64.const 38))))
          (br $again)))))

  ;; o = a·b (mod p, below 2^256); o may be a or b.
  (func $mul (param $o i32) (param $a i32) (param $b i32)
    (local $i i32) (local $j i32) (local $ai i64) (local $t i64) (local $at i32)
    (memory.fill (global.get $COL) (i32.const 0) (i32.const 128))
    (loop $rows
      (local.set $ai (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3)))))
      (local.set $j (i32.const 0))
      (loop $cols
        (local.set $t (i64.mul (local.get $ai)
                               (i64.load (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 3))))))
        ;; Column i + j takes the product's low half, column i + j + 1 its high half: a column is
        ;; a sum of at most 16 halves, below 2^36.
        (local.set $at (i32.add (global.get $COL)
                                (i32.shl (i32.add (local.get $i) (local.get $j)) (i32.const 3))))
        (i64.store (local.get $at)
                   (i64.add (i64.load (local.get $at))
                            (i64.and (local.get $t) (i64.const 0xffffffff))))
        (i64.store offset=8 (local.get $at)
                   (i64.add (i64.load offset=8 (local.get $at))
                            (i64.shr_u (local.get $t) (i64.const 32))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $cols (i32.lt_u (local.get $j) (i32.const 8))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $rows (i32.lt_u (local.get $i) (i32.const 8))))
    ;; Column k + 8 is worth 2^256 times column k's weight: 38 (mod p).
    (local.set $i (i32.const 0))
    (loop $fold
      (local.set $at (i32.add (global.get $COL) (i32.shl (local.get $i) (i32.const 3))))
      (i64.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 3)))
                 (i64.add (i64.load (local.get $at))
                          (i64.mul (i64.load offset=64 (local.get $at)) (i64.const 38))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fold (i32.lt_u (local.get $i) (i32.const 8))))
    (call $reduce (local.get $o)))

  (func (export "on_curve_square") (result i32)
    (local $k i32)
    ;; y: the input's eight 32-bit words, the sign bit cleared.
    (loop $words
      (i64.store (i32.add (global.get $Y) (i32.shl (local.get $k) (i32.const 3)))
                 (i64.load32_u (i32.shl (local.get $k) (i32.const 2))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $words (i32.lt_u (local.get $k) (i32.const 8))))
    (i64.store offset=56 (global.get $Y)
               (i64.and (i64.load offset=56 (global.get $Y)) (i64.const 0x7fffffff)))
    (call $mul (global.get $S) (global.get $Y) (global.get $Y))
    ;; u = s + 2p - 1 = s + 2^256 - 39, limbs 0xffffffd9 then 0xffffffff; the carry out of the
    ;; top, a 2^256, is folded as 38 by $reduce.
    (i64.store (global.get $U) (i64.add (i64.load (global.get $S)) (i64.const 0xffffffd9)))
    (local.set $k (i32.const 1))
    (loop $limbs
      (i64.store (i32.add (global.get $U) (i32.shl (local.get $k) (i32.const 3)))
                 (i64.add (i64.load (i32.add (global.get $S) (i32.shl (local.get $k) (i32.const 3))))
                          (i64.const 0xffffffff)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $limbs (i32.lt_u (local.get $k) (i32.const 8))))
    (call $reduce (global.get $U))
    ;; v = d·s + 1
    (call $mul (global.get $V) (global.get $D) (global.get $S))
    (i64.store (global.get $V) (i64.add (i64.load (global.get $V)) (i64.const 1)))
    (call $reduce (global.get $V))
    (call $mul (global.get $W) (global.get $U) (global.get $V))
    (call $is_square
      (i32.wrap_i64 (i64.load offset=0 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=8 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=16 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=24 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=32 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=40 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=48 (global.get $W)))
      (i32.wrap_i64 (i64.load offset=56 (global.get $W)))))
  (func $is_square (export "is_square")
    (param $w0 i32) (param $w1 i32) (param $w2 i32) (param $w3 i32)
    (param $w4 i32) (param $w5 i32) (param $w6 i32) (param $w7 i32)
    (result i32)
    (local $a0 i64) (local $a1 i64) (local $a2 i64) (local $a3 i64)
    (local $b0 i64) (local $b1 i64) (local $b2 i64) (local $b3 i64)
    (local $t i64) (local $c i64) (local $d i64) (local $tz i64) (local $up i64)
    (local $flip i64) (local $less i32)

    (local.set $a0 (i64.or (i64.extend_i32_u (local.get $w0))
                           (i64.shl (i64.extend_i32_u (local.get $w1)) (i64.const 32))))
    (local.set $a1 (i64.or (i64.extend_i32_u (local.get $w2))
                           (i64.shl (i64.extend_i32_u (local.get $w3)) (i64.const 32))))
    (local.set $a2 (i64.or (i64.extend_i32_u (local.get $w4))
                           (i64.shl (i64.extend_i32_u (local.get $w5)) (i64.const 32))))
    (local.set $a3 (i64.or (i64.extend_i32_u (local.get $w6))
                           (i64.shl (i64.extend_i32_u (local.get $w7)) (i64.const 32))))
    ;; b = p
    (local.set $b0 (i64.const 0xffffffffffffffed))
    (local.set $b1 (i64.const -1))
    (local.set $b2 (i64.const -1))
    (local.set $b3 (i64.const 0x7fffffffffffffff))

    ;; Make a odd. A whole zero limb is 64 factors of two, an even count: dropped freely.
    (block $odd
      (loop $drop
        (br_if $odd (i64.ne (local.get $a0) (i64.const 0)))
        ;; a = 0: not a value the caller passes; not a square.
        (if (i64.eqz (i64.or (i64.or (local.get $a1) (local.get $a2)) (local.get $a3)))
          (then (return (i32.const 0))))
        (local.set $a0 (local.get $a1))
        (local.set $a1 (local.get $a2))
        (local.set $a2 (local.get $a3))
        (local.set $a3 (i64.const 0))
        (br $drop)))
    ;; Shifts by tz in [0, 63]: the high part moves by 63 - tz, then by 1 (a shift by 64 is none).
    (local.set $tz (i64.ctz (local.get $a0)))
    (local.set $up (i64.sub (i64.const 63) (local.get $tz)))
    (local.set $a0 (i64.or (i64.shr_u (local.get $a0) (local.get $tz))
                           (i64.shl (i64.shl (local.get $a1) (local.get $up)) (i64.const 1))))
    (local.set $a1 (i64.or (i64.shr_u (local.get $a1) (local.get $tz))
                           (i64.shl (i64.shl (local.get $a2) (local.get $up)) (i64.const 1))))
    (local.set $a2 (i64.or (i64.shr_u (local.get $a2) (local.get $tz))
                           (i64.shl (i64.shl (local.get $a3) (local.get $up)) (i64.const 1))))
    (local.set $a3 (i64.shr_u (local.get $a3) (local.get $tz)))
    ;; p = 5 (mod 8): (2/p) = -1, once per factor of two.
    (local.set $flip (local.get $tz))

    ;; Four limbs while a or b is at least 2^128, then two while one is at least 2^64 (in both,
    ;; a != b, since their gcd is 1), then one until a = b.
    (block $done4
      (loop $step4
        (br_if $done4 (i64.eqz (i64.or (i64.or (local.get $a2) (local.get $a3)) (i64.or (local.get $b2) (local.get $b3)))))
        (local.set $less (i64.lt_u (local.get $a0) (local.get $b0)))
        (local.set $less (i32.or (i64.lt_u (local.get $a1) (local.get $b1))
                                 (i32.and (i64.eq (local.get $a1) (local.get $b1)) (local.get $less))))
        (local.set $less (i32.or (i64.lt_u (local.get $a2) (local.get $b2))
                                 (i32.and (i64.eq (local.get $a2) (local.get $b2)) (local.get $less))))
        (local.set $less (i32.or (i64.lt_u (local.get $a3) (local.get $b3))
                                 (i32.and (i64.eq (local.get $a3) (local.get $b3)) (local.get $less))))
        ;; Reciprocity when a < b: both 3 (mod 4) is bit 1 of a0 & b0.
        (local.set $flip (i64.xor (local.get $flip)
                                  (i64.and (i64.extend_i32_u (local.get $less))
                                           (i64.shr_u (i64.and (local.get $a0) (local.get $b0)) (i64.const 1)))))
        ;; a < b: swap, so that a - b is (b - a) and b is the old a.
        (local.set $t (select (local.get $b0) (local.get $a0) (local.get $less)))
        (local.set $b0 (select (local.get $a0) (local.get $b0) (local.get $less)))
        (local.set $a0 (local.get $t))
        (local.set $t (select (local.get $b1) (local.get $a1) (local.get $less)))
        (local.set $b1 (select (local.get $a1) (local.get $b1) (local.get $less)))
        (local.set $a1 (local.get $t))
        (local.set $t (select (local.get $b2) (local.get $a2) (local.get $less)))
        (local.set $b2 (select (local.get $a2) (local.get $b2) (local.get $less)))
        (local.set $a2 (local.get $t))
        (local.set $t (select (local.get $b3) (local.get $a3) (local.get $less)))
        (local.set $b3 (select (local.get $a3) (local.get $b3) (local.get $less)))
        (local.set $a3 (local.get $t))
        ;; a = a - b: positive and even; c is the borrow.
        (local.set $c (i64.extend_i32_u (i64.lt_u (local.get $a0) (local.get $b0))))
        (local.set $a0 (i64.sub (local.get $a0) (local.get $b0)))
        (local.set $t (i64.sub (local.get $a1) (local.get $b1)))
        (local.set $d (i64.extend_i32_u (i32.or (i64.lt_u (local.get $a1) (local.get $b1)) (i64.lt_u (local.get $t) (local.get $c)))))
        (local.set $a1 (i64.sub (local.get $t) (local.get $c)))
        (local.set $c (local.get $d))
        (local.set $t (i64.sub (local.get $a2) (local.get $b2)))
        (local.set $d (i64.extend_i32_u (i32.or (i64.lt_u (local.get $a2) (local.get $b2)) (i64.lt_u (local.get $t) (local.get $c)))))
        (local.set $a2 (i64.sub (local.get $t) (local.get $c)))
        (local.set $c (local.get $d))
        (local.set $t (i64.sub (local.get $a3) (local.get $b3)))
        (local.set $a3 (i64.sub (local.get $t) (local.get $c)))
        ;; Whole zero limbs (rare): dropped, an even count of twos.
        (block $low4
          (loop $drop4
            (br_if $low4 (i64.ne (local.get $a0) (i64.const 0)))
            (local.set $a0 (local.get $a1))
            (local.set $a1 (local.get $a2))
            (local.set $a2 (local.get $a3))
            (local.set $a3 (i64.const 0))
            (br $drop4)))
        (local.set $tz (i64.ctz (local.get $a0)))
        ;; A shift by tz in [0, 63]: the limb above moves by 63 - tz, then by 1.
        (local.set $t (i64.sub (i64.const 63) (local.get $tz)))
        (local.set $a0 (i64.or (i64.shr_u (local.get $a0) (local.get $tz))
                                (i64.shl (i64.shl (local.get $a1) (local.get $t)) (i64.const 1))))
        (local.set $a1 (i64.or (i64.shr_u (local.get $a1) (local.get $tz))
                                (i64.shl (i64.shl (local.get $a2) (local.get $t)) (i64.const 1))))
        (local.set $a2 (i64.or (i64.shr_u (local.get $a2) (local.get $tz))
                                (i64.shl (i64.shl (local.get $a3) (local.get $t)) (i64.const 1))))
        (local.set $a3 (i64.shr_u (local.get $a3) (local.get $tz)))
        ;; (2/b) = -1 for b = 3 or 5 (mod 8), where bit 0 of (b >> 1) ^ (b >> 2) is set.
        (local.set $flip (i64.xor (local.get $flip)
                                  (i64.and (local.get $tz)
                                           (i64.xor (i64.shr_u (local.get $b0) (i64.const 1))
                                                    (i64.shr_u (local.get $b0) (i64.const 2))))))
        (br $step4)))
    (block $done2
      (loop $step2
        (br_if $done2 (i64.eqz (i64.or (local.get $a1) (local.get $b1))))
        (local.set $less (i64.lt_u (local.get $a0) (local.get $b0)))
        (local.set $less (i32.or (i64.lt_u (local.get $a1) (local.get $b1))
                                 (i32.and (i64.eq (local.get $a1) (local.get $b1)) (local.get $less))))
        ;; Reciprocity when a < b: both 3 (mod 4) is bit 1 of a0 & b0.
        (local.set $flip (i64.xor (local.get $flip)
                                  (i64.and (i64.extend_i32_u (local.get $less))
                                           (i64.shr_u (i64.and (local.get $a0) (local.get $b0)) (i64.const 1)))))
        ;; a < b: swap, so that a - b is (b - a) and b is the old a.
        (local.set $t (select (local.get $b0) (local.get $a0) (local.get $less)))
        (local.set $b0 (select (local.get $a0) (local.get $b0) (local.get $less)))
        (local.set $a0 (local.get $t))
        (local.set $t (select (local.get $b1) (local.get $a1) (local.get $less)))
        (local.set $b1 (select (local.get $a1) (local.get $b1) (local.get $less)))
        (local.set $a1 (local.get $t))
        ;; a = a - b: positive and even; c is the borrow.
        (local.set $c (i64.extend_i32_u (i64.lt_u (local.get $a0) (local.get $b0))))
        (local.set $a0 (i64.sub (local.get $a0) (local.get $b0)))
        (local.set $t (i64.sub (local.get $a1) (local.get $b1)))
        (local.set $a1 (i64.sub (local.get $t) (local.get $c)))
        ;; Whole zero limbs (rare): dropped, an even count of twos.
        (block $low2
          (loop $drop2
            (br_if $low2 (i64.ne (local.get $a0) (i64.const 0)))
            (local.set $a0 (local.get $a1))
            (local.set $a1 (i64.const 0))
            (br $drop2)))
        (local.set $tz (i64.ctz (local.get $a0)))
        ;; A shift by tz in [0, 63]: the limb above moves by 63 - tz, then by 1.
        (local.set $t (i64.sub (i64.const 63) (local.get $tz)))
        (local.set $a0 (i64.or (i64.shr_u (local.get $a0) (local.get $tz))
                                (i64.shl (i64.shl (local.get $a1) (local.get $t)) (i64.const 1))))
        (local.set $a1 (i64.shr_u (local.get $a1) (local.get $tz)))
        ;; (2/b) = -1 for b = 3 or 5 (mod 8), where bit 0 of (b >> 1) ^ (b >> 2) is set.
        (local.set $flip (i64.xor (local.get $flip)
                                  (i64.and (local.get $tz)
                                           (i64.xor (i64.shr_u (local.get $b0) (i64.const 1))
                                                    (i64.shr_u (local.get $b0) (i64.const 2))))))
        (br $step2)))
    (loop $step1
      (if (i64.eq (local.get $a0) (local.get $b0))
        (then (return (i32.wrap_i64 (i64.xor (i64.and (local.get $flip) (i64.const 1)) (i64.const 1))))))
      (local.set $less (i64.lt_u (local.get $a0) (local.get $b0)))
      ;; Reciprocity when a < b: both 3 (mod 4) is bit 1 of a0 & b0.
      (local.set $flip (i64.xor (local.get $flip)
                                (i64.and (i64.extend_i32_u (local.get $less))
                                         (i64.shr_u (i64.and (local.get $a0) (local.get $b0)) (i64.const 1)))))
      ;; a < b: swap, so that a - b is (b - a) and b is the old a.
      (local.set $t (select (local.get $b0) (local.get $a0) (local.get $less)))
      (local.set $b0 (select (local.get $a0) (local.get $b0) (local.get $less)))
      (local.set $a0 (local.get $t))
      ;; a = a - b: positive and even; c is the borrow.
      (local.set $a0 (i64.sub (local.get $a0) (local.get $b0)))
      (local.set $tz (i64.ctz (local.get $a0)))
      (local.set $a0 (i64.shr_u (local.get $a0) (local.get $tz)))
      ;; (2/b) = -1 for b = 3 or 5 (mod 8), where bit 0 of (b >> 1) ^ (b >> 2) is set.
      (local.set $flip (i64.xor (local.get $flip)
                                (i64.and (local.get $tz)
                                         (i64.xor (i64.shr_u (local.get $b0) (i64.const 1))
                                                  (i64.shr_u (local.get $b0) (i64.const 2))))))
      (br $step1))
    (unreachable)))
