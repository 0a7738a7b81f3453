// NTT family over Fr (BLS12-381 scalar field), in place, on vectors of n = 2^log_n
// elements of 8 words (Montgomery form).
//
// A transform is log_n radix-2 stages, grouped into passes of k <= 10 stages.  One pass
// is one launch: each block loads a tile of 2^tile_log elements into shared memory, runs
// its k stages there, and writes the tile back, so a 2^24 transform reads and writes the
// vector 3 times instead of 24.  In a pass whose last (DIF) or first (DIT) stage has
// half-span S, the elements {t*S*2^k + off + m*S : m < 2^k} form an independent radix-2^k
// group; a tile holds C = 2^(tile_log - k) groups with consecutive `off`, so that global
// reads are runs of C consecutive 32-byte elements.
//
// DIF (Gentleman-Sande) takes natural order to bit-reversed order; DIT (Cooley-Tukey)
// takes bit-reversed to natural.  Both use the twiddle w_2h^(p mod h) for a butterfly at
// position p of a stage with half-span h, read from one table tw[i] = w_N^i (i <= N/2)
// of the largest size N built so far.  The inverse transform uses w^-i = -w^(N/2 - i),
// so it reads the same table and swaps the butterfly's add and subtract.
//
// Optional scaling hooks multiply an element by a per-position factor on the first
// pass's load ("pre") or the last pass's store ("post"): a constant (Montgomery
// conversion, n^-1) or a power c*g^idx read as lo[idx & 1023] * hi[idx >> 10] (coset
// shifts), with idx the position or its bit-reversal.  They fold to_montgomery, 1/n and
// the coset shifts of Groth16's H computation into the transforms' own passes.
#include "field.cuh"

#define NTT_THREADS 256
#define NTT_TILE_LOG_MAX 10
#define NTT_TILE_MAX (1 << NTT_TILE_LOG_MAX)
#define SCALE_LO_LOG 10

struct ntt_scale {
    u32 mode;    // 0 none, 1 constant lo[0], 2 power table lo[idx & 1023] * hi[idx >> 10]
    u32 bitrev;  // idx = bit-reversed position instead of the position
    const u32* lo;
    const u32* hi;
};

struct ntt_pass_params {
    u32 log_n, log_S, k, tile_log;
    u32 inverse;
    const u32* tw;
    u32 tw_log;
    ntt_scale pre, post;
};

HD fr_t scale_factor(const ntt_scale& s, u32 pos, u32 log_n) {
    if (s.mode == 1) return load_fe<FrP>(s.lo);
    u32 idx = s.bitrev ? (log_n ? brev32(pos) >> (32 - log_n) : 0) : pos;
    fr_t lo = load_fe<FrP>(s.lo + 8 * (idx & ((1u << SCALE_LO_LOG) - 1)));
    fr_t hi = load_fe<FrP>(s.hi + 8 * (idx >> SCALE_LO_LOG));
    return lo * hi;
}

// Whether consecutive load slots walk along `off` (c) or along m: along c when a tile's
// C groups are >= C apart in memory... i.e. when S >= C the C groups are contiguous runs.
HD bool c_fast(const ntt_pass_params& p) { return (p.log_S + p.k) >= p.tile_log; }

// Position in the vector of tile slot L of block blk.  Slot L is also the element's index
// in shared memory, so load, stages and store agree on one mapping.
HD u32 slot_pos(const ntt_pass_params& p, u32 blk, u32 L, u32* c_out, u32* m_out) {
    const u32 clog = p.tile_log - p.k;
    u32 c, m;
    if (c_fast(p)) { c = L & ((1u << clog) - 1); m = L >> clog; }
    else { m = L & ((1u << p.k) - 1); c = L >> p.k; }
    const u32 g = (blk << clog) + c;
    const u32 t = g >> p.log_S;
    const u32 off = g & ((1u << p.log_S) - 1);
    *c_out = c; *m_out = m;
    return (t << (p.log_S + p.k)) + off + (m << p.log_S);
}

HD u32 slot_of(const ntt_pass_params& p, u32 c, u32 m) {
    const u32 clog = p.tile_log - p.k;
    return c_fast(p) ? ((m << clog) + c) : ((c << p.k) + m);
}

// Shared memory is structure-of-arrays (limb l of slot e at sh[l * NTT_TILE_MAX + e]):
// consecutive slots are consecutive words, so a warp's 32-bit accesses hit 32 banks.
HD fr_t sh_load(const u32* sh, u32 e) {
    fr_t r;
#pragma unroll
    for (int l = 0; l < 8; l++) r.v[l] = sh[l * NTT_TILE_MAX + e];
    return r;
}
HD void sh_store(u32* sh, u32 e, const fr_t& a) {
#pragma unroll
    for (int l = 0; l < 8; l++) sh[l * NTT_TILE_MAX + e] = a.v[l];
}

HD void ntt_load_phase(const ntt_pass_params& p, const u32* x, u32* sh, u32 blk, u32 tid,
                       u32 nthreads) {
    const u32 tile = 1u << p.tile_log;
    for (u32 L = tid; L < tile; L += nthreads) {
        u32 c, m;
        const u32 pos = slot_pos(p, blk, L, &c, &m);
        fr_t v = load_fe<FrP>(x + 8 * (u64)pos);
        if (p.pre.mode) v = v * scale_factor(p.pre, pos, p.log_n);
        sh_store(sh, L, v);
    }
}

HD void ntt_store_phase(const ntt_pass_params& p, u32* x, const u32* sh, u32 blk, u32 tid,
                        u32 nthreads) {
    const u32 tile = 1u << p.tile_log;
    for (u32 L = tid; L < tile; L += nthreads) {
        u32 c, m;
        const u32 pos = slot_pos(p, blk, L, &c, &m);
        fr_t v = sh_load(sh, L);
        if (p.post.mode) v = v * scale_factor(p.post, pos, p.log_n);
        store_fe<FrP>(x + 8 * (u64)pos, v);
    }
}

// One radix-2 stage (half-span h = S * 2^i) over the tile: each thread takes butterflies
// b = tid, tid + nthreads, ...; consecutive b are consecutive slots (conflict-free).
template <bool DIF>
HD void ntt_stage_phase(const ntt_pass_params& p, u32* sh, u32 blk, u32 tid, u32 nthreads,
                        u32 i) {
    const u32 clog = p.tile_log - p.k;
    const u32 nb = 1u << (p.tile_log - 1);
    const u32 lowmask = (1u << i) - 1;
    const u32 tw_shift = p.tw_log - 1 - p.log_S - i;
    for (u32 b = tid; b < nb; b += nthreads) {
        u32 c, j;
        if (c_fast(p)) { c = b & ((1u << clog) - 1); j = b >> clog; }
        else { j = b & ((1u << (p.k - 1)) - 1); c = b >> (p.k - 1); }
        const u32 m0 = ((j >> i) << (i + 1)) | (j & lowmask);
        const u32 m1 = m0 | (1u << i);
        const u32 e0 = slot_of(p, c, m0), e1 = slot_of(p, c, m1);
        const u32 off = ((blk << clog) + c) & ((1u << p.log_S) - 1);
        u32 idx = (off + ((m0 & lowmask) << p.log_S)) << tw_shift;
        if (p.inverse) idx = (1u << (p.tw_log - 1)) - idx;
        const fr_t w = load_fe<FrP>(p.tw + 8 * idx);
        const fr_t u = sh_load(sh, e0);
        const fr_t v = sh_load(sh, e1);
        if (DIF) {
            sh_store(sh, e0, u + v);
            sh_store(sh, e1, (p.inverse ? v - u : u - v) * w);
        } else {
            const fr_t t = v * w;
            sh_store(sh, e0, p.inverse ? u - t : u + t);
            sh_store(sh, e1, p.inverse ? u + t : u - t);
        }
    }
}

#if defined(__CUDACC__)
template <bool DIF>
__device__ __forceinline__ void ntt_pass_kernel(const u64* ptrs, const ntt_pass_params& p) {
    __shared__ u32 sh[8 * NTT_TILE_MAX];
    u32* x = reinterpret_cast<u32*>(ptrs[blockIdx.y]);
    ntt_load_phase(p, x, sh, blockIdx.x, threadIdx.x, blockDim.x);
    __syncthreads();
    for (u32 s = 0; s < p.k; s++) {
        ntt_stage_phase<DIF>(p, sh, blockIdx.x, threadIdx.x, blockDim.x, DIF ? p.k - 1 - s : s);
        __syncthreads();
    }
    ntt_store_phase(p, x, sh, blockIdx.x, threadIdx.x, blockDim.x);
}

#define NTT_PASS_ARGS                                                                   \
    const u64 *ptrs, u32 log_n, u32 log_S, u32 k, u32 tile_log, u32 inverse,           \
        const u32 *tw, u32 tw_log, u32 pre_mode, u32 pre_bitrev, const u32 *pre_lo,     \
        const u32 *pre_hi, u32 post_mode, u32 post_bitrev, const u32 *post_lo,          \
        const u32 *post_hi
#define NTT_PASS_PARAMS                                                                 \
    ntt_pass_params p = {log_n, log_S, k, tile_log, inverse, tw, tw_log,               \
                         {pre_mode, pre_bitrev, pre_lo, pre_hi},                        \
                         {post_mode, post_bitrev, post_lo, post_hi}}

extern "C" __global__ void __launch_bounds__(NTT_THREADS) ntt_dif_pass(NTT_PASS_ARGS) {
    NTT_PASS_PARAMS;
    ntt_pass_kernel<true>(ptrs, p);
}

extern "C" __global__ void __launch_bounds__(NTT_THREADS) ntt_dit_pass(NTT_PASS_ARGS) {
    NTT_PASS_PARAMS;
    ntt_pass_kernel<false>(ptrs, p);
}
#endif

// Bit-reversal permutation in place (each pair swapped by the thread of its lower index;
// an Fr element is exactly one 32-byte sector, so the scattered accesses waste no
// bandwidth), optionally multiplying every element by a constant (from_montgomery).
HD void bitrev_one(u32* x, u32 i, u32 log_n, const u32* cst) {
    const u32 j = log_n ? brev32(i) >> (32 - log_n) : 0;
    if (j < i) return;
    fr_t a = load_fe_rw<FrP>(x + 8 * (u64)i);
    if (cst) a = a * load_fe<FrP>(cst);
    if (j == i) { store_fe<FrP>(x + 8 * (u64)i, a); return; }
    fr_t b = load_fe_rw<FrP>(x + 8 * (u64)j);
    if (cst) b = b * load_fe<FrP>(cst);
    store_fe<FrP>(x + 8 * (u64)i, b);
    store_fe<FrP>(x + 8 * (u64)j, a);
}

// Bit reversal by tiles, for log_n >= 2 * BR_B: an index is (h, m, l) with h and l of
// BR_B bits, and rev(h, m, l) = (rev(l), rev(m), rev(h)), so tile m -- the 2^(2 BR_B)
// elements with middle bits m, read as 2^BR_B runs of 2^BR_B consecutive elements --
// goes whole to tile rev(m), transposed.  A block takes tile m and its partner rev(m)
// (the block of the larger m has nothing to do), loads both into shared memory, then
// writes each where the other was: in place, and every global access a run of 16
// consecutive 32-byte elements, where the element-by-element version above writes 32
// bytes at scattered addresses (measured at about 30% of the copy bandwidth at 2^24).
#define BR_B 4
#define BR_N (1u << BR_B)
#define BR_TILE (BR_N * BR_N)
#define BR_ROW (BR_N + 1)  // shared-memory row pitch: the transposed reads hit distinct banks
#define BR_SH (BR_N * BR_ROW)

HD u32 rev_bits(u32 x, u32 bits) { return bits ? brev32(x) >> (32 - bits) : 0; }

// Thread t's element of tile m (and of tile rev(m)) into shared memory, times cst if given.
// sh holds two tiles of 8 limb planes of BR_SH words each.
HD void bitrev_tile_load(const u32* x, u32* sh, u32 log_n, u32 m, u32 t, const u32* cst) {
    const u32 mid = log_n - 2 * BR_B, mr = rev_bits(m, mid);
    const u32 h = t >> BR_B, l = t & (BR_N - 1);
    for (u32 k = 0; k < (mr == m ? 1u : 2u); k++) {
        const u32 mm = k ? mr : m;
        fr_t v = load_fe_rw<FrP>(x + 8 * (u64)((h << (log_n - BR_B)) | (mm << BR_B) | l));
        if (cst) v = v * load_fe<FrP>(cst);
        u32* tile = sh + k * 8 * BR_SH;
#pragma unroll
        for (int w = 0; w < 8; w++) tile[w * BR_SH + h * BR_ROW + l] = v.v[w];
    }
}

// Thread t writes element t of the destination tiles: tile rev(m) from tile m, and tile m
// from tile rev(m).  Destination (h2, l2) holds source (rev(l2), rev(h2)).
HD void bitrev_tile_store(u32* x, const u32* sh, u32 log_n, u32 m, u32 t) {
    const u32 mid = log_n - 2 * BR_B, mr = rev_bits(m, mid);
    const u32 h2 = t >> BR_B, l2 = t & (BR_N - 1);
    const u32 e = rev_bits(l2, BR_B) * BR_ROW + rev_bits(h2, BR_B);
    for (u32 k = 0; k < (mr == m ? 1u : 2u); k++) {
        const u32 dst = k ? m : mr;
        const u32* tile = sh + k * 8 * BR_SH;
        fr_t v;
#pragma unroll
        for (int w = 0; w < 8; w++) v.v[w] = tile[w * BR_SH + e];
        store_fe<FrP>(x + 8 * (u64)((h2 << (log_n - BR_B)) | (dst << BR_B) | l2), v);
    }
}

// x[i] = x[i] * c[0] (to/from Montgomery form, scaling).
HD void mul_const_one(u32* x, u64 i, const u32* cst) {
    store_fe<FrP>(x + 8 * i, load_fe_rw<FrP>(x + 8 * i) * load_fe<FrP>(cst));
}

// a = (a * b - c) * zinv: Groth16's quotient on the coset, where Z(g w^i) = g^n - 1 is
// the same for every i, so Z^-1 is one constant.
HD void h_pointwise_one(u32* a, const u32* b, const u32* c, u64 i, const u32* zinv) {
    fr_t r = load_fe_rw<FrP>(a + 8 * i) * load_fe<FrP>(b + 8 * i) - load_fe<FrP>(c + 8 * i);
    store_fe<FrP>(a + 8 * i, r * load_fe<FrP>(zinv));
}

// tw[i] = lo[i & 1023] * hi[i >> 10]: the twiddle table from two short power tables.
HD void twiddle_one(u32* tw, u64 i, const u32* lo, const u32* hi) {
    store_fe<FrP>(tw + 8 * i, load_fe<FrP>(lo + 8 * (i & 1023)) * load_fe<FrP>(hi + 8 * (i >> 10)));
}

#if defined(__CUDACC__)
extern "C" __global__ void ntt_bitrev(const u64* ptrs, u32 log_n, u32 use_cst, const u32* cst) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    bitrev_one(reinterpret_cast<u32*>(ptrs[blockIdx.y]), i, log_n, use_cst ? cst : nullptr);
}

extern "C" __global__ void __launch_bounds__(BR_TILE)
ntt_bitrev_tiled(const u64* ptrs, u32 log_n, u32 use_cst, const u32* cst) {
    __shared__ u32 sh[2 * 8 * BR_SH];
    const u32 m = blockIdx.x;
    if (rev_bits(m, log_n - 2 * BR_B) < m) return;  // the partner's block does this pair
    u32* x = reinterpret_cast<u32*>(ptrs[blockIdx.y]);
    bitrev_tile_load(x, sh, log_n, m, threadIdx.x, use_cst ? cst : nullptr);
    __syncthreads();
    bitrev_tile_store(x, sh, log_n, m, threadIdx.x);
}

extern "C" __global__ void fr_mul_const(u32* x, u64 count, const u32* cst) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) mul_const_one(x, i, cst);
}

extern "C" __global__ void fr_h_pointwise(u32* a, const u32* b, const u32* c, u64 count,
                                          const u32* zinv) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) h_pointwise_one(a, b, c, i, zinv);
}

extern "C" __global__ void ntt_twiddles(u32* tw, u64 count, const u32* lo, const u32* hi) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) twiddle_one(tw, i, lo, hi);
}
#endif
