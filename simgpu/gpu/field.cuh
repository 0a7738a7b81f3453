// Montgomery arithmetic over a prime field with N 32-bit limbs (Fr: N = 8, Fp: N = 12).
//
// A field is a parameter struct P generated at load time from bls12_381.py
// (simgpu.real.gpu.constants_header): P::N, P::INV = -q^-1 mod 2^32, and constexpr
// limb functions P::mod(i), P::one(i) (R mod q), P::r2(i) (R^2 mod q), P::pm2(i) (q - 2).
// Loops are unrolled, so P::mod(i) folds to an immediate operand.
//
// Fr values are kept fully reduced (< q).  Fp has more headroom (p < 2^381, R = 2^384,
// so 4p < R) and is reduced lazily (P::LAZY): values live in [0, 2p), a Montgomery
// product of two such values is again < 2p without the final subtraction (CIOS bound
// (a b + m p R) / R < 4p^2/R + p < 2p), and add/sub wrap at 2p.  That drops the
// conditional subtraction from every Fp multiplication, the MSM's inner operation.
// Zero tests accept both representatives of 0 (0 and p); canonical() gives the unique
// one where a value leaves the device.  Both moduli leave the top bit of the top limb
// clear (q < 2^(32N-1)), which the carry bounds below rely on: a + b never overflows N
// limbs, and the CIOS accumulator fits N + 1 limbs.
#pragma once
#include "prims.cuh"

template <class P>
struct fe {
    u32 v[P::N];

    HD static fe zero() {
        fe r;
#pragma unroll
        for (int i = 0; i < P::N; i++) r.v[i] = 0;
        return r;
    }
    // 1 in Montgomery form (R mod q).
    HD static fe one() {
        fe r;
#pragma unroll
        for (int i = 0; i < P::N; i++) r.v[i] = P::one(i);
        return r;
    }
    // R^2 mod q as raw limbs: mont_mul(x, R^2) = x*R, i.e. x to Montgomery form.
    HD static fe r2() {
        fe r;
#pragma unroll
        for (int i = 0; i < P::N; i++) r.v[i] = P::r2(i);
        return r;
    }
    // Raw limbs of the integer 1: mont_mul(x, 1) = x/R, i.e. x out of Montgomery form.
    HD static fe raw_one() {
        fe r = zero();
        r.v[0] = 1;
        return r;
    }
    HD bool is_zero() const {
        u32 acc = 0, accq = 0;
#pragma unroll
        for (int i = 0; i < P::N; i++) {
            acc |= v[i];
            accq |= v[i] ^ P::mod(i);
        }
        return acc == 0 || (P::LAZY && accq == 0);
    }
};

// The modulus a lazily reduced field wraps at: 2q for Fp, q for Fr.
template <class P>
HD constexpr u32 wrap_limb(int i) {
    return P::LAZY ? ((P::mod(i) << 1) | (i ? P::mod(i - 1) >> 31 : 0)) : P::mod(i);
}

// t - m if t >= m, else t, for m = q (WRAP = false) or the wrap modulus.  The subtraction
// always runs and a mask selects the result: no divergent branch in the hot loops.
template <class P, bool WRAP = false>
HD fe<P> reduce_once(const fe<P>& t) {
    constexpr int N = P::N;
    fe<P> s;
    s.v[0] = sub_cc(t.v[0], WRAP ? wrap_limb<P>(0) : P::mod(0));
#pragma unroll
    for (int i = 1; i < N; i++) s.v[i] = subc_cc(t.v[i], WRAP ? wrap_limb<P>(i) : P::mod(i));
    u32 borrow = subc(0, 0);  // 0xffffffff when t < q
    fe<P> r;
#pragma unroll
    for (int i = 0; i < N; i++) r.v[i] = (t.v[i] & borrow) | (s.v[i] & ~borrow);
    return r;
}

// The representative in [0, q): what leaves the device.
template <class P>
HD fe<P> canonical(const fe<P>& a) {
    return P::LAZY ? reduce_once<P>(a) : a;
}

template <class P>
HD bool operator==(const fe<P>& a, const fe<P>& b) {
    const fe<P> x = canonical(a), y = canonical(b);
    u32 acc = 0;
#pragma unroll
    for (int i = 0; i < P::N; i++) acc |= x.v[i] ^ y.v[i];
    return acc == 0;
}

template <class P>
HD fe<P> operator+(const fe<P>& a, const fe<P>& b) {
    constexpr int N = P::N;
    fe<P> t;
    t.v[0] = add_cc(a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < N - 1; i++) t.v[i] = addc_cc(a.v[i], b.v[i]);
    t.v[N - 1] = addc(a.v[N - 1], b.v[N - 1]);  // < 2 wrap < 2^(32N): no carry out
    return reduce_once<P, true>(t);
}

template <class P>
HD fe<P> operator-(const fe<P>& a, const fe<P>& b) {
    constexpr int N = P::N;
    fe<P> t;
    t.v[0] = sub_cc(a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < N; i++) t.v[i] = subc_cc(a.v[i], b.v[i]);
    u32 borrow = subc(0, 0);  // a < b: add the wrap modulus back
    fe<P> r;
    r.v[0] = add_cc(t.v[0], wrap_limb<P>(0) & borrow);
#pragma unroll
    for (int i = 1; i < N - 1; i++) r.v[i] = addc_cc(t.v[i], wrap_limb<P>(i) & borrow);
    r.v[N - 1] = addc(t.v[N - 1], wrap_limb<P>(N - 1) & borrow);
    return r;
}

template <class P>
HD fe<P> neg(const fe<P>& a) {
    return fe<P>::zero() - a;  // 0 - 0 stays 0
}

template <class P>
HD fe<P> dbl(const fe<P>& a) {
    return a + a;
}

// CIOS Montgomery multiplication: a*b/R mod q for a, b < q (< 2q for a lazy field).
//
// Row i adds a*b[i] and m*q to the accumulator t, m chosen so that t's low limb becomes
// zero, and drops that limb.  The schedule is built around one SASS instruction:
// IMAD.WIDE.U32.X, a 32x32 -> 64-bit multiply-add with carry in and carry out, which
// ptxas emits for a mad.lo.cc / madc.hi.cc pair of the same operands into an aligned
// register pair.  A product a[j]*b[i] lands on limbs j and j+1, so t is kept as two
// accumulators whose pairs never straddle: X gets the products of even a[j] (pairs
// X[j], X[j+1] at weights j, j+1) and Y those of odd a[j] (Y[k] at weight k + 1, pairs
// Y[j-1], Y[j]); t = X + Y*2^32 + x1 (a limb pending at weight 0, below).  Each row is
// then four carry chains of N/2 wide multiply-adds (a*b[i] and m*q into X and into Y)
// and no separate carry additions: about 2N^2 + 4N instructions per multiplication,
// where one mad.lo.cc and one madc.hi.cc per product cost about 4N^2 (each half
// needing its own IMAD plus an IADD3.X for the carry).
//
// Dropping the zero limb shifts every weight down by one, which swaps the parities: the
// next row's X is this Y as it stands, its Y is X[2..N-1] and X's carries, and X[1]
// (now at weight 0) is the pending limb x1, added into the new X[0] at the start of the
// next row; its carry (weight 1) is the first carry-in of that row's Y chain.
// Bounds: before a row t < 2q for a reduced field (a < q) and < 3q for a lazy one
// (a < 2q), so a row's sum stays below 3q*2^32 < 2^(32(N+1)) (3q < 2^(32N) for both
// moduli).  X, Y and the carries are non-negative parts of that sum, so Y < 2^(32N): the
// Y chains never carry out, and X's carries (at most 2 a row) sit in the limb that
// becomes Y[N-2].  The last row leaves the result (< 2q) as X + x1 + Y*2^32: one final
// addition chain, Y's top limb being zero.
template <class P>
HD fe<P> operator*(const fe<P>& a, const fe<P>& b) {
    constexpr int N = P::N;
    static_assert(N % 2 == 0, "limb pairs");
    u32 x[N], y[N], x1 = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u32 bi = b.v[i];
        u32 cx;
        if (i == 0) {  // t = 0: plain products, no carries
#pragma unroll
            for (int j = 0; j < N; j += 2) {
                x[j] = lo32(a.v[j], bi);
                x[j + 1] = hi32(a.v[j], bi);
                y[j] = lo32(a.v[j + 1], bi);
                y[j + 1] = hi32(a.v[j + 1], bi);
            }
            cx = 0;
        } else {
            // x1 into X[0]; its carry starts the Y chain (odd products, weights 1..N)
            x[0] = add_cc(x[0], x1);
#pragma unroll
            for (int j = 0; j < N; j += 2) {
                y[j] = madc_lo_cc(a.v[j + 1], bi, y[j]);
                y[j + 1] = j + 2 < N ? madc_hi_cc(a.v[j + 1], bi, y[j + 1]) : madc_hi(a.v[j + 1], bi, y[j + 1]);
            }
            // even products into X (weights 0..N-1), carry out into cx (weight N)
            x[0] = mad_lo_cc(a.v[0], bi, x[0]);
            x[1] = madc_hi_cc(a.v[0], bi, x[1]);
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                x[j] = madc_lo_cc(a.v[j], bi, x[j]);
                x[j + 1] = madc_hi_cc(a.v[j], bi, x[j + 1]);
            }
            cx = addc(0, 0);
        }
        const u32 m = x[0] * P::INV;
        // m*q: even limbs of q into X (X[0] becomes 0), odd ones into Y
        x[0] = mad_lo_cc(m, P::mod(0), x[0]);
        x[1] = madc_hi_cc(m, P::mod(0), x[1]);
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            x[j] = madc_lo_cc(m, P::mod(j), x[j]);
            x[j + 1] = madc_hi_cc(m, P::mod(j), x[j + 1]);
        }
        cx = addc(cx, 0);
        y[0] = mad_lo_cc(m, P::mod(1), y[0]);
        y[1] = madc_hi_cc(m, P::mod(1), y[1]);
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            y[j] = madc_lo_cc(m, P::mod(j + 1), y[j]);
            y[j + 1] = j + 2 < N ? madc_hi_cc(m, P::mod(j + 1), y[j + 1]) : madc_hi(m, P::mod(j + 1), y[j + 1]);
        }
        // drop the zero limb: the parities swap (renaming only, no instructions)
        x1 = x[1];
        u32 nx[N], ny[N];
#pragma unroll
        for (int k = 0; k < N; k++) nx[k] = y[k];
#pragma unroll
        for (int k = 0; k < N - 2; k++) ny[k] = x[k + 2];
        ny[N - 2] = cx;
        ny[N - 1] = 0;
#pragma unroll
        for (int k = 0; k < N; k++) { x[k] = nx[k]; y[k] = ny[k]; }
    }
    fe<P> r;
    r.v[0] = add_cc(x[0], x1);
#pragma unroll
    for (int k = 1; k < N - 1; k++) r.v[k] = addc_cc(x[k], y[k - 1]);
    r.v[N - 1] = addc(x[N - 1], y[N - 2]);  // y[N-1] = 0: the result is < 2q < 2^(32N)
    return P::LAZY ? r : reduce_once(r);
}

template <class P>
HD fe<P> sqr(const fe<P>& a) {
    return a * a;
}

// Fermat inverse a^(q-2); 0 maps to 0.  Only the batch normalisations use it (once per
// chunk of points), so it stays a plain square-and-multiply loop, not unrolled.
template <class P>
HD_NOINLINE fe<P> inverse(const fe<P> a) {
    fe<P> r = fe<P>::one();
#pragma unroll 1
    for (int i = P::N - 1; i >= 0; i--) {
        const u32 e = P::pm2(i);
#pragma unroll 1
        for (int bit = 31; bit >= 0; bit--) {
            r = r * r;
            if ((e >> bit) & 1u) r = r * a;
        }
    }
    return r;
}

// Global memory access: an element is N consecutive words (16-byte aligned rows: 32 B
// for Fr, 48 B for Fp), read and written as 16-byte vectors.
template <class P>
HD fe<P> load_fe(const u32* p) {
    fe<P> r;
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int i = 0; i < P::N / 4; i++) {
        uint4 q = __ldg(reinterpret_cast<const uint4*>(p) + i);
        r.v[4 * i] = q.x; r.v[4 * i + 1] = q.y; r.v[4 * i + 2] = q.z; r.v[4 * i + 3] = q.w;
    }
#else
    for (int i = 0; i < P::N; i++) r.v[i] = p[i];
#endif
    return r;
}

// Same as load_fe, for buffers the same kernel writes (no read-only cache path).
template <class P>
HD fe<P> load_fe_rw(const u32* p) {
    fe<P> r;
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int i = 0; i < P::N / 4; i++) {
        uint4 q = reinterpret_cast<const uint4*>(p)[i];
        r.v[4 * i] = q.x; r.v[4 * i + 1] = q.y; r.v[4 * i + 2] = q.z; r.v[4 * i + 3] = q.w;
    }
#else
    for (int i = 0; i < P::N; i++) r.v[i] = p[i];
#endif
    return r;
}

template <class P>
HD void store_fe(u32* p, const fe<P>& a) {
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int i = 0; i < P::N / 4; i++) {
        uint4 q = make_uint4(a.v[4 * i], a.v[4 * i + 1], a.v[4 * i + 2], a.v[4 * i + 3]);
        reinterpret_cast<uint4*>(p)[i] = q;
    }
#else
    for (int i = 0; i < P::N; i++) p[i] = a.v[i];
#endif
}

// The two fields of BLS12-381 (FrP, FpP: the generated parameter structs).
typedef fe<FrP> fr_t;
typedef fe<FpP> fp_t;
