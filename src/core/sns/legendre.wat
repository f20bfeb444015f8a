;; Whether a value is a square mod p = 2^255 - 19, by the binary Jacobi symbol on four 64-bit
;; limbs held in locals; a step picks its branch with `select`, not `if`. The source of
;; ./legendre.wasm: `wat2wasm` of the `wabt` package (`npm run build:wasm`); test/pda.test.ts
;; checks that the two agree, and the answers against Euler's criterion.
;;
;; (is_square w0 .. w7): w = sum of wi * 2^(32 i), its 32-bit words little-endian, any value below
;; 2^256 that is not a multiple of p. Returns 1 if w is a square mod p, else 0.
;;
;; Loop invariant: a and b odd, the answer is (a/b) * (-1)^flip. A step replaces (a, b) by
;; (a - b, b) if a >= b, else by (b - a, a) (quadratic reciprocity: the sign flips if both are 3
;; mod 4), then shifts the factors of two out of the new a ((2/b) = -1 for b = 3 or 5 mod 8).
;; a = b ends it: then both are the gcd, 1 since p is prime.
(module
  (func $is_square (export "is_square")
    (param $w0 i32) (param $w1 i32) (param $w2 i32) (param $w3 i32)
    (param $w4 i32) (param $w5 i32) (param $w6 i32) (param $w7 i32)
    (result i32)
    (local $a0 i64) (local $a1 i64) (local $a2 i64) (local $a3 i64)
    (local $b0 i64) (local $b1 i64) (local $b2 i64) (local $b3 i64)
    (local $d0 i64) (local $d1 i64) (local $d2 i64) (local $d3 i64)
    (local $n0 i64) (local $n1 i64) (local $n2 i64) (local $n3 i64)
    (local $t i64) (local $c i64) (local $tz i64) (local $up i64)
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

    (loop $step
      ;; d = a - b; c ends as the borrow out: a < b.
      (local.set $d0 (i64.sub (local.get $a0) (local.get $b0)))
      (local.set $c (i64.extend_i32_u (i64.lt_u (local.get $a0) (local.get $b0))))
      (local.set $t (i64.sub (local.get $a1) (local.get $b1)))
      (local.set $d1 (i64.sub (local.get $t) (local.get $c)))
      (local.set $c (i64.extend_i32_u (i32.or (i64.lt_u (local.get $a1) (local.get $b1))
                                              (i64.lt_u (local.get $t) (local.get $c)))))
      (local.set $t (i64.sub (local.get $a2) (local.get $b2)))
      (local.set $d2 (i64.sub (local.get $t) (local.get $c)))
      (local.set $c (i64.extend_i32_u (i32.or (i64.lt_u (local.get $a2) (local.get $b2))
                                              (i64.lt_u (local.get $t) (local.get $c)))))
      (local.set $t (i64.sub (local.get $a3) (local.get $b3)))
      (local.set $d3 (i64.sub (local.get $t) (local.get $c)))
      (local.set $less (i32.or (i64.lt_u (local.get $a3) (local.get $b3))
                               (i64.lt_u (local.get $t) (local.get $c))))
      (if (i64.eqz (i64.or (i64.or (local.get $d0) (local.get $d1))
                           (i64.or (local.get $d2) (local.get $d3))))
        (then (return (i32.wrap_i64 (i64.xor (i64.and (local.get $flip) (i64.const 1))
                                             (i64.const 1))))))
      ;; n = -d = b - a: ~d + 1, the carry running up while limbs are zero.
      (local.set $n0 (i64.sub (i64.const 0) (local.get $d0)))
      (local.set $c (i64.extend_i32_u (i64.eqz (local.get $d0))))
      (local.set $n1 (i64.add (i64.xor (local.get $d1) (i64.const -1)) (local.get $c)))
      (local.set $c (i64.and (local.get $c) (i64.extend_i32_u (i64.eqz (local.get $d1)))))
      (local.set $n2 (i64.add (i64.xor (local.get $d2) (i64.const -1)) (local.get $c)))
      (local.set $c (i64.and (local.get $c) (i64.extend_i32_u (i64.eqz (local.get $d2)))))
      (local.set $n3 (i64.add (i64.xor (local.get $d3) (i64.const -1)) (local.get $c)))
      ;; Reciprocity when a < b: both 3 (mod 4) is bit 1 of a0 & b0.
      (local.set $flip (i64.xor (local.get $flip)
                                (i64.and (i64.extend_i32_u (local.get $less))
                                         (i64.shr_u (i64.and (local.get $a0) (local.get $b0))
                                                    (i64.const 1)))))
      ;; a < b: (a, b) = (b - a, a); else (a - b, b).
      (local.set $b0 (select (local.get $a0) (local.get $b0) (local.get $less)))
      (local.set $b1 (select (local.get $a1) (local.get $b1) (local.get $less)))
      (local.set $b2 (select (local.get $a2) (local.get $b2) (local.get $less)))
      (local.set $b3 (select (local.get $a3) (local.get $b3) (local.get $less)))
      (local.set $a0 (select (local.get $n0) (local.get $d0) (local.get $less)))
      (local.set $a1 (select (local.get $n1) (local.get $d1) (local.get $less)))
      (local.set $a2 (select (local.get $n2) (local.get $d2) (local.get $less)))
      (local.set $a3 (select (local.get $n3) (local.get $d3) (local.get $less)))

      ;; a is even and not 0. Whole zero limbs (rare): dropped, an even count of twos.
      (block $low
        (loop $drop
          (br_if $low (i64.ne (local.get $a0) (i64.const 0)))
          (local.set $a0 (local.get $a1))
          (local.set $a1 (local.get $a2))
          (local.set $a2 (local.get $a3))
          (local.set $a3 (i64.const 0))
          (br $drop)))
      (local.set $tz (i64.ctz (local.get $a0)))
      (local.set $up (i64.sub (i64.const 63) (local.get $tz)))
      (local.set $a0 (i64.or (i64.shr_u (local.get $a0) (local.get $tz))
                             (i64.shl (i64.shl (local.get $a1) (local.get $up)) (i64.const 1))))
      (local.set $a1 (i64.or (i64.shr_u (local.get $a1) (local.get $tz))
                             (i64.shl (i64.shl (local.get $a2) (local.get $up)) (i64.const 1))))
      (local.set $a2 (i64.or (i64.shr_u (local.get $a2) (local.get $tz))
                             (i64.shl (i64.shl (local.get $a3) (local.get $up)) (i64.const 1))))
      (local.set $a3 (i64.shr_u (local.get $a3) (local.get $tz)))
      ;; (2/b) = -1 for b = 3 or 5 (mod 8), exactly where bit 0 of (b >> 1) ^ (b >> 2) is set.
      (local.set $flip (i64.xor (local.get $flip)
                                (i64.and (local.get $tz)
                                         (i64.xor (i64.shr_u (local.get $b0) (i64.const 1))
                                                  (i64.shr_u (local.get $b0) (i64.const 2))))))
      (br $step))
    (unreachable)))
