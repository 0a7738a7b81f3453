"""Benchmark (and, with --check, verify) the real BLS12-381 kernels on a CUDA GPU.

    python benchmarks/bench_kernels.py [--check] [--out DIR] [--ntt LO HI] [--msm LO HI]
                                       [--g2 LOG ...] [--skip-msm-small]

Prints, for NTT 2^16..2^26, MSM 2^16..2^24 and the G2 MSM at 2^18, 2^20, 2^22, the median
time (CUDA events, >= 5 runs after warm-up, inputs already on the device) and two bounds:
the multiply bound, the multiplications the algorithm cannot avoid ((n/2) log2 n Fr
multiplies for an NTT; n ceil(255/c) mixed additions of 10 Fp multiplies plus 2 full
additions of 14 per bucket for the MSM, 3 Fp products per Fp2 one in G2) over the
measured Fr/Fp multiplication rate of this GPU; and the memory bound, the bytes the
algorithm must move through device memory (the *_memory_bytes functions below) over the
measured copy bandwidth.  The table says which of the two binds (the larger) and the ratio to it.

--check first compares every GPU result with the CPU reference on fresh random inputs:
the NTT family and compute_h against Python integers for 2^0..2^20 (the 2^18/2^20
references run in worker processes while the GPU benchmarks run), the MSM against
arkworks' multiexp for 1..2^16 points and edge cases and, for 2^20 and 2^24 points, both
arkworks and the identity sum s_i (k_i G) = (sum s_i k_i) G on bases made by the GPU's
fixed-base multiplication (itself checked against arkworks); the G2 MSM against arkworks
for 1..2^16 points and edge cases and, at the benchmarked sizes, against the identity
sum s_i (P0 + (i mod d) Q) = (sum s_i) P0 + (sum (i mod d) s_i) Q on running-sum bases.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import multiprocessing
import os
import random
import statistics
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simgpu.gpu import cuda as gpu  # noqa: E402
from simgpu.gpu import msm, ntt
from simgpu.gpu.bls12_381 import R_ORDER  # noqa: E402
from simgpu.gpu.encoding import ints_to_limbs, limbs_to_ints, scalar_of  # noqa: E402
from simgpu.gpu.footprint import msm_plan  # noqa: E402

R = R_ORDER
RESULTS: dict = {"checks": [], "ntt": [], "msm": [], "msm_g2": [], "compute_h": [], "errors": []}


def log(msg: str) -> None:
    print(msg, flush=True)


def record_check(name: str, ok: bool, detail: str = "") -> None:
    RESULTS["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    log(f"  check {name}: {'OK' if ok else 'FAIL'} {detail}")


# --------------------------------------------------------------------------- inputs


def rand_fr_ints(n: int, rng: random.Random) -> list[int]:
    return [rng.randrange(R) for _ in range(n)]


def rand_fr_dev(cp, n: int, gen: np.random.Generator):
    """n near-uniform scalars < r on the device, vectorised (top word below r's)."""
    a = gen.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
    a[:, 7] = gen.integers(0, R >> 224, size=n, dtype=np.uint32)
    return cp.asarray(a)


def to_dev_mont(cp, vals: list[int], shape=None):
    x = cp.asarray(ints_to_limbs(vals))
    if shape:
        x = x.reshape(shape)
    ntt.to_montgomery(x)
    return x


def from_dev_mont(cp, x) -> list[int]:
    y = x.copy()
    ntt.from_montgomery(y)
    return limbs_to_ints(cp.asnumpy(y).reshape(-1, 8))


# --------------------------------------------------------------------------- reference workers


def _ref_ntt(args):
    vals, inverse, coset = args
    return ntt.ntt_ref(vals, inverse=inverse, coset=coset)


def _ref_h_stage1(vals):
    return ntt.ntt_ref(ntt.ntt_ref(vals, inverse=True), coset=True)


def _ref_h_stage2(args):
    ea, eb, ec = args
    zinv = ntt.z_coset_inverse(len(ea))
    eh = [(x * y - z) * zinv % R for x, y, z in zip(ea, eb, ec, strict=True)]
    return ntt.ntt_ref(eh, inverse=True, coset=True)


def _ref_msm(args):
    bases_limbs, scalars_limbs = args
    return msm.msm_ref(bases_limbs, scalars_limbs).to_compressed_bytes()


def _ref_dot(args):
    k_raw, s_raw = args
    k = limbs_to_ints(np.frombuffer(k_raw, dtype=np.uint32).reshape(-1, 8))
    s = limbs_to_ints(np.frombuffer(s_raw, dtype=np.uint32).reshape(-1, 8))
    return sum(a * b for a, b in zip(k, s, strict=True)) % R


# --------------------------------------------------------------------------- checks


def check_ntt_small(cp, rng: random.Random, logs: list[int]) -> None:
    for lg in logs:
        n = 1 << lg
        for kind in ("ntt", "intt", "coset_ntt", "coset_intt"):
            k = 2 if lg < 12 else 1
            xs = [rand_fr_ints(n, rng) for _ in range(k)]
            x = to_dev_mont(cp, sum(xs, []), (k, n, 8) if k > 1 else (n, 8))
            {"ntt": lambda v: ntt.ntt(v), "intt": lambda v: ntt.ntt(v, inverse=True),
             "coset_ntt": ntt.coset_ntt, "coset_intt": ntt.coset_intt}[kind](x)  # fmt: skip
            got = from_dev_mont(cp, x)
            exp = sum(
                (ntt.ntt_ref(v, inverse=kind.endswith("intt"), coset=kind.startswith("coset"))
                 for v in xs), [])  # fmt: skip
            record_check(f"{kind} 2^{lg} x{k}", got == exp)
        k = 2 if lg < 12 else 1
        abc = [[rand_fr_ints(n, rng) for _ in range(k)] for _ in range(3)]
        dev = [cp.asarray(ints_to_limbs(sum(v, []))).reshape((k, n, 8)) for v in abc]
        ntt.compute_h(*dev)
        got = limbs_to_ints(cp.asnumpy(dev[0]).reshape(-1, 8))
        exp = sum((ntt.h_ref(abc[0][i], abc[1][i], abc[2][i]) for i in range(k)), [])
        record_check(f"compute_h 2^{lg} x{k}", got == exp)
    # h_pointwise on its own, batched
    n = 64
    v = [rand_fr_ints(3 * n, rng) for _ in range(3)]
    a, b, c = (to_dev_mont(cp, x, (3, n, 8)) for x in v)
    ntt.h_pointwise(a, b, c)
    z = ntt.z_coset_inverse(n)
    record_check(
        "h_pointwise x3", from_dev_mont(cp, a) == [(p * q - s) * z % R for p, q, s in zip(*v, strict=True)]
    )


def start_big_refs(pool, cp, rng: random.Random, logs: list[int]):
    """Launch the large references in worker processes and the GPU side now; returns
    the pending comparisons."""
    pending = []
    for lg in logs:
        n = 1 << lg
        for kind in ("ntt", "intt", "coset_ntt", "coset_intt"):
            xs = rand_fr_ints(n, rng)
            x = to_dev_mont(cp, xs)
            {"ntt": lambda v: ntt.ntt(v), "intt": lambda v: ntt.ntt(v, inverse=True),
             "coset_ntt": ntt.coset_ntt, "coset_intt": ntt.coset_intt}[kind](x)  # fmt: skip
            fut = pool.submit(_ref_ntt, (xs, kind.endswith("intt"), kind.startswith("coset")))
            pending.append((f"{kind} 2^{lg}", from_dev_mont(cp, x), [fut]))
    for lg in logs[-1:]:
        n = 1 << lg
        abc = [rand_fr_ints(n, rng) for _ in range(3)]
        dev = [cp.asarray(ints_to_limbs(v)) for v in abc]
        ntt.compute_h(*dev)
        futs = [pool.submit(_ref_h_stage1, v) for v in abc]
        pending.append((f"compute_h 2^{lg}", limbs_to_ints(cp.asnumpy(dev[0])), futs))
    return pending


def finish_big_refs(pool, pending) -> None:
    for name, got, futs in pending:
        try:
            if name.startswith("compute_h"):
                exp = pool.submit(_ref_h_stage2, tuple(f.result() for f in futs)).result()
            else:
                exp = futs[0].result()
            record_check(name, got == exp)
        except Exception as e:  # keep going: report it
            record_check(name, False, repr(e))


def make_bases(cp, n: int, gen: np.random.Generator):
    """Random bases k_i G by the GPU's fixed-base multiplication; returns (k device
    scalars, standard-form limbs (n, 24))."""
    from py_arkworks_bls12381 import G1Point

    k = rand_fr_dev(cp, n, gen)
    limbs = msm.fixed_base_mul_g1(G1Point(), k)
    return k, limbs


def check_fixed_base(cp, gen: np.random.Generator) -> None:
    from py_arkworks_bls12381 import G1Point

    n = 5000
    k = rand_fr_dev(cp, n, gen)
    k[0] = 0
    k[1, :] = 0
    k[1, 0] = 1
    limbs = msm.fixed_base_mul_g1(G1Point(), k)
    kh = limbs_to_ints(cp.asnumpy(k))
    idx = [0, 1, n - 1] + list(gen.integers(0, n, size=300))
    exp = msm.random_bases_limbs([kh[i] for i in idx])
    record_check("fixed_base_mul_g1 5000 (sampled vs arkworks)", np.array_equal(limbs[idx], exp))


def check_msm_small(cp, rng: random.Random, gen: np.random.Generator) -> None:
    sizes = [1, 2, 3, 5, 17, 100, 1 << 10, 1 << 12, 1 << 14, 1 << 16]
    for n in sizes:
        ks = [rng.randrange(1, R) for _ in range(min(n, 4096))]
        ks = (ks * (n // len(ks) + 1))[:n]  # repeats the bases beyond 4096 (arkworks cost)
        limbs = msm.random_bases_limbs(ks)
        bases = msm.bases_to_device(limbs)
        cases = {"random": [rng.randrange(R) for _ in range(n)]}
        if n <= 1 << 12:
            cases.update({"zeros": [0] * n, "ones": [1] * n, "r-1": [R - 1] * n,
                          "small": [rng.randrange(3) for _ in range(n)]})  # fmt: skip
        for name, ss in cases.items():
            sl = ints_to_limbs(ss)
            for w in [None] if n > 1 << 12 else [None, 3, 9]:
                got = msm.msm_g1(bases, cp.asarray(sl), window=w)
                record_check(f"msm {name} n={n} c={w or msm_plan(n).c}", got == msm.msm_ref(limbs, sl))
    # infinity among bases, repeated bases, P and -P
    n = 3000
    ks = [rng.randrange(1, R) for _ in range(7)]
    limbs = msm.random_bases_limbs(ks)[np.array([rng.randrange(7) for _ in range(n)])]
    limbs[::5] = 0
    neg = msm.random_bases_limbs([5, R - 5])
    limbs[:2] = neg
    sl = ints_to_limbs([rng.randrange(R) for _ in range(n)])
    bases = msm.bases_to_device(limbs)
    record_check(
        "msm infinity+repeated+P,-P 3000", msm.msm_g1(bases, cp.asarray(sl)) == msm.msm_ref(limbs, sl)
    )
    same = ints_to_limbs([12345] * n)
    record_check("msm same scalar 3000", msm.msm_g1(bases, cp.asarray(same)) == msm.msm_ref(limbs, same))
    # g1_sum
    idx = np.array(sorted(rng.sample(range(n), 1000)), dtype=np.uint32)
    ones = ints_to_limbs([1] * 1000)
    record_check("g1_sum index 1000", msm.g1_sum(bases, cp.asarray(idx)) == msm.msm_ref(limbs[idx], ones))
    record_check("g1_sum all 3000", msm.g1_sum(bases) == msm.msm_ref(limbs, ints_to_limbs([1] * n)))


def start_big_msm(pool, cp, gen: np.random.Generator, logs: list[int]):
    from py_arkworks_bls12381 import G1Point

    pending = []
    for lg in logs:
        n = 1 << lg
        k, limbs = make_bases(cp, n, gen)
        s = rand_fr_dev(cp, n, gen)
        bases = msm.bases_to_device(limbs)
        got = msm.msm_g1(bases, s)
        kb, sb = cp.asnumpy(k).tobytes(), cp.asnumpy(s).tobytes()
        pending.append((f"msm 2^{lg} vs (sum k_i s_i) G", got, pool.submit(_ref_dot, (kb, sb)), G1Point()))
        if lg <= 20:
            fut = pool.submit(_ref_msm, (limbs, cp.asnumpy(s)))
            pending.append((f"msm 2^{lg} vs arkworks", got, fut, None))
        del bases, k, s, limbs
    return pending


def finish_big_msm(pending) -> None:
    from py_arkworks_bls12381 import G1Point

    for name, got, fut, g in pending:
        try:
            if g is not None:
                exp = g * scalar_of(fut.result())
            else:
                exp = G1Point.from_compressed_bytes_unchecked(fut.result())
            record_check(name, got == exp)
        except Exception as e:
            record_check(name, False, repr(e))


# --------------------------------------------------------------------------- timing


def median_ms(cp, fn, runs: int = 7, warmup: int = 2) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(runs):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times), times


def mul_rates(cp) -> dict[str, float]:
    mod = gpu.load_module("bench.cu")
    out = {}
    gen = np.random.default_rng()
    blocks, threads, iters = 132 * 16, 256, 256
    nthreads = blocks * threads
    for name, words in (("fr", 8), ("fp", 12)):
        k = mod.get_function(f"bench_{name}_mul")
        data = cp.asarray(gen.integers(0, 1 << 32, size=5 * words * nthreads, dtype=np.uint64)
                          .astype(np.uint32))  # fmt: skip
        data.reshape(-1, words)[:, words - 1] &= 0x0FFFFFFF  # < modulus
        args = (data, np.uint32(iters))
        ms, _ = median_ms(cp, lambda k=k, a=args: k((blocks,), (threads,), a), runs=5)
        out[name] = nthreads * iters * 4 / (ms * 1e-3)
        log(f"  {name} mul rate: {out[name] / 1e9:.1f} G/s ({ms:.2f} ms)")
    return out


def copy_bandwidth(cp) -> float:
    """Device memory bandwidth in bytes/s: a 2 GiB device-to-device copy, bytes read plus
    bytes written, median of 5."""
    n = 1 << 29  # u32 words: 2 GiB
    src = cp.arange(n, dtype=cp.uint32)
    dst = cp.empty_like(src)
    ms, _ = median_ms(cp, lambda d=dst, s=src: cp.copyto(d, s), runs=5)
    del src, dst
    bw = 2 * 4 * n / (ms * 1e-3)
    log(f"  copy bandwidth: {bw / 1e12:.2f} TB/s ({ms:.2f} ms for 2 x 2 GiB)")
    return bw


def ntt_memory_bytes(n: int) -> int:
    """Bytes an NTT of n elements must move: each shared-memory pass reads and writes
    the vector once, and so does the bit reversal (twiddles are reused from cache)."""
    passes = len(ntt.pass_plan(n.bit_length() - 1)) + 1
    return passes * 2 * 32 * n


def compute_h_memory_bytes(n: int) -> int:
    """compute_h: 3 vectors through two transforms each, the pointwise step (3 reads, 1
    write), one more transform of a and its bit reversal."""
    passes = len(ntt.pass_plan(n.bit_length() - 1))
    return 32 * n * (3 * 2 * 2 * passes + 4 + 2 * passes + 2)


def msm_memory_bytes(n: int, c: int, group=msm.G1) -> int:
    """Bytes an MSM must move: the scalars read twice (count, scatter), each digit's
    sorted entry written and read (4 B) and its base gathered (an affine point per
    non-zero digit), and every bucket's sum written and read once."""
    plan = msm_plan(n, c)
    aff = 4 * group.aff_words
    return 64 * n + n * plan.nwin * (8 + aff) + 2 * plan.nb * 4 * group.xyzz_words


def compute_h_multiplies(n: int) -> int:
    """Fr products of compute_h: 7 transforms, plus per element the Montgomery and coset
    scalings folded into them (4) and the pointwise step (2)."""
    return 7 * ntt.ntt_multiplies(n) + 6 * 3 * n


def bounds(mul_ms: float, mem_ms: float, ms: float) -> dict:
    binds = "memory" if mem_ms > mul_ms else "multiply"
    return {"bound_ms": mul_ms, "mem_bound_ms": mem_ms, "binds": binds, "ratio": ms / max(mul_ms, mem_ms)}


def bench_ntt(cp, logs: list[int], rate: float, bw: float) -> None:
    gen = np.random.default_rng()
    for lg in logs:
        n = 1 << lg
        x = rand_fr_dev(cp, n, gen)
        ntt.to_montgomery(x)
        ms, times = median_ms(cp, lambda x=x: ntt.ntt(x))
        b = bounds(ntt.ntt_multiplies(n) / rate * 1e3, ntt_memory_bytes(n) / bw * 1e3, ms)
        RESULTS["ntt"].append({"log_n": lg, "median_ms": ms, "times_ms": times, **b})
        mul, mem = b["bound_ms"], b["mem_bound_ms"]
        log(f"  ntt 2^{lg}: {ms:.3f} ms (mul {mul:.3f}, mem {mem:.3f}, x{b['ratio']:.2f})")
        del x
    ntt.clear_caches()


def bench_compute_h(cp, logs: list[int], rate: float, bw: float) -> None:
    gen = np.random.default_rng()
    for lg in logs:
        n = 1 << lg
        a, b, c = (rand_fr_dev(cp, n, gen) for _ in range(3))
        ms, times = median_ms(cp, lambda a=a, b=b, c=c: ntt.compute_h(a, b, c), runs=5)
        bd = bounds(compute_h_multiplies(n) / rate * 1e3, compute_h_memory_bytes(n) / bw * 1e3, ms)
        RESULTS["compute_h"].append({"log_n": lg, "median_ms": ms, "times_ms": times, **bd})
        log(f"  compute_h 2^{lg}: {ms:.3f} ms (x{bd['ratio']:.2f} of the {bd['binds']} bound)")
        del a, b, c
    ntt.clear_caches()


def bench_msm(cp, logs: list[int], rate: float, bw: float, windows: dict[int, list[int]]) -> None:
    gen = np.random.default_rng()
    be = msm._backend()
    for lg in logs:
        n = 1 << lg
        _, limbs = make_bases(cp, n, gen)
        bases = msm.bases_to_device(limbs)
        del limbs
        s = rand_fr_dev(cp, n, gen)
        for w in [None, *windows.get(lg, [])]:
            plan = msm_plan(n, w)
            ms, times = median_ms(cp, lambda w=w, b=bases, s=s: msm.msm_g1(b, s, window=w), runs=5, warmup=1)
            be.events = []
            msm.msm_g1(bases, s, window=w)
            ev = be.events
            be.events = None
            phases = {ev[i][0]: cp.cuda.get_elapsed_time(ev[i - 1][1], ev[i][1]) for i in range(1, len(ev))}
            b = bounds(msm.msm_multiplies(n, plan.c) / rate * 1e3, msm_memory_bytes(n, plan.c) / bw * 1e3, ms)
            RESULTS["msm"].append({"log_n": lg, "c": plan.c, "median_ms": ms, "times_ms": times,
                                   **b, "phases_ms": phases})  # fmt: skip
            ph = " ".join(f"{k}={v:.1f}" for k, v in phases.items())
            log(f"  msm 2^{lg} c={plan.c}: {ms:.2f} ms (mul {b['bound_ms']:.2f}, x{b['ratio']:.2f}) [{ph}]")
        del bases, s


# --------------------------------------------------------------------------- G2


def g2_running_bases(distinct: int, n: int) -> tuple[np.ndarray, object, object]:
    """Bases B_i = P0 + (i mod distinct) Q for random P0, Q (CPU, one addition a point),
    as standard-form limbs (n, 48): sum s_i B_i = (sum s_i) P0 + (sum s_i (i mod d)) Q
    is then an exact check at any size, and `distinct` points keep the gathers out of
    the L2 cache when large."""
    from py_arkworks_bls12381 import G2Point

    g = G2Point()
    p0 = g * scalar_of(random.randrange(1, R))
    q = g * scalar_of(random.randrange(1, R))
    pts, acc = [], p0
    for _ in range(distinct):
        pts.append(acc)
        acc = acc + q
    base = msm.g2_limbs(pts)
    reps = -(-n // distinct)
    return np.tile(base, (reps, 1))[:n], p0, q


def g2_expected(p0, q, s_host: np.ndarray, distinct: int):
    s = limbs_to_ints(s_host)
    a = sum(s) % R
    b = sum(v * (i % distinct) for i, v in enumerate(s)) % R
    return p0 * scalar_of(a) + q * scalar_of(b)


def check_msm_g2_small(cp, rng: random.Random) -> None:
    for n in (1, 2, 17, 300, 1 << 12):
        ks = [rng.randrange(1, R) for _ in range(min(n, 512))]
        limbs = msm.random_bases_g2_limbs((ks * (n // len(ks) + 1))[:n])
        if n > 2:
            limbs[1] = 0  # infinity
        bases = msm.bases_g2_to_device(limbs)
        cases = {"random": [rng.randrange(R) for _ in range(n)]}
        if n == 300:
            cases.update({"ones": [1] * n, "r-1": [R - 1] * n, "small": [rng.randrange(3) for _ in range(n)]})
        for name, ss in cases.items():
            sl = ints_to_limbs(ss)
            for w in [None] if n > 300 else [None, 4, 11]:
                got = msm.msm_g2(bases, cp.asarray(sl), window=w)
                record_check(f"msm_g2 {name} n={n} c={w or msm_plan(n).c}", got == msm.msm_g2_ref(limbs, sl))


def bench_msm_g2(cp, pool, logs: list[int], rate: float, bw: float, check: bool) -> None:
    """The G2 MSM at each size (uniform scalars, as the B query's tails), its phases,
    and an exact check of every size; arkworks' single-threaded G2 multiexp timed at
    2^16 on the same machine, for the CPU comparison."""
    gen = np.random.default_rng()
    be = msm._backend()
    distinct = 1 << 18  # 48 MiB of points: about the L2 cache (generating them costs ~4 s)
    base_limbs, p0, q = g2_running_bases(min(distinct, 1 << max(logs)), 1 << max(logs))
    dev_all = msm.bases_g2_to_device(base_limbs)
    for lg in logs:
        n = 1 << lg
        bases = dev_all[:n]
        s = rand_fr_dev(cp, n, gen)
        ms, times = median_ms(cp, lambda b=bases, s=s: msm.msm_g2(b, s), runs=5, warmup=1)
        be.events = []
        got = msm.msm_g2(bases, s)
        ev = be.events
        be.events = None
        phases = {ev[i][0]: cp.cuda.get_elapsed_time(ev[i - 1][1], ev[i][1]) for i in range(1, len(ev))}
        plan = msm_plan(n)
        b = bounds(
            msm.msm_multiplies(n, plan.c, msm.G2) / rate * 1e3,
            msm_memory_bytes(n, plan.c, msm.G2) / bw * 1e3,
            ms,
        )
        RESULTS["msm_g2"].append({"log_n": lg, "c": plan.c, "median_ms": ms, "times_ms": times,
                                  **b, "phases_ms": phases})  # fmt: skip
        ph = " ".join(f"{k}={v:.1f}" for k, v in phases.items())
        log(f"  msm_g2 2^{lg} c={plan.c}: {ms:.2f} ms (mul {b['bound_ms']:.2f}, x{b['ratio']:.2f}) [{ph}]")
        if check:
            exp = g2_expected(p0, q, cp.asnumpy(s), distinct)
            record_check(f"msm_g2 2^{lg} vs (sum s_i) P0 + (sum s_i i) Q", got == exp)
        del s
    del dev_all
    # arkworks on the CPU, one thread, 2^16 points
    n = 1 << 16
    sl = cp.asnumpy(rand_fr_dev(cp, n, gen))
    t = time.perf_counter()
    ref = msm.msm_g2_ref(base_limbs[:n], sl)
    cpu_s = time.perf_counter() - t
    RESULTS["g2_cpu"] = {"log_n": 16, "seconds": cpu_s, "us_per_point": cpu_s / n * 1e6}
    log(f"  arkworks G2 multiexp 2^16 (1 thread): {cpu_s:.2f} s, {cpu_s / n * 1e6:.1f} us/point")
    if check:
        got = msm.msm_g2(msm.bases_g2_to_device(base_limbs[:n]), cp.asarray(sl))
        record_check("msm_g2 2^16 vs arkworks", got == ref)


# --------------------------------------------------------------------------- main


def table() -> str:
    lines = [
        "| kernel | n | c | median ms | multiply bound ms | memory bound ms | binds | ratio |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    rows = [("NTT", r) for r in RESULTS["ntt"]] + [("compute_h", r) for r in RESULTS["compute_h"]]
    rows += [("MSM G1", r) for r in RESULTS["msm"]] + [("MSM G2", r) for r in RESULTS["msm_g2"]]
    for name, r in rows:
        lines.append(
            f"| {name} | 2^{r['log_n']} | {r.get('c', '')} | {r['median_ms']:.3f} | {r['bound_ms']:.3f} "
            f"| {r['mem_bound_ms']:.3f} | {r['binds']} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="verify against the CPU reference first")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for results.json")
    ap.add_argument("--ntt", nargs=2, type=int, default=[16, 26], metavar=("LO", "HI"))
    ap.add_argument("--msm", nargs=2, type=int, default=[16, 24], metavar=("LO", "HI"))
    ap.add_argument("--msm-logs", nargs="*", type=int, help="MSM log sizes (instead of --msm)")
    ap.add_argument("--no-sweep", action="store_true", help="only the default window per size")
    ap.add_argument("--windows", nargs="*", help="extra windows to time, as LOG:C items")
    ap.add_argument("--only-msm", action="store_true", help="skip the NTT benchmarks")
    ap.add_argument("--g2", nargs="*", type=int, default=[18, 20, 22], help="G2 MSM log sizes")
    ap.add_argument("--ntt-h", nargs="*", type=int, default=[20, 24], help="compute_h log sizes")
    ap.add_argument("--msm-checks-only", action="store_true", help="with --check: only the MSM checks")
    ap.add_argument("--skip-msm-small", action="store_true", help="with --check: not the small G1 MSM checks")
    ap.add_argument(
        "--big-check", nargs="*", type=int, default=[18, 20], help="log sizes of the pooled NTT checks"
    )
    ap.add_argument(
        "--msm-check", nargs="*", type=int, default=[20, 24], help="log sizes of the large MSM checks"
    )
    args = ap.parse_args()
    cp = gpu.get_cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    RESULTS["device"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    RESULTS["date"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    RESULTS["arch"] = gpu.device_arch()
    log(f"device {RESULTS['device']} {RESULTS['arch']}, {props['multiProcessorCount']} SMs")
    t0 = time.time()
    gpu.precompile()
    RESULTS["compile_s"] = time.time() - t0
    log(f"compiled {len(gpu.MODULES)} modules in {RESULTS['compile_s']:.1f} s")

    seed = int.from_bytes(os.urandom(8), "little")
    RESULTS["seed"] = seed
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    pool = ProcessPoolExecutor(max_workers=max(2, (os.cpu_count() or 4) - 2),
                               mp_context=multiprocessing.get_context("spawn"))  # fmt: skip
    pending_ntt, pending_msm = [], []

    def step(name, fn, *a):
        t = time.time()
        try:
            return fn(*a)
        except Exception:
            tb = traceback.format_exc()
            RESULTS["errors"].append({"step": name, "traceback": tb})
            log(f"ERROR in {name}:\n{tb}")
            return None
        finally:
            log(f"[{name}: {time.time() - t:.1f} s]")

    if args.check and not args.msm_checks_only:
        pending_ntt = step("start NTT refs", start_big_refs, pool, cp, rng, args.big_check) or []
        step("NTT small checks", check_ntt_small, cp, rng, [*range(0, 13), 14, 16])
    if args.check:
        step("fixed base check", check_fixed_base, cp, gen)
        if not args.msm_checks_only and not args.skip_msm_small:
            step("MSM small checks", check_msm_small, cp, rng, gen)
        pending_msm = step("start MSM refs", start_big_msm, pool, cp, gen, args.msm_check) or []
    rates = step("mul rates", mul_rates, cp) or {"fr": float("nan"), "fp": float("nan")}
    RESULTS["mul_rate"] = rates
    bw = step("bandwidth", copy_bandwidth, cp) or float("nan")
    RESULTS["copy_bandwidth"] = bw
    if args.check and args.g2:
        step("MSM G2 small checks", check_msm_g2_small, cp, rng)
    if not args.only_msm:
        step("NTT bench", bench_ntt, cp, list(range(args.ntt[0], args.ntt[1] + 1)), rates["fr"], bw)
        step("compute_h bench", bench_compute_h, cp, args.ntt_h, rates["fr"], bw)
    sweep: dict[int, list[int]] = {20: [14, 15, 17, 18], 24: [16, 17, 19, 20]}
    if args.windows is not None:  # "LOG:C" items
        sweep = {}
        for item in args.windows:
            lg, c = item.split(":")
            sweep.setdefault(int(lg), []).append(int(c))
    msm_logs = args.msm_logs or list(range(args.msm[0], args.msm[1] + 1))
    step("MSM bench", bench_msm, cp, msm_logs, rates["fp"], bw, {} if args.no_sweep else sweep)
    if args.g2:
        step("MSM G2 bench", bench_msm_g2, cp, pool, args.g2, rates["fp"], bw, args.check)
    if args.check and not args.msm_checks_only:
        step("finish NTT refs", finish_big_refs, pool, pending_ntt)
    if args.check:
        step("finish MSM refs", finish_big_msm, pending_msm)
    pool.shutdown()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    nfail = sum(not c["ok"] for c in RESULTS["checks"])
    log("")
    fr, fp = rates["fr"] / 1e9, rates["fp"] / 1e9
    head = f"{RESULTS['device']} {RESULTS['date']}  Fr mul {fr:.1f} G/s, Fp mul {fp:.1f} G/s"
    log(f"{head}, copy {bw / 1e12:.2f} TB/s")
    log(table())
    log(f"checks: {len(RESULTS['checks']) - nfail} passed, {nfail} failed; errors: {len(RESULTS['errors'])}")
    for c in RESULTS["checks"]:
        if not c["ok"]:
            log(f"  FAILED {c['name']} {c['detail']}")
    return 1 if nfail or RESULTS["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
