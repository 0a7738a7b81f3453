// G1 of BLS12-381 (y^2 = x^3 + 4 over Fp) on top of field.cuh.
//
// Affine points (x, y) in Montgomery form are what the MSM reads: 24 words, and the
// point at infinity is (0, 0).  (0, 0) is not on the curve, and no point has y = 0
// (the curve has no 2-torsion: its order is odd), so y == 0 identifies infinity.
//
// Accumulators are XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity <=> ZZ = 0): a
// mixed addition costs 8M + 2S and a full one 12M + 2S, and neither needs the curve's b.
// Formulas: the explicit-formulas database, "madd-2008-s", "add-2008-s", "dbl-2008-s-1"
// and "mdbl-2008-s-1" for short Weierstrass curves with a = 0.  Their exceptional cases
// (P + P, P + (-P), infinity) are handled by the branches below, which random inputs
// almost never take but repeated bases and repeated scalars do.
#pragma once
#include "field.cuh"

struct g1_aff {
    fp_t x, y;
};

struct g1_xyzz {
    fp_t X, Y, ZZ, ZZZ;
};

HD g1_xyzz xyzz_inf() {
    g1_xyzz r;
    r.X = fp_t::zero(); r.Y = fp_t::zero(); r.ZZ = fp_t::zero(); r.ZZZ = fp_t::zero();
    return r;
}

HD bool is_inf(const g1_xyzz& p) { return p.ZZ.is_zero(); }
HD bool is_inf(const g1_aff& p) { return p.y.is_zero(); }

HD g1_xyzz xyzz_from_aff(const g1_aff& p) {
    if (is_inf(p)) return xyzz_inf();
    g1_xyzz r;
    r.X = p.x; r.Y = p.y; r.ZZ = fp_t::one(); r.ZZZ = fp_t::one();
    return r;
}

HD g1_aff aff_neg(const g1_aff& p) {
    g1_aff r;
    r.x = p.x;
    r.y = neg(p.y);  // infinity (y = 0) stays infinity
    return r;
}

// 2P for P affine (mdbl-2008-s-1).
HD_NOINLINE g1_xyzz xyzz_dbl_aff(const g1_aff p) {
    if (is_inf(p)) return xyzz_inf();
    fp_t U = dbl(p.y);
    fp_t V = sqr(U);
    fp_t W = U * V;
    fp_t S = p.x * V;
    fp_t xx = sqr(p.x);
    fp_t M = dbl(xx) + xx;
    g1_xyzz r;
    r.X = sqr(M) - dbl(S);
    r.Y = M * (S - r.X) - W * p.y;
    r.ZZ = V;
    r.ZZZ = W;
    return r;
}

// 2P for P in XYZZ (dbl-2008-s-1).  Infinity maps to ZZ = 0, i.e. infinity.
HD g1_xyzz xyzz_dbl_inl(const g1_xyzz& p) {
    fp_t U = dbl(p.Y);
    fp_t V = sqr(U);
    fp_t W = U * V;
    fp_t S = p.X * V;
    fp_t xx = sqr(p.X);
    fp_t M = dbl(xx) + xx;
    g1_xyzz r;
    r.X = sqr(M) - dbl(S);
    r.Y = M * (S - r.X) - W * p.Y;
    r.ZZ = V * p.ZZ;
    r.ZZZ = W * p.ZZZ;
    return r;
}

HD_NOINLINE g1_xyzz xyzz_dbl(const g1_xyzz p) { return xyzz_dbl_inl(p); }

// acc + Q for Q affine (madd-2008-s): the bucket accumulation's inner step, inlined
// there (xyzz_add_aff_inl) so the accumulator stays in registers across iterations.
HD g1_xyzz xyzz_add_aff_inl(const g1_xyzz& acc, const g1_aff& q) {
    if (is_inf(q)) return acc;
    if (is_inf(acc)) return xyzz_from_aff(q);
    fp_t P = q.x * acc.ZZ - acc.X;    // U2 - X1
    fp_t R = q.y * acc.ZZZ - acc.Y;   // S2 - Y1
    if (P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl_aff(q);  // acc == q
        return xyzz_inf();                        // acc == -q
    }
    fp_t PP = sqr(P);
    fp_t PPP = P * PP;
    fp_t Q = acc.X * PP;
    g1_xyzz r;
    r.X = sqr(R) - (PPP + dbl(Q));
    r.Y = R * (Q - r.X) - acc.Y * PPP;
    r.ZZ = acc.ZZ * PP;
    r.ZZZ = acc.ZZZ * PPP;
    return r;
}

HD_NOINLINE g1_xyzz xyzz_add_aff(const g1_xyzz acc, const g1_aff q) { return xyzz_add_aff_inl(acc, q); }

// acc + Q, both XYZZ (add-2008-s): bucket merging and reduction (inlined in their
// loops: a call passes 192-byte structs through local memory).
HD g1_xyzz xyzz_add_inl(const g1_xyzz& acc, const g1_xyzz& q) {
    if (is_inf(q)) return acc;
    if (is_inf(acc)) return q;
    fp_t U1 = acc.X * q.ZZ;
    fp_t S1 = acc.Y * q.ZZZ;
    fp_t P = q.X * acc.ZZ - U1;
    fp_t R = q.Y * acc.ZZZ - S1;
    if (P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl(acc);
        return xyzz_inf();
    }
    fp_t PP = sqr(P);
    fp_t PPP = P * PP;
    fp_t Q = U1 * PP;
    g1_xyzz r;
    r.X = sqr(R) - (PPP + dbl(Q));
    r.Y = R * (Q - r.X) - S1 * PPP;
    r.ZZ = acc.ZZ * q.ZZ * PP;
    r.ZZZ = acc.ZZZ * q.ZZZ * PPP;
    return r;
}

HD_NOINLINE g1_xyzz xyzz_add(const g1_xyzz acc, const g1_xyzz q) { return xyzz_add_inl(acc, q); }

// k*P for a small k (the bucket reduction's segment offsets), double-and-add from the
// top bit of k.
HD g1_xyzz xyzz_mul_small_inl(const g1_xyzz& p, u32 k) {
    g1_xyzz r = p;
    int bit = 31;
    while (bit >= 0 && !((k >> bit) & 1u)) bit--;
    if (bit < 0) return xyzz_inf();
#pragma unroll 1
    for (bit--; bit >= 0; bit--) {
        r = xyzz_dbl_inl(r);
        if ((k >> bit) & 1u) r = xyzz_add_inl(r, p);
    }
    return r;
}

HD_NOINLINE g1_xyzz xyzz_mul_small(const g1_xyzz p, u32 k) { return xyzz_mul_small_inl(p, k); }

HD g1_aff load_aff(const u32* p) {
    g1_aff r;
    r.x = load_fe<FpP>(p);
    r.y = load_fe<FpP>(p + 12);
    return r;
}

HD void store_aff(u32* p, const g1_aff& a) {
    store_fe<FpP>(p, a.x);
    store_fe<FpP>(p + 12, a.y);
}

// XYZZ rows are 48 words: X, Y, ZZ, ZZZ.
HD g1_xyzz load_xyzz(const u32* p) {
    g1_xyzz r;
    r.X = load_fe_rw<FpP>(p);
    r.Y = load_fe_rw<FpP>(p + 12);
    r.ZZ = load_fe_rw<FpP>(p + 24);
    r.ZZZ = load_fe_rw<FpP>(p + 36);
    return r;
}

HD void store_xyzz(u32* p, const g1_xyzz& a) {
    store_fe<FpP>(p, a.X);
    store_fe<FpP>(p + 12, a.Y);
    store_fe<FpP>(p + 24, a.ZZ);
    store_fe<FpP>(p + 36, a.ZZZ);
}
