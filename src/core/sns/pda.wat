;; The arithmetic of ./ed25519.ts's curve check, in WebAssembly for its 64-bit integers, and
;; ./pda.ts's program-address search (SHA-256 and that check, one call a search). The source of
;; ./pda.wasm: `wat2wasm` of the `wabt` package (`npm run build:wasm`); test/pda.test.ts checks
;; that the two agree, and the answers against web3.js, the SDK and Euler's criterion.
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

  ;; ---- SHA-256 (FIPS 180-4) and web3.js's program-address search ----
  ;;
  ;; Words are big-endian in the message and the digest: $bswap turns a little-endian i32.load
  ;; into the message's word and a state word into its digest bytes.

  ;; SHA-256's round constants, little-endian i32s.
  (data (i32.const 1024)
    "\98\2f\8a\42\91\44\37\71\cf\fb\c0\b5\a5\db\b5\e9\5b\c2\56\39\f1\11\f1\59\a4\82\3f\92\d5\5e\1c\ab"
    "\98\aa\07\d8\01\5b\83\12\be\85\31\24\c3\7d\0c\55\74\5d\be\72\fe\b1\de\80\a7\06\dc\9b\74\f1\9b\c1"
    "\c1\69\9b\e4\86\47\be\ef\c6\9d\c1\0f\cc\a1\0c\24\6f\2c\e9\2d\aa\84\74\4a\dc\a9\b0\5c\da\88\f9\76"
    "\52\51\3e\98\6d\c6\31\a8\c8\27\03\b0\c7\7f\59\bf\f3\0b\e0\c6\47\91\a7\d5\51\63\ca\06\67\29\29\14"
    "\85\0a\b7\27\38\21\1b\2e\fc\6d\2c\4d\13\0d\38\53\54\73\0a\65\bb\0a\6a\76\2e\c9\c2\81\85\2c\72\92"
    "\a1\e8\bf\a2\4b\66\1a\a8\70\8b\4b\c2\a3\51\6c\c7\19\e8\92\d1\24\06\99\d6\85\35\0e\f4\70\a0\6a\10"
    "\16\c1\a4\19\08\6c\37\1e\4c\77\48\27\b5\bc\b0\34\b3\0c\1c\39\4a\aa\d8\4e\4f\ca\9c\5b\f3\6f\2e\68"
    "\ee\82\8f\74\6f\63\a5\78\14\78\c8\84\08\02\c7\8c\fa\ff\be\90\eb\6c\50\a4\f7\a3\f9\be\f2\78\71\c6"
  )
  (global $SHA_K i32 (i32.const 1024))
  ;; The message schedule of the block being hashed: 64 words.
  (global $SHA_W i32 (i32.const 1280))
  ;; The schedule of a name search's third block, the same for every candidate (see $search).
  (global $SHA_W3 i32 (i32.const 1536))
  (global $STATE i32 (i32.const 1792))
  ;; The state after a name search's first block (hashed name and class), written by $midstate
  ;; or by the caller.
  (global $MID (export "MID") i32 (i32.const 1824))
  ;; A name search's message: hashed name (32 bytes), class (32), parent (32), bump (1), the name
  ;; program's id (32) and "ProgramDerivedAddress" (21): 150 bytes, padded to three blocks. The
  ;; caller writes bytes 97 to 149 once, then calls $init_search.
  (global $SEEDS (export "SEEDS") i32 (i32.const 2048))
  ;; The message of $hash_name, from here to the end of memory.
  (global $MSG (export "MSG") i32 (i32.const 4096))

  (func $bswap (param $x i32) (result i32)
    (i32.or (i32.and (i32.rotr (local.get $x) (i32.const 8)) (i32.const 0xff00ff00))
            (i32.and (i32.rotl (local.get $x) (i32.const 8)) (i32.const 0x00ff00ff))))

  (func $set_h0 (param $s i32)
    (i32.store offset=0 (local.get $s) (i32.const 0x6a09e667))
    (i32.store offset=4 (local.get $s) (i32.const 0xbb67ae85))
    (i32.store offset=8 (local.get $s) (i32.const 0x3c6ef372))
    (i32.store offset=12 (local.get $s) (i32.const 0xa54ff53a))
    (i32.store offset=16 (local.get $s) (i32.const 0x510e527f))
    (i32.store offset=20 (local.get $s) (i32.const 0x9b05688c))
    (i32.store offset=24 (local.get $s) (i32.const 0x1f83d9ab))
    (i32.store offset=28 (local.get $s) (i32.const 0x5be0cd19)))

  ;; The 64-byte block at $src into the schedule at $SHA_W: its 16 words, then 48 more.
  (func $expand (param $src i32)
    (local $i i32) (local $q i32) (local $x i32) (local $y i32)
    (loop $words
      (i32.store (i32.add (global.get $SHA_W) (local.get $i))
                 (call $bswap (i32.load (i32.add (local.get $src) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $words (i32.lt_u (local.get $i) (i32.const 64))))
    ;; w[t] = σ1(w[t - 2]) + w[t - 7] + σ0(w[t - 15]) + w[t - 16], from $q = address of w[t - 16].
    (local.set $q (global.get $SHA_W))
    (loop $schedule
      (local.set $x (i32.load offset=4 (local.get $q)))
      (local.set $y (i32.load offset=56 (local.get $q)))
      (i32.store offset=64 (local.get $q)
        (i32.add
          (i32.add (i32.xor (i32.xor (i32.rotr (local.get $y) (i32.const 17))
                                     (i32.rotr (local.get $y) (i32.const 19)))
                            (i32.shr_u (local.get $y) (i32.const 10)))
                   (i32.load offset=36 (local.get $q)))
          (i32.add (i32.xor (i32.xor (i32.rotr (local.get $x) (i32.const 7))
                                     (i32.rotr (local.get $x) (i32.const 18)))
                            (i32.shr_u (local.get $x) (i32.const 3)))
                   (i32.load (local.get $q)))))
      (local.set $q (i32.add (local.get $q) (i32.const 4)))
      (br_if $schedule (i32.lt_u (local.get $q) (i32.add (global.get $SHA_W) (i32.const 192))))))

  ;; The 64 rounds over the schedule at $w, added into the state at $s: eight rounds an
  ;; iteration, the eight working variables renamed instead of moved.
  (func $rounds (param $s i32) (param $w i32)
    (local $a i32) (local $b i32) (local $c i32) (local $d i32)
    (local $e i32) (local $f i32) (local $g i32) (local $h i32)
    (local $t i32) (local $k i32) (local $end i32)
    (local.set $a (i32.load offset=0 (local.get $s)))
    (local.set $b (i32.load offset=4 (local.get $s)))
    (local.set $c (i32.load offset=8 (local.get $s)))
    (local.set $d (i32.load offset=12 (local.get $s)))
    (local.set $e (i32.load offset=16 (local.get $s)))
    (local.set $f (i32.load offset=20 (local.get $s)))
    (local.set $g (i32.load offset=24 (local.get $s)))
    (local.set $h (i32.load offset=28 (local.get $s)))
    (local.set $k (global.get $SHA_K))
    (local.set $end (i32.add (local.get $w) (i32.const 256)))
    (loop $eight
        ;; round 8i + 0
        (local.set $t (i32.add (i32.add (local.get $h)
                                        (i32.xor (i32.xor (i32.rotr (local.get $e) (i32.const 6))
                                                          (i32.rotr (local.get $e) (i32.const 11)))
                                                 (i32.rotr (local.get $e) (i32.const 25))))
                               (i32.add (i32.xor (local.get $g) (i32.and (local.get $e) (i32.xor (local.get $f) (local.get $g))))
                                        (i32.add (i32.load offset=0 (local.get $k)) (i32.load offset=0 (local.get $w))))))
        (local.set $d (i32.add (local.get $d) (local.get $t)))
        (local.set $h (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $a) (i32.const 2))
                                                          (i32.rotr (local.get $a) (i32.const 13)))
                                                 (i32.rotr (local.get $a) (i32.const 22)))
                                        (i32.or (i32.and (local.get $a) (local.get $b))
                                                (i32.and (local.get $c) (i32.or (local.get $a) (local.get $b)))))))
        ;; round 8i + 1
        (local.set $t (i32.add (i32.add (local.get $g)
                                        (i32.xor (i32.xor (i32.rotr (local.get $d) (i32.const 6))
                                                          (i32.rotr (local.get $d) (i32.const 11)))
                                                 (i32.rotr (local.get $d) (i32.const 25))))
                               (i32.add (i32.xor (local.get $f) (i32.and (local.get $d) (i32.xor (local.get $e) (local.get $f))))
                                        (i32.add (i32.load offset=4 (local.get $k)) (i32.load offset=4 (local.get $w))))))
        (local.set $c (i32.add (local.get $c) (local.get $t)))
        (local.set $g (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $h) (i32.const 2))
                                                          (i32.rotr (local.get $h) (i32.const 13)))
                                                 (i32.rotr (local.get $h) (i32.const 22)))
                                        (i32.or (i32.and (local.get $h) (local.get $a))
                                                (i32.and (local.get $b) (i32.or (local.get $h) (local.get $a)))))))
        ;; round 8i + 2
        (local.set $t (i32.add (i32.add (local.get $f)
                                        (i32.xor (i32.xor (i32.rotr (local.get $c) (i32.const 6))
                                                          (i32.rotr (local.get $c) (i32.const 11)))
                                                 (i32.rotr (local.get $c) (i32.const 25))))
                               (i32.add (i32.xor (local.get $e) (i32.and (local.get $c) (i32.xor (local.get $d) (local.get $e))))
                                        (i32.add (i32.load offset=8 (local.get $k)) (i32.load offset=8 (local.get $w))))))
        (local.set $b (i32.add (local.get $b) (local.get $t)))
        (local.set $f (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $g) (i32.const 2))
                                                          (i32.rotr (local.get $g) (i32.const 13)))
                                                 (i32.rotr (local.get $g) (i32.const 22)))
                                        (i32.or (i32.and (local.get $g) (local.get $h))
                                                (i32.and (local.get $a) (i32.or (local.get $g) (local.get $h)))))))
        ;; round 8i + 3
        (local.set $t (i32.add (i32.add (local.get $e)
                                        (i32.xor (i32.xor (i32.rotr (local.get $b) (i32.const 6))
                                                          (i32.rotr (local.get $b) (i32.const 11)))
                                                 (i32.rotr (local.get $b) (i32.const 25))))
                               (i32.add (i32.xor (local.get $d) (i32.and (local.get $b) (i32.xor (local.get $c) (local.get $d))))
                                        (i32.add (i32.load offset=12 (local.get $k)) (i32.load offset=12 (local.get $w))))))
        (local.set $a (i32.add (local.get $a) (local.get $t)))
        (local.set $e (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $f) (i32.const 2))
                                                          (i32.rotr (local.get $f) (i32.const 13)))
                                                 (i32.rotr (local.get $f) (i32.const 22)))
                                        (i32.or (i32.and (local.get $f) (local.get $g))
                                                (i32.and (local.get $h) (i32.or (local.get $f) (local.get $g)))))))
        ;; round 8i + 4
        (local.set $t (i32.add (i32.add (local.get $d)
                                        (i32.xor (i32.xor (i32.rotr (local.get $a) (i32.const 6))
                                                          (i32.rotr (local.get $a) (i32.const 11)))
                                                 (i32.rotr (local.get $a) (i32.const 25))))
                               (i32.add (i32.xor (local.get $c) (i32.and (local.get $a) (i32.xor (local.get $b) (local.get $c))))
                                        (i32.add (i32.load offset=16 (local.get $k)) (i32.load offset=16 (local.get $w))))))
        (local.set $h (i32.add (local.get $h) (local.get $t)))
        (local.set $d (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $e) (i32.const 2))
                                                          (i32.rotr (local.get $e) (i32.const 13)))
                                                 (i32.rotr (local.get $e) (i32.const 22)))
                                        (i32.or (i32.and (local.get $e) (local.get $f))
                                                (i32.and (local.get $g) (i32.or (local.get $e) (local.get $f)))))))
        ;; round 8i + 5
        (local.set $t (i32.add (i32.add (local.get $c)
                                        (i32.xor (i32.xor (i32.rotr (local.get $h) (i32.const 6))
                                                          (i32.rotr (local.get $h) (i32.const 11)))
                                                 (i32.rotr (local.get $h) (i32.const 25))))
                               (i32.add (i32.xor (local.get $b) (i32.and (local.get $h) (i32.xor (local.get $a) (local.get $b))))
                                        (i32.add (i32.load offset=20 (local.get $k)) (i32.load offset=20 (local.get $w))))))
        (local.set $g (i32.add (local.get $g) (local.get $t)))
        (local.set $c (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $d) (i32.const 2))
                                                          (i32.rotr (local.get $d) (i32.const 13)))
                                                 (i32.rotr (local.get $d) (i32.const 22)))
                                        (i32.or (i32.and (local.get $d) (local.get $e))
                                                (i32.and (local.get $f) (i32.or (local.get $d) (local.get $e)))))))
        ;; round 8i + 6
        (local.set $t (i32.add (i32.add (local.get $b)
                                        (i32.xor (i32.xor (i32.rotr (local.get $g) (i32.const 6))
                                                          (i32.rotr (local.get $g) (i32.const 11)))
                                                 (i32.rotr (local.get $g) (i32.const 25))))
                               (i32.add (i32.xor (local.get $a) (i32.and (local.get $g) (i32.xor (local.get $h) (local.get $a))))
                                        (i32.add (i32.load offset=24 (local.get $k)) (i32.load offset=24 (local.get $w))))))
        (local.set $f (i32.add (local.get $f) (local.get $t)))
        (local.set $b (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $c) (i32.const 2))
                                                          (i32.rotr (local.get $c) (i32.const 13)))
                                                 (i32.rotr (local.get $c) (i32.const 22)))
                                        (i32.or (i32.and (local.get $c) (local.get $d))
                                                (i32.and (local.get $e) (i32.or (local.get $c) (local.get $d)))))))
        ;; round 8i + 7
        (local.set $t (i32.add (i32.add (local.get $a)
                                        (i32.xor (i32.xor (i32.rotr (local.get $f) (i32.const 6))
                                                          (i32.rotr (local.get $f) (i32.const 11)))
                                                 (i32.rotr (local.get $f) (i32.const 25))))
                               (i32.add (i32.xor (local.get $h) (i32.and (local.get $f) (i32.xor (local.get $g) (local.get $h))))
                                        (i32.add (i32.load offset=28 (local.get $k)) (i32.load offset=28 (local.get $w))))))
        (local.set $e (i32.add (local.get $e) (local.get $t)))
        (local.set $a (i32.add (local.get $t)
                               (i32.add (i32.xor (i32.xor (i32.rotr (local.get $b) (i32.const 2))
                                                          (i32.rotr (local.get $b) (i32.const 13)))
                                                 (i32.rotr (local.get $b) (i32.const 22)))
                                        (i32.or (i32.and (local.get $b) (local.get $c))
                                                (i32.and (local.get $d) (i32.or (local.get $b) (local.get $c)))))))
        (local.set $k (i32.add (local.get $k) (i32.const 32)))
        (local.set $w (i32.add (local.get $w) (i32.const 32)))
        (br_if $eight (i32.lt_u (local.get $w) (local.get $end))))
    (i32.store offset=0 (local.get $s) (i32.add (i32.load offset=0 (local.get $s)) (local.get $a)))
    (i32.store offset=4 (local.get $s) (i32.add (i32.load offset=4 (local.get $s)) (local.get $b)))
    (i32.store offset=8 (local.get $s) (i32.add (i32.load offset=8 (local.get $s)) (local.get $c)))
    (i32.store offset=12 (local.get $s) (i32.add (i32.load offset=12 (local.get $s)) (local.get $d)))
    (i32.store offset=16 (local.get $s) (i32.add (i32.load offset=16 (local.get $s)) (local.get $e)))
    (i32.store offset=20 (local.get $s) (i32.add (i32.load offset=20 (local.get $s)) (local.get $f)))
    (i32.store offset=24 (local.get $s) (i32.add (i32.load offset=24 (local.get $s)) (local.get $g)))
    (i32.store offset=28 (local.get $s) (i32.add (i32.load offset=28 (local.get $s)) (local.get $h))))

  ;; The state at $s written as digest bytes at $dst.
  (func $digest (param $s i32) (param $dst i32)
    (local $i i32)
    (loop $words
      (i32.store (i32.add (local.get $dst) (local.get $i))
                 (call $bswap (i32.load (i32.add (local.get $s) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $words (i32.lt_u (local.get $i) (i32.const 32)))))

  ;; (hash_name len): SHA-256 of the $len bytes at $MSG into the first 32 bytes of $SEEDS (where
  ;; a name search takes its hashed name). Pads in place: the caller leaves $len + 72 bytes.
  (func (export "hash_name") (param $len i32)
    (local $end i32) (local $at i32)
    (local.set $end (i32.and (i32.add (local.get $len) (i32.const 72)) (i32.const -64)))
    (i32.store8 (i32.add (global.get $MSG) (local.get $len)) (i32.const 0x80))
    (memory.fill (i32.add (global.get $MSG) (i32.add (local.get $len) (i32.const 1)))
                 (i32.const 0)
                 (i32.sub (i32.sub (local.get $end) (local.get $len)) (i32.const 5)))
    ;; The length in bits, big-endian in the last 8 bytes (the upper four zero: $len < 2^29).
    (i32.store (i32.add (global.get $MSG) (i32.sub (local.get $end) (i32.const 4)))
               (call $bswap (i32.shl (local.get $len) (i32.const 3))))
    (call $set_h0 (global.get $STATE))
    (loop $blocks
      (call $expand (i32.add (global.get $MSG) (local.get $at)))
      (call $rounds (global.get $STATE) (global.get $SHA_W))
      (local.set $at (i32.add (local.get $at) (i32.const 64)))
      (br_if $blocks (i32.lt_u (local.get $at) (local.get $end))))
    (call $digest (global.get $STATE) (global.get $SEEDS)))

  ;; (init_search): pads the 150-byte message at $SEEDS and keeps its third block's schedule
  ;; (bytes 128 to 191: the program id's last byte, the marker, the padding), which no seed
  ;; changes.
  (func (export "init_search")
    (i32.store8 offset=150 (global.get $SEEDS) (i32.const 0x80))
    (memory.fill (i32.add (global.get $SEEDS) (i32.const 151)) (i32.const 0) (i32.const 37))
    (i32.store offset=188 (global.get $SEEDS) (call $bswap (i32.const 1200)))
    (call $expand (i32.add (global.get $SEEDS) (i32.const 128)))
    (memory.copy (global.get $SHA_W3) (global.get $SHA_W) (i32.const 256)))

  ;; (midstate): $MID = the state after the first block of $SEEDS (hashed name and class).
  (func $midstate (export "midstate")
    (call $set_h0 (global.get $MID))
    (call $expand (global.get $SEEDS))
    (call $rounds (global.get $MID) (global.get $SHA_W)))

  ;; (search_from_mid): web3.js's findProgramAddressSync over the message at $SEEDS, the state
  ;; after its first block at $MID: the first bump from 255 down whose hash is off the curve.
  ;; Returns that bump, its hash at address 0; 0 if none is.
  (func $search (export "search_from_mid") (result i32)
    (local $bump i32)
    (local.set $bump (i32.const 255))
    (loop $next
      (i32.store8 offset=96 (global.get $SEEDS) (local.get $bump))
      (memory.copy (global.get $STATE) (global.get $MID) (i32.const 32))
      (call $expand (i32.add (global.get $SEEDS) (i32.const 64)))
      (call $rounds (global.get $STATE) (global.get $SHA_W))
      (call $rounds (global.get $STATE) (global.get $SHA_W3))
      (call $digest (global.get $STATE) (i32.const 0))
      (if (i32.eqz (call $on_curve)) (then (return (local.get $bump))))
      (local.set $bump (i32.sub (local.get $bump) (i32.const 1)))
      (br_if $next (local.get $bump)))
    (i32.const 0))

  ;; (search): $search_from_mid with the first block hashed first.
  (func (export "search") (result i32)
    (call $midstate)
    (call $search))


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

  ;; (on_curve): whether the 32 bytes at address 0 encode an ed25519 point, as web3.js 1.99's
  ;; PublicKey.isOnCurve decides (see ./ed25519.ts): 0 for y >= p; for y = 1 or p - 1 (u = 0,
  ;; x = 0), whether the sign bit is clear; else whether u·v is a square.
  (func $on_curve (export "on_curve") (result i32)
    (local $q0 i64) (local $top i64) (local $sign i32)
    (local.set $q0 (i64.load offset=0 (i32.const 0)))
    (local.set $top (i64.and (i64.load offset=24 (i32.const 0)) (i64.const 0x7fffffffffffffff)))
    (local.set $sign (i32.wrap_i64 (i64.shr_u (i64.load offset=24 (i32.const 0)) (i64.const 63))))
    ;; Bits 64 to 254 all ones: y >= p when the low word is at least 2^64 - 19, y = p - 1 at 2^64 - 20.
    (if (i32.and (i64.eq (local.get $top) (i64.const 0x7fffffffffffffff))
                 (i64.eq (i64.and (i64.load offset=8 (i32.const 0)) (i64.load offset=16 (i32.const 0)))
                         (i64.const -1)))
      (then
        (if (i64.ge_u (local.get $q0) (i64.const 0xffffffffffffffed)) (then (return (i32.const 0))))
        (if (i64.eq (local.get $q0) (i64.const 0xffffffffffffffec))
          (then (return (i32.eqz (local.get $sign)))))))
    (if (i32.and (i64.eq (local.get $q0) (i64.const 1))
                 (i64.eqz (i64.or (i64.or (i64.load offset=8 (i32.const 0)) (i64.load offset=16 (i32.const 0)))
                                  (local.get $top))))
      (then (return (i32.eqz (local.get $sign)))))
    (call $on_curve_square))

  (func $on_curve_square (result i32)
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
