// Fp2 = Fp[u] / (u^2 + 1), the field of G2's coordinates, over the Fp of field.cuh.
//
// An element c0 + c1 u is two Fp values in Montgomery form (24 words: c0, then c1, the
// order of arkworks' xy encoding), each lazily reduced to [0, 2p) as field.cuh keeps Fp.
// The Fp multiplication accepts inputs below 2p only, so the sums that feed products
// (Karatsuba's a0 + a1) go through Fp's reducing addition, never a raw limb add.
//
// Two types with one arithmetic: fp2_t inlines its products (the G2 bucket
// accumulation, where they are the work), fp2_call_t makes each product a call
// (the G2 reductions: a full XYZZ addition inlined is 42 Fp products, some 16k
// instructions, and kernels built of a few of those spilled kilobytes and took ptxas
// minutes to compile, for a phase that does a few percent of a G2 MSM's additions).
#pragma once
#include "field.cuh"

template <bool CALL>
struct fp2_base {
    fp_t c0, c1;

    HD static fp2_base zero() { return {fp_t::zero(), fp_t::zero()}; }
    HD static fp2_base one() { return {fp_t::one(), fp_t::zero()}; }
    HD bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
};

typedef fp2_base<false> fp2_t;
typedef fp2_base<true> fp2_call_t;

template <bool C>
HD fp2_base<C> operator+(const fp2_base<C>& a, const fp2_base<C>& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
template <bool C>
HD fp2_base<C> operator-(const fp2_base<C>& a, const fp2_base<C>& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
template <bool C>
HD fp2_base<C> neg(const fp2_base<C>& a) { return {neg(a.c0), neg(a.c1)}; }
template <bool C>
HD fp2_base<C> dbl(const fp2_base<C>& a) { return {dbl(a.c0), dbl(a.c1)}; }

// (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u:
// three Fp products (Karatsuba) instead of four.
HD void fp2_mul_inl(fp_t& r0, fp_t& r1, const fp_t& a0, const fp_t& a1, const fp_t& b0, const fp_t& b1) {
    const fp_t t0 = a0 * b0, t1 = a1 * b1;
    const fp_t s = (a0 + a1) * (b0 + b1);
    r0 = t0 - t1;
    r1 = s - (t0 + t1);
}

// (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u: two Fp products.
HD void fp2_sqr_inl(fp_t& r0, fp_t& r1, const fp_t& a0, const fp_t& a1) {
    const fp_t t = a0 * a1;
    r0 = (a0 + a1) * (a0 - a1);
    r1 = dbl(t);
}

HD_NOINLINE fp2_base<true> fp2_mul_call(const fp2_base<true> a, const fp2_base<true> b) {
    fp2_base<true> r;
    fp2_mul_inl(r.c0, r.c1, a.c0, a.c1, b.c0, b.c1);
    return r;
}

HD_NOINLINE fp2_base<true> fp2_sqr_call(const fp2_base<true> a) {
    fp2_base<true> r;
    fp2_sqr_inl(r.c0, r.c1, a.c0, a.c1);
    return r;
}

template <bool C>
HD fp2_base<C> operator*(const fp2_base<C>& a, const fp2_base<C>& b) {
    if constexpr (C) return fp2_mul_call(a, b);
    fp2_base<C> r;
    fp2_mul_inl(r.c0, r.c1, a.c0, a.c1, b.c0, b.c1);
    return r;
}

template <bool C>
HD fp2_base<C> sqr(const fp2_base<C>& a) {
    if constexpr (C) return fp2_sqr_call(a);
    fp2_base<C> r;
    fp2_sqr_inl(r.c0, r.c1, a.c0, a.c1);
    return r;
}

template <bool C>
HD bool operator==(const fp2_base<C>& a, const fp2_base<C>& b) { return a.c0 == b.c0 && a.c1 == b.c1; }

template <bool C>
HD fp2_base<C> canonical(const fp2_base<C>& a) { return {canonical(a.c0), canonical(a.c1)}; }
