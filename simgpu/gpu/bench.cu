// Field multiplication throughput, for the benchmark's bound: each thread runs four
// independent chains x_j <- x_j * y (so the multiplier pipeline, not one chain's
// latency, sets the rate) on random inputs, and stores the results so nothing is
// optimised away.
#include "field.cuh"

template <class P>
__device__ __forceinline__ void mul_chain(u32* data, u32 iters) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32* base = data + 5 * P::N * t;
    fe<P> x0 = load_fe_rw<P>(base), x1 = load_fe_rw<P>(base + P::N);
    fe<P> x2 = load_fe_rw<P>(base + 2 * P::N), x3 = load_fe_rw<P>(base + 3 * P::N);
    const fe<P> y = load_fe_rw<P>(base + 4 * P::N);
#pragma unroll 1
    for (u32 i = 0; i < iters; i++) {
        x0 = x0 * y; x1 = x1 * y; x2 = x2 * y; x3 = x3 * y;
    }
    store_fe<P>(base, x0); store_fe<P>(base + P::N, x1);
    store_fe<P>(base + 2 * P::N, x2); store_fe<P>(base + 3 * P::N, x3);
}

extern "C" __global__ void bench_fr_mul(u32* data, u32 iters) { mul_chain<FrP>(data, iters); }
extern "C" __global__ void bench_fp_mul(u32* data, u32 iters) { mul_chain<FpP>(data, iters); }

// A kernel that only waits `cycles` SM clocks (one thread): a stage of known length for
// timing what stalls the device beside it (simgpu.calibrate.pins), with no memory traffic
// of its own to confound it.
extern "C" __global__ void bench_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
