// Carry-chain primitives for multi-precision arithmetic on 32-bit limbs.
//
// On the device each primitive is one PTX instruction (add.cc, madc.hi.cc, ...): the
// carry flag CC.CF links consecutive calls, which is what makes a 12-limb add or a
// 12x1-limb multiply-accumulate a straight chain of IADD3.X / IMAD.X in SASS.  The
// statements are `asm volatile` so that the compiler keeps them in program order
// (it does not know about CC.CF); ptxas still schedules independent chains together.
//
// On the host the same functions emulate the flag in a thread-local, so the field,
// curve, NTT and MSM code above this file runs unchanged under g++ (tests/host_harness)
// and bugs in the limb algorithms show up without a GPU.  Only the mnemonic mapping
// below is device-specific.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(__CUDACC__)
#define HD __host__ __device__ __forceinline__
#define HD_NOINLINE __host__ __device__ __noinline__
#else
#define HD inline
#define HD_NOINLINE inline
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#endif

#if !defined(__CUDA_ARCH__)
// Host emulation of CC.CF (1 = carry out of an add, or borrow out of a subtract).
inline u32& host_cf() {
    static thread_local u32 cf = 0;
    return cf;
}
#endif

#if defined(__CUDA_ARCH__)
#define PRIM2(name, ins)                                                        \
    __device__ __forceinline__ u32 name(u32 a, u32 b) {                          \
        u32 r;                                                                   \
        asm volatile(ins " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));             \
        return r;                                                                \
    }
#define PRIM3(name, ins)                                                        \
    __device__ __forceinline__ u32 name(u32 a, u32 b, u32 c) {                   \
        u32 r;                                                                   \
        asm volatile(ins " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); \
        return r;                                                                \
    }
PRIM2(add_cc, "add.cc.u32")
PRIM2(addc_cc, "addc.cc.u32")
PRIM2(addc, "addc.u32")
PRIM2(sub_cc, "sub.cc.u32")
PRIM2(subc_cc, "subc.cc.u32")
PRIM2(subc, "subc.u32")
PRIM3(mad_lo_cc, "mad.lo.cc.u32")
PRIM3(madc_lo_cc, "madc.lo.cc.u32")
PRIM3(mad_hi_cc, "mad.hi.cc.u32")
PRIM3(madc_hi_cc, "madc.hi.cc.u32")
PRIM3(madc_hi, "madc.hi.u32")
#undef PRIM2
#undef PRIM3
// Plain products (no carry flag): ordinary C, so the compiler schedules them freely.
__device__ __forceinline__ u32 lo32(u32 a, u32 b) { return a * b; }
__device__ __forceinline__ u32 hi32(u32 a, u32 b) { return __umulhi(a, b); }
__device__ __forceinline__ u32 brev32(u32 x) { return __brev(x); }
#else
inline u32 add_cc(u32 a, u32 b) { u64 s = (u64)a + b; host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 addc_cc(u32 a, u32 b) { u64 s = (u64)a + b + host_cf(); host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 addc(u32 a, u32 b) { return a + b + host_cf(); }
inline u32 sub_cc(u32 a, u32 b) { u64 d = (u64)a - b; host_cf() = (u32)(d >> 32) & 1; return (u32)d; }
inline u32 subc_cc(u32 a, u32 b) { u64 d = (u64)a - b - host_cf(); host_cf() = (u32)(d >> 32) & 1; return (u32)d; }
inline u32 subc(u32 a, u32 b) { return a - b - host_cf(); }
inline u32 lo32(u32 a, u32 b) { return (u32)((u64)a * b); }
inline u32 hi32(u32 a, u32 b) { return (u32)(((u64)a * b) >> 32); }
inline u32 mad_lo_cc(u32 a, u32 b, u32 c) { u64 s = (u64)lo32(a, b) + c; host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 madc_lo_cc(u32 a, u32 b, u32 c) { u64 s = (u64)lo32(a, b) + c + host_cf(); host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 mad_hi_cc(u32 a, u32 b, u32 c) { u64 s = (u64)hi32(a, b) + c; host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 madc_hi_cc(u32 a, u32 b, u32 c) { u64 s = (u64)hi32(a, b) + c + host_cf(); host_cf() = (u32)(s >> 32); return (u32)s; }
inline u32 madc_hi(u32 a, u32 b, u32 c) { return hi32(a, b) + c + host_cf(); }
inline u32 brev32(u32 x) {
    u32 r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
#endif
