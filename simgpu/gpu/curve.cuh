// The groups G1 (y^2 = x^3 + 4 over Fp) and G2 (y^2 = x^3 + 4(1 + u) over Fp2) of
// BLS12-381, in one set of formulas templated on the coordinate field F (fp_t or fp2_t).
//
// Affine points (x, y) in Montgomery form are what the MSM reads: 2 F values (24 words
// for G1, 48 for G2), and the point at infinity is (0, 0).  (0, 0) is on neither curve,
// and no point has y = 0 (neither group of points over its field has 2-torsion: both
// orders are odd), so y == 0 identifies infinity.
//
// Accumulators are XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity <=> ZZ = 0): a
// mixed addition costs 8M + 2S and a full one 12M + 2S, and neither needs the curve's b,
// which is why one template serves both groups (an M is 1 Fp product in G1, 3 in G2).
// Formulas: the explicit-formulas database, "madd-2008-s", "add-2008-s", "dbl-2008-s-1"
// and "mdbl-2008-s-1" for short Weierstrass curves with a = 0.  Their exceptional cases
// (P + P, P + (-P), infinity) are handled by the branches below, which random inputs
// almost never take but repeated bases and repeated scalars do.
#pragma once
#include "field.cuh"
#include "fp2.cuh"

template <class F>
struct aff_t {
    F x, y;
};

template <class F>
struct xyzz_t {
    F X, Y, ZZ, ZZZ;
};

typedef aff_t<fp_t> g1_aff;
typedef xyzz_t<fp_t> g1_xyzz;
typedef aff_t<fp2_t> g2_aff;
typedef xyzz_t<fp2_t> g2_xyzz;

// Words of one coordinate: 12 (Fp) or 24 (Fp2); rows are 2 (affine) or 4 (XYZZ) of them.
template <class F>
struct coord_words;
template <>
struct coord_words<fp_t> {
    static constexpr int W = 12;
};
template <bool C>
struct coord_words<fp2_base<C>> {
    static constexpr int W = 24;
};

HD void load_coord(fp_t& r, const u32* p) { r = load_fe<FpP>(p); }
template <bool C>
HD void load_coord(fp2_base<C>& r, const u32* p) {
    r.c0 = load_fe<FpP>(p);
    r.c1 = load_fe<FpP>(p + 12);
}
HD void load_coord_rw(fp_t& r, const u32* p) { r = load_fe_rw<FpP>(p); }
template <bool C>
HD void load_coord_rw(fp2_base<C>& r, const u32* p) {
    r.c0 = load_fe_rw<FpP>(p);
    r.c1 = load_fe_rw<FpP>(p + 12);
}
HD void store_coord(u32* p, const fp_t& a) { store_fe<FpP>(p, a); }
template <bool C>
HD void store_coord(u32* p, const fp2_base<C>& a) {
    store_fe<FpP>(p, a.c0);
    store_fe<FpP>(p + 12, a.c1);
}

template <class F>
HD xyzz_t<F> xyzz_inf() {
    xyzz_t<F> r;
    r.X = F::zero(); r.Y = F::zero(); r.ZZ = F::zero(); r.ZZZ = F::zero();
    return r;
}

template <class F>
HD bool is_inf(const xyzz_t<F>& p) { return p.ZZ.is_zero(); }
template <class F>
HD bool is_inf(const aff_t<F>& p) { return p.y.is_zero(); }

template <class F>
HD xyzz_t<F> xyzz_from_aff(const aff_t<F>& p) {
    if (is_inf(p)) return xyzz_inf<F>();
    xyzz_t<F> r;
    r.X = p.x; r.Y = p.y; r.ZZ = F::one(); r.ZZZ = F::one();
    return r;
}

template <class F>
HD aff_t<F> aff_neg(const aff_t<F>& p) {
    aff_t<F> r;
    r.x = p.x;
    r.y = neg(p.y);  // infinity (y = 0) stays infinity
    return r;
}

// 2P for P affine (mdbl-2008-s-1).
template <class F>
HD_NOINLINE xyzz_t<F> xyzz_dbl_aff(const aff_t<F> p) {
    if (is_inf(p)) return xyzz_inf<F>();
    F U = dbl(p.y);
    F V = sqr(U);
    F W = U * V;
    F S = p.x * V;
    F xx = sqr(p.x);
    F M = dbl(xx) + xx;
    xyzz_t<F> r;
    r.X = sqr(M) - dbl(S);
    r.Y = M * (S - r.X) - W * p.y;
    r.ZZ = V;
    r.ZZZ = W;
    return r;
}

// 2P for P in XYZZ (dbl-2008-s-1).  Infinity maps to ZZ = 0, i.e. infinity.
template <class F>
HD xyzz_t<F> xyzz_dbl_inl(const xyzz_t<F>& p) {
    F U = dbl(p.Y);
    F V = sqr(U);
    F W = U * V;
    F S = p.X * V;
    F xx = sqr(p.X);
    F M = dbl(xx) + xx;
    xyzz_t<F> r;
    r.X = sqr(M) - dbl(S);
    r.Y = M * (S - r.X) - W * p.Y;
    r.ZZ = V * p.ZZ;
    r.ZZZ = W * p.ZZZ;
    return r;
}

template <class F>
HD_NOINLINE xyzz_t<F> xyzz_dbl(const xyzz_t<F> p) { return xyzz_dbl_inl(p); }

// acc + Q for Q affine (madd-2008-s): the bucket accumulation's inner step, inlined
// there (xyzz_add_aff_inl) so the accumulator stays in registers across iterations.
// The products are ordered so that each input dies as early as it can (ZZ and ZZZ are
// replaced before Q is formed): G2's accumulator alone is 96 registers.
template <class F>
HD xyzz_t<F> xyzz_add_aff_inl(const xyzz_t<F>& acc, const aff_t<F>& q) {
    if (is_inf(q)) return acc;
    if (is_inf(acc)) return xyzz_from_aff(q);
    F P = q.x * acc.ZZ - acc.X;    // U2 - X1
    F R = q.y * acc.ZZZ - acc.Y;   // S2 - Y1
    if (P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl_aff(q);  // acc == q
        return xyzz_inf<F>();                     // acc == -q
    }
    F PP = sqr(P);
    F PPP = P * PP;
    xyzz_t<F> r;
    r.ZZ = acc.ZZ * PP;
    r.ZZZ = acc.ZZZ * PPP;
    F Q = acc.X * PP;
    r.X = sqr(R) - (PPP + dbl(Q));
    r.Y = R * (Q - r.X) - acc.Y * PPP;
    return r;
}

template <class F>
HD_NOINLINE xyzz_t<F> xyzz_add_aff(const xyzz_t<F> acc, const aff_t<F> q) { return xyzz_add_aff_inl(acc, q); }

// acc + Q, both XYZZ (add-2008-s): bucket merging and reduction (inlined in their
// loops: a call passes the structs through local memory).
template <class F>
HD xyzz_t<F> xyzz_add_inl(const xyzz_t<F>& acc, const xyzz_t<F>& q) {
    if (is_inf(q)) return acc;
    if (is_inf(acc)) return q;
    F U1 = acc.X * q.ZZ;
    F S1 = acc.Y * q.ZZZ;
    F P = q.X * acc.ZZ - U1;
    F R = q.Y * acc.ZZZ - S1;
    if (P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl(acc);
        return xyzz_inf<F>();
    }
    F PP = sqr(P);
    F PPP = P * PP;
    xyzz_t<F> r;
    r.ZZ = acc.ZZ * q.ZZ * PP;
    r.ZZZ = acc.ZZZ * q.ZZZ * PPP;
    F Q = U1 * PP;
    r.X = sqr(R) - (PPP + dbl(Q));
    r.Y = R * (Q - r.X) - S1 * PPP;
    return r;
}

template <class F>
HD_NOINLINE xyzz_t<F> xyzz_add(const xyzz_t<F> acc, const xyzz_t<F> q) { return xyzz_add_inl(acc, q); }

// k*P for a small k (the bucket reduction's segment offsets), double-and-add from the
// top bit of k.
template <class F>
HD xyzz_t<F> xyzz_mul_small_inl(const xyzz_t<F>& p, u32 k) {
    xyzz_t<F> r = p;
    int bit = 31;
    while (bit >= 0 && !((k >> bit) & 1u)) bit--;
    if (bit < 0) return xyzz_inf<F>();
#pragma unroll 1
    for (bit--; bit >= 0; bit--) {
        r = xyzz_dbl_inl(r);
        if ((k >> bit) & 1u) r = xyzz_add_inl(r, p);
    }
    return r;
}

template <class F>
HD_NOINLINE xyzz_t<F> xyzz_mul_small(const xyzz_t<F> p, u32 k) { return xyzz_mul_small_inl(p, k); }

// Rows: affine x, y; XYZZ X, Y, ZZ, ZZZ (coord_words<F>::W words each).
template <class F>
HD aff_t<F> load_aff(const u32* p) {
    constexpr int W = coord_words<F>::W;
    aff_t<F> r;
    load_coord(r.x, p);
    load_coord(r.y, p + W);
    return r;
}

template <class F>
HD void store_aff(u32* p, const aff_t<F>& a) {
    constexpr int W = coord_words<F>::W;
    store_coord(p, a.x);
    store_coord(p + W, a.y);
}

template <class F>
HD xyzz_t<F> load_xyzz(const u32* p) {
    constexpr int W = coord_words<F>::W;
    xyzz_t<F> r;
    load_coord_rw(r.X, p);
    load_coord_rw(r.Y, p + W);
    load_coord_rw(r.ZZ, p + 2 * W);
    load_coord_rw(r.ZZZ, p + 3 * W);
    return r;
}

template <class F>
HD void store_xyzz(u32* p, const xyzz_t<F>& a) {
    constexpr int W = coord_words<F>::W;
    store_coord(p, a.X);
    store_coord(p + W, a.Y);
    store_coord(p + 2 * W, a.ZZ);
    store_coord(p + 3 * W, a.ZZZ);
}
