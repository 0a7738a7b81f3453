// Multi-scalar multiplication sum_i s_i * P_i by the bucket (Pippenger) method, for G1
// and G2 (the group-dependent steps are templates on the coordinate field, curve.cuh;
// digits and sorting are the same for both).
//
//  1. msm_count: each scalar is cut into nwin = ceil(256/c) signed c-bit digits
//     d in [-(2^(c-1) - 1), 2^(c-1)] (a digit above 2^(c-1) becomes d - 2^c and carries
//     one into the next window), which halves the buckets: |d| selects one of
//     B = 2^(c-1) buckets of its window, the sign negates the point (y -> -y is free).
//     Zero digits are skipped.  Counts per (window, bucket) are atomics, aggregated per
//     warp when lanes hit the same bucket (repeated scalars) so one counter does not
//     serialise a warp.
//  2. host: exclusive prefix sums of the counts give each bucket's slice.
//  3. msm_scatter: a counting sort by atomics: the entry i | sign << 31 goes into its
//     bucket's slice.  Order inside a bucket is arbitrary; addition commutes.
//  4. msm_accumulate: thread t adds the T sorted entries [t*T, (t+1)*T) (mixed XYZZ
//     additions), writing one partial sum per bucket it touches.  Chunks of entries,
//     not buckets, are the unit of work: every thread does T additions, and a bucket of
//     millions of points (all scalars equal) is spread over many threads like any other.
//  5. msm_reduce: each bucket's partial sums, cut into pieces of T, are added (full XYZZ
//     additions), in rounds until every bucket has one sum.  Each round divides the
//     longest bucket's count by T.
//  6. msm_bucket_sums: the window sum sum_b (b+1) S_b by running sums, in parallel over
//     segments of L buckets: a segment starting at bucket lo contributes
//     sum (b - lo + 1) S_b (running sum) + lo * sum S_b.  The first kernel writes both
//     running sums; msm_seg_offsets multiplies the second by lo (a short double-and-
//     add) in a kernel of its own, so that neither holds both in registers.
//     msm_reduce then adds each window's 2 * (B / L) rows.
//  7. host: the nwin window sums W_k are combined as sum_k 2^(c k) W_k (arkworks).
#include "curve.cuh"

// Word i of a scalar held in registers; a select chain instead of an indexed array keeps
// the scalar out of local memory.
HD u32 scalar_word(const u32 s[8], u32 i) {
    u32 r = 0;
#pragma unroll
    for (u32 j = 0; j < 8; j++) r = (i == j) ? s[j] : r;
    return r;
}

// Bits [bit, bit + c) of the 256-bit scalar (zero past bit 255), c <= 31.
HD u32 window_bits(const u32 s[8], u32 bit, u32 c) {
    const u32 w = bit >> 5, sh = bit & 31;
    u32 v = scalar_word(s, w) >> sh;
    if (sh) v |= scalar_word(s, w + 1) << (32 - sh);
    return v & ((1u << c) - 1);
}

HD void load_scalar(u32 s[8], const u32* p) {
#if defined(__CUDA_ARCH__)
    uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
    uint4 b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
    s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w;
    s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;
#else
    for (int j = 0; j < 8; j++) s[j] = p[j];
#endif
}

// Signed digit of window k, updating the carry.  Returns key = k*B + |d| - 1 and the
// sign, or key = NO_KEY for a zero digit.
#define NO_KEY 0xffffffffu
HD u32 digit_key(const u32 s[8], u32 k, u32 c, u32* carry, u32* sign) {
    const u32 B = 1u << (c - 1);
    u32 v = window_bits(s, k * c, c) + *carry;
    *carry = 0;
    *sign = 0;
    if (v > B) { v = (1u << c) - v; *carry = 1; *sign = 1; }
    return v ? k * B + v - 1 : NO_KEY;
}

#if defined(__CUDA_ARCH__)
// arr[key] += 1 for every lane with key != NO_KEY; returns the old value plus this lane's
// rank among lanes of the same key.  All 32 lanes must call it together.
__device__ __forceinline__ u32 warp_agg_inc(u32* arr, u32 key) {
    const u32 peers = __match_any_sync(0xffffffffu, key);
    const u32 lane = threadIdx.x & 31;
    const u32 leader = __ffs(peers) - 1;
    u32 base = 0;
    if (lane == leader && key != NO_KEY) base = atomicAdd(arr + key, __popc(peers));
    base = __shfl_sync(0xffffffffu, base, leader);
    return base + __popc(peers & ((1u << lane) - 1));
}
#else
inline u32 warp_agg_inc(u32* arr, u32 key) { return key != NO_KEY ? arr[key]++ : 0; }
#endif

// One scalar's digits: counts (scatter = false) or placement (scatter = true).  A scalar
// >= 2^255 would carry out of the top window; it raises *overflow instead.
HD void msm_digits_one(const u32* scalars, u32 n, u32 i, u32 c, u32 nwin, u32* counts,
                       u32* sorted, bool scatter, u32* overflow) {
    u32 s[8];
    const bool valid = i < n;
    if (valid) load_scalar(s, scalars + 8 * (u64)i);
    else for (int j = 0; j < 8; j++) s[j] = 0;
    u32 carry = 0;
    for (u32 k = 0; k < nwin; k++) {
        u32 sign;
        const u32 key = digit_key(s, k, c, &carry, &sign);
        const u32 pos = warp_agg_inc(counts, key);
        if (scatter && key != NO_KEY) sorted[pos] = i | (sign << 31);
    }
    if (carry) *overflow = 1;
}

// Largest b < nb with off[b] <= x (off nondecreasing, off[0] = 0 <= x < off[nb]): the
// bucket whose slice of pieces contains piece x.
HD u32 find_group(const u32* off, u32 nb, u32 x) {
    u32 lo = 0, hi = nb;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (off[mid] <= x) lo = mid; else hi = mid;
    }
    return lo;
}

// Thread t adds the sorted entries [t*T, (t+1)*T): exactly T points per thread whatever
// the bucket sizes, so no warp waits on one long bucket.  Where a bucket ends inside the
// chunk the thread writes its partial sum and starts the next.  The partial of (thread t,
// bucket b) goes to slot rank[b] + t, rank[b] = number of non-empty buckets before b:
// unique (a later thread never sees an earlier bucket), fewer than nthreads + non-empty
// buckets, and bucket b's partials are the contiguous slots rank[b] + t_first .. + t_last.
template <class F>
HD void msm_accumulate_one(const u32* bases, const u32* sorted, const u32* bucket_off,
                           const u32* rank, u32 nb, u32 T, u32 t, u32* out) {
    constexpr u64 AW = 2 * coord_words<F>::W, XW = 4 * coord_words<F>::W;
    const u32 total = bucket_off[nb];
    const u32 q0 = t * T;
    if (q0 >= total) return;
    const u32 q1 = q0 + T < total ? q0 + T : total;
    u32 b = find_group(bucket_off, nb, q0);
    u32 end_b = bucket_off[b + 1];
    xyzz_t<F> acc = xyzz_inf<F>();
    for (u32 q = q0; q < q1; q++) {
        if (q == end_b) {  // bucket b is complete in this chunk: flush, find the next one
            store_xyzz(out + XW * (rank[b] + t), acc);
            acc = xyzz_inf<F>();
            b = find_group(bucket_off, nb, q);
            end_b = bucket_off[b + 1];
        }
        const u32 e = sorted[q];
        aff_t<F> p = load_aff<F>(bases + AW * (e & 0x7fffffffu));
        if (e >> 31) p = aff_neg(p);
        acc = xyzz_add_aff_inl(acc, p);
    }
    store_xyzz(out + XW * (rank[b] + t), acc);
}

// Where msm_accumulate left bucket b's partial sums: slots [start, end), empty if none.
HD void msm_ranges_one(const u32* bucket_off, const u32* rank, u32 T, u32 b, u32* start,
                       u32* end) {
    const u32 lo = bucket_off[b], hi = bucket_off[b + 1], r = rank[b];
    start[b] = r + lo / T;
    end[b] = hi > lo ? r + (hi - 1) / T + 1 : r + lo / T;
}

// Piece x of the partial sums of group b: the entries [start[b] + i*T, ...) up to end[b],
// with i = x - piece_off[b].  Full XYZZ additions; one output per piece.
template <class F>
HD void msm_reduce_one(const u32* in, const u32* in_start, const u32* in_end,
                       const u32* piece_off, u32 nb, u32 T, u32 piece, u32* out) {
    constexpr u64 XW = 4 * coord_words<F>::W;
    const u32 b = find_group(piece_off, nb, piece);
    const u32 start = in_start[b] + (piece - piece_off[b]) * T;
    const u32 end = start + T < in_end[b] ? start + T : in_end[b];
    xyzz_t<F> acc = xyzz_inf<F>();
    for (u32 q = start; q < end; q++) acc = xyzz_add_inl(acc, load_xyzz<F>(in + XW * q));
    store_xyzz(out + XW * piece, acc);
}

// Segment t = w * nseg + j of the bucket reduction: buckets [j*L, (j+1)*L) of window w.
// Bucket key's sum is sums[start[key]] when end[key] > start[key], else it is empty.
// Writes the weighted sum sum (b - lo + 1) S_b to row w * 2 nseg + j and the plain sum
// sum S_b to row w * 2 nseg + nseg + j (msm_seg_offsets then multiplies it by lo).
template <class F>
HD void msm_bucket_sums_one(const u32* sums, const u32* start, const u32* end, u32 B, u32 L,
                            u32 nseg, u32 t, u32* out) {
    constexpr u64 XW = 4 * coord_words<F>::W;
    const u32 w = t / nseg, j = t % nseg, lo = j * L;
    xyzz_t<F> run = xyzz_inf<F>(), acc = xyzz_inf<F>();
    if constexpr (coord_words<F>::W == 12) {
        // G1: one addition site for both running sums (2L steps: run += S_b, then
        // acc += run), so that the loop body holds one inlined addition instead of two.
        for (u32 step = 0; step < 2 * L; step++) {
            const u32 key = w * B + lo + (L - 1 - step / 2);
            const bool second = step & 1;
            if (!second && end[key] <= start[key]) continue;  // empty bucket: run unchanged
            const xyzz_t<F> x = second ? acc : run;
            const xyzz_t<F> y = second ? run : load_xyzz<F>(sums + XW * start[key]);
            const xyzz_t<F> z = xyzz_add_inl(x, y);
            if (second) acc = z; else run = z;
        }
    } else {
        // G2 (products are calls, fp2.cuh): two sites, and no select between 96-word
        // structs, which made ptxas spill them whole.
        for (u32 i = 0; i < L; i++) {
            const u32 key = w * B + lo + (L - 1 - i);
            if (end[key] > start[key]) run = xyzz_add_inl(run, load_xyzz<F>(sums + XW * start[key]));
            acc = xyzz_add_inl(acc, run);
        }
    }
    const u64 row = 2 * (u64)w * nseg + j;
    store_xyzz(out + XW * row, acc);
    store_xyzz(out + XW * (row + nseg), run);
}

// Segment t's plain sum (row w * 2 nseg + nseg + j) times its first bucket lo = j*L,
// in place: the segment's offset term lo * sum S_b.
template <class F>
HD void msm_seg_offsets_one(u32* segs, u32 L, u32 nseg, u32 t) {
    constexpr u64 XW = 4 * coord_words<F>::W;
    const u32 w = t / nseg, j = t % nseg;
    u32* row = segs + XW * (2 * (u64)w * nseg + nseg + j);
    store_xyzz(row, xyzz_mul_small_inl(load_xyzz<F>(row), j * L));
}

// Fixed-base multiplication for the trusted setup: s * G from a table of the 32*256
// multiples d * 2^(8k) * G (affine), 32 mixed additions per scalar, then affine
// normalisation of the thread's chunk with one inversion (Montgomery's trick).
// out: n rows of 24 words (standard-form affine x, y; infinity = zeros).
// tmp: n rows of 36 words (ZZ, ZZZ, running product), scratch.
HD void fb_mul_chunk(const u32* scalars, u32 n, const u32* table, u32 chunk, u32 t, u32* out,
                     u32* tmp) {
    const u32 i0 = t * chunk;
    if (i0 >= n) return;
    const u32 i1 = i0 + chunk < n ? i0 + chunk : n;
    fp_t prod = fp_t::one();
    for (u32 i = i0; i < i1; i++) {
        u32 s[8];
        load_scalar(s, scalars + 8 * (u64)i);
        g1_xyzz acc = xyzz_inf<fp_t>();
        for (u32 k = 0; k < 32; k++) {
            const u32 d = (scalar_word(s, k >> 2) >> (8 * (k & 3))) & 0xff;
            if (d) acc = xyzz_add_aff(acc, load_aff<fp_t>(table + 24 * (k * 256 + d)));
        }
        u32* o = out + 24 * (u64)i;
        u32* m = tmp + 36 * (u64)i;
        store_fe<FpP>(o, acc.X);
        store_fe<FpP>(o + 12, acc.Y);
        store_fe<FpP>(m, acc.ZZ);
        store_fe<FpP>(m + 12, acc.ZZZ);
        if (!is_inf(acc)) prod = prod * (acc.ZZ * acc.ZZZ);
        store_fe<FpP>(m + 24, prod);
    }
    fp_t inv = inverse(prod);  // 1 / prod_i (ZZ_i ZZZ_i) over the finite points
    for (u32 i = i1; i-- > i0;) {
        u32* o = out + 24 * (u64)i;
        const u32* m = tmp + 36 * (u64)i;
        const fp_t ZZ = load_fe_rw<FpP>(m), ZZZ = load_fe_rw<FpP>(m + 12);
        if (ZZ.is_zero()) {
            store_fe<FpP>(o, fp_t::zero());
            store_fe<FpP>(o + 12, fp_t::zero());
            continue;
        }
        const fp_t before = i > i0 ? load_fe_rw<FpP>(m - 36 + 24) : fp_t::one();
        const fp_t inv_i = inv * before;  // 1 / (ZZ_i ZZZ_i)
        inv = inv * (ZZ * ZZZ);
        const fp_t x = load_fe_rw<FpP>(o) * (inv_i * ZZZ);
        const fp_t y = load_fe_rw<FpP>(o + 12) * (inv_i * ZZ);
        store_fe<FpP>(o, canonical(x * fp_t::raw_one()));
        store_fe<FpP>(o + 12, canonical(y * fp_t::raw_one()));
    }
}

HD void fp_mul_const_one(u32* x, u64 i, const u32* cst) {
    store_fe<FpP>(x + 12 * i, load_fe_rw<FpP>(x + 12 * i) * load_fe<FpP>(cst));
}

// The kernels come in parts (MSM_PART 1..7), compiled as separate modules so that
// run-time compilation can proceed in parallel (the curve arithmetic makes each part
// take seconds of NVRTC time): 1 digits, sorting and the G1 accumulation; 2 and 3 the
// G1 reductions; 4 the fixed-base multiplication; 5-7 G2's accumulation and reductions.
// Without MSM_PART, all of them.
#if defined(__CUDACC__)
#define MSM_THREADS 128
#define GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#if !defined(MSM_PART)
#define MSM_ALL 1
#endif

// The group-dependent kernels, for G1 (F = fp_t) and G2 (F = fp2_t, or fp2_call_t for
// the reductions: see fp2.cuh).
#define MSM_ACCUMULATE_KERNEL(NAME, F)                                                      \
    extern "C" __global__ void __launch_bounds__(MSM_THREADS)                               \
    NAME(const u32* bases, const u32* sorted, const u32* bucket_off, const u32* rank, u32 nb, \
         u32 T, u32 nthreads, u32* out) {                                                   \
        const u64 t = GID;                                                                  \
        if (t < nthreads) msm_accumulate_one<F>(bases, sorted, bucket_off, rank, nb, T, (u32)t, out); \
    }
#define MSM_REDUCE_KERNEL(NAME, F)                                                          \
    extern "C" __global__ void __launch_bounds__(MSM_THREADS)                               \
    NAME(const u32* in, const u32* in_start, const u32* in_end, const u32* piece_off, u32 nb, \
         u32 T, u32 npieces, u32* out) {                                                    \
        const u64 t = GID;                                                                  \
        if (t < npieces) msm_reduce_one<F>(in, in_start, in_end, piece_off, nb, T, (u32)t, out); \
    }
#define MSM_BUCKET_SUMS_KERNELS(NAME, OFFSETS, F)                                           \
    extern "C" __global__ void __launch_bounds__(MSM_THREADS)                               \
    NAME(const u32* sums, const u32* start, const u32* end, u32 B, u32 L, u32 nseg, u32 total, \
         u32* out) {                                                                        \
        const u64 t = GID;                                                                  \
        if (t < total) msm_bucket_sums_one<F>(sums, start, end, B, L, nseg, (u32)t, out);   \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(MSM_THREADS)                               \
    OFFSETS(u32* segs, u32 L, u32 nseg, u32 total) {                                        \
        const u64 t = GID;                                                                  \
        if (t < total) msm_seg_offsets_one<F>(segs, L, nseg, (u32)t);                       \
    }

#if defined(MSM_ALL) || MSM_PART == 1

extern "C" __global__ void msm_count(const u32* scalars, u32 n, u32 c, u32 nwin, u32* counts,
                                     u32* overflow) {
    msm_digits_one(scalars, n, (u32)GID, c, nwin, counts, nullptr, false, overflow);
}

extern "C" __global__ void msm_scatter(const u32* scalars, u32 n, u32 c, u32 nwin, u32* cursor,
                                       u32* sorted, u32* overflow) {
    msm_digits_one(scalars, n, (u32)GID, c, nwin, cursor, sorted, true, overflow);
}

MSM_ACCUMULATE_KERNEL(msm_accumulate, fp_t)

extern "C" __global__ void msm_ranges(const u32* bucket_off, const u32* rank, u32 nb, u32 T,
                                      u32* start, u32* end) {
    const u64 b = GID;
    if (b < nb) msm_ranges_one(bucket_off, rank, T, (u32)b, start, end);
}

extern "C" __global__ void fp_mul_const(u32* x, u64 count, const u32* cst) {
    const u64 i = GID;
    if (i < count) fp_mul_const_one(x, i, cst);
}
#endif
#if defined(MSM_ALL) || MSM_PART == 2
MSM_REDUCE_KERNEL(msm_reduce, fp_t)
#endif
#if defined(MSM_ALL) || MSM_PART == 3
MSM_BUCKET_SUMS_KERNELS(msm_bucket_sums, msm_seg_offsets, fp_t)
#endif
#if defined(MSM_ALL) || MSM_PART == 4
extern "C" __global__ void __launch_bounds__(MSM_THREADS)
g1_fixed_base_mul(const u32* scalars, u32 n, const u32* table, u32 chunk, u32 nthreads, u32* out,
                  u32* tmp) {
    const u64 t = GID;
    if (t < nthreads) fb_mul_chunk(scalars, n, table, chunk, (u32)t, out, tmp);
}
#endif
#if defined(MSM_ALL) || MSM_PART == 5
MSM_ACCUMULATE_KERNEL(msm_accumulate_g2, fp2_t)
#endif
#if defined(MSM_ALL) || MSM_PART == 6
MSM_REDUCE_KERNEL(msm_reduce_g2, fp2_call_t)
#endif
#if defined(MSM_ALL) || MSM_PART == 7
MSM_BUCKET_SUMS_KERNELS(msm_bucket_sums_g2, msm_seg_offsets_g2, fp2_call_t)
#endif
#endif  // __CUDACC__
