"""GPU kernels against the CPU reference, on the device: `pytest -m gpu`.

Every test draws fresh random inputs.  Without CuPy or a CUDA device the whole module is
skipped (CI).  The larger sizes (NTT 2^18..2^20 with the reference in worker processes,
MSM 2^20 and 2^24) are checked by `benchmarks/bench_kernels.py --check`.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from simgpu.gpu import cuda as gpu

pytestmark = pytest.mark.gpu

if not gpu.cupy_available():
    pytest.skip("CuPy/CUDA not available", allow_module_level=True)

import cupy as cp  # noqa: E402
from py_arkworks_bls12381 import G1Point  # noqa: E402

from simgpu.errors import VramExhausted  # noqa: E402
from simgpu.gpu import footprint, msm, ntt  # noqa: E402
from simgpu.gpu.bls12_381 import R_ORDER as R  # noqa: E402
from simgpu.gpu.encoding import ints_to_limbs, limbs_to_ints  # noqa: E402

RNG = random.Random()


def rand(n: int) -> list[int]:
    return [RNG.randrange(R) for _ in range(n)]


def dev_mont(vals: list[int], shape: tuple[int, ...]) -> cp.ndarray:
    x = cp.asarray(ints_to_limbs(vals)).reshape(shape)
    ntt.to_montgomery(x)
    return x


def host_std(x: cp.ndarray) -> list[int]:
    y = x.copy()
    ntt.from_montgomery(y)
    return limbs_to_ints(cp.asnumpy(y).reshape(-1, 8))


@pytest.mark.parametrize("log_n", [*range(0, 13), 14, 16])
@pytest.mark.parametrize("kind", ["ntt", "intt", "coset_ntt", "coset_intt"])
def test_ntt_family(log_n: int, kind: str) -> None:
    n = 1 << log_n
    k = 3 if log_n <= 10 else 1
    xs = [rand(n) for _ in range(k)]
    x = dev_mont(sum(xs, []), (k, n, 8))
    inverse, coset = kind.endswith("intt"), kind.startswith("coset")
    if coset:
        (ntt.coset_intt if inverse else ntt.coset_ntt)(x)
    else:
        ntt.ntt(x, inverse=inverse)
    assert host_std(x) == sum((ntt.ntt_ref(v, inverse=inverse, coset=coset) for v in xs), [])


@pytest.mark.parametrize("log_n", [0, 1, 2, 5, 10, 11, 13, 15])
def test_compute_h(log_n: int) -> None:
    n = 1 << log_n
    k = 2 if log_n <= 11 else 1
    abc = [[rand(n) for _ in range(k)] for _ in range(3)]
    a, b, c = (cp.asarray(ints_to_limbs(sum(v, []))).reshape(k, n, 8) for v in abc)
    ntt.compute_h(a, b, c)
    exp = sum((ntt.h_ref(abc[0][i], abc[1][i], abc[2][i]) for i in range(k)), [])
    assert limbs_to_ints(cp.asnumpy(a).reshape(-1, 8)) == exp


def test_montgomery_roundtrip_and_pointwise() -> None:
    n = 256
    v = rand(n)
    x = cp.asarray(ints_to_limbs(v))
    ntt.to_montgomery(x)
    ntt.from_montgomery(x)
    assert limbs_to_ints(cp.asnumpy(x)) == v
    a, b, c = (rand(2 * n) for _ in range(3))
    da, db, dc = (dev_mont(w, (2, n, 8)) for w in (a, b, c))
    ntt.h_pointwise(da, db, dc)
    z = ntt.z_coset_inverse(n)
    assert host_std(da) == [(p * q - s) * z % R for p, q, s in zip(a, b, c, strict=True)]


def _bases(n: int, distinct: int = 2048) -> np.ndarray:
    ks = [RNG.randrange(1, R) for _ in range(min(n, distinct))]
    return msm.random_bases_limbs((ks * (n // len(ks) + 1))[:n])


@pytest.mark.parametrize("n", [1, 2, 3, 31, 1000, 1 << 12, 1 << 16])
def test_msm_random(n: int) -> None:
    limbs = _bases(n)
    sl = ints_to_limbs(rand(n))
    bases = msm.bases_to_device(limbs)
    assert msm.msm_g1(bases, cp.asarray(sl)) == msm.msm_ref(limbs, sl)


@pytest.mark.parametrize("window", [2, 5, 11, 16])
def test_msm_windows(window: int) -> None:
    n = 777
    limbs = _bases(n)
    sl = ints_to_limbs(rand(n))
    assert msm.msm_g1(msm.bases_to_device(limbs), cp.asarray(sl), window) == msm.msm_ref(limbs, sl)


@pytest.mark.parametrize("case", ["zeros", "ones", "same", "r-1", "tiny"])
def test_msm_edge_scalars(case: str) -> None:
    n = 5000
    limbs = _bases(n)
    ss = {"zeros": [0] * n, "ones": [1] * n, "same": [RNG.randrange(R)] * n,
          "r-1": [R - 1] * n, "tiny": [RNG.randrange(3) for _ in range(n)]}[case]  # fmt: skip
    sl = ints_to_limbs(ss)
    assert msm.msm_g1(msm.bases_to_device(limbs), cp.asarray(sl)) == msm.msm_ref(limbs, sl)


def test_msm_edge_bases() -> None:
    n = 4000
    limbs = _bases(7)[np.array([RNG.randrange(7) for _ in range(n)])]
    limbs[::3] = 0  # the point at infinity
    limbs[1:3] = msm.random_bases_limbs([11, R - 11])  # P and -P
    sl = ints_to_limbs(rand(n)).copy()
    sl[1:3] = sl[1]  # equal scalars on P and -P
    bases = msm.bases_to_device(limbs)
    assert msm.msm_g1(bases, cp.asarray(sl)) == msm.msm_ref(limbs, sl)
    # a reused, larger batch buffer
    buf = cp.zeros((n + 100, 24), dtype=cp.uint32)
    msm.bases_to_device(limbs, out=buf)
    assert msm.msm_g1(buf, cp.asarray(sl)) == msm.msm_ref(limbs, sl)


def test_msm_rejects_unreduced_scalar() -> None:
    limbs = _bases(4)
    sl = ints_to_limbs([1, 2, 3, (1 << 256) - 1])
    with pytest.raises(ValueError):
        msm.msm_g1(msm.bases_to_device(limbs), cp.asarray(sl))


def test_g1_sum_and_fixed_base() -> None:
    n = 3000
    limbs = _bases(n)
    bases = msm.bases_to_device(limbs)
    assert msm.g1_sum(bases) == msm.msm_ref(limbs, ints_to_limbs([1] * n))
    idx = np.array(sorted(RNG.sample(range(n), 500)), dtype=np.int64)
    assert msm.g1_sum(bases, cp.asarray(idx)) == msm.msm_ref(limbs[idx], ints_to_limbs([1] * 500))
    ks = rand(1000) + [0, 1, R - 1]
    out = msm.fixed_base_mul_g1(G1Point(), cp.asarray(ints_to_limbs(ks)))
    assert np.array_equal(out, msm.random_bases_limbs(ks))


def _bases_g2(n: int, distinct: int = 256) -> np.ndarray:
    ks = [RNG.randrange(1, R) for _ in range(min(n, distinct))]
    return msm.random_bases_g2_limbs((ks * (n // len(ks) + 1))[:n])


@pytest.mark.parametrize("n", [1, 2, 31, 1000, 1 << 14])
def test_msm_g2_random(n: int) -> None:
    limbs = _bases_g2(n)
    sl = ints_to_limbs(rand(n))
    bases = msm.bases_g2_to_device(limbs)
    assert msm.msm_g2(bases, cp.asarray(sl)) == msm.msm_g2_ref(limbs, sl)


@pytest.mark.parametrize("window", [3, 8, 16])
def test_msm_g2_windows_and_edges(window: int) -> None:
    n = 600
    limbs = _bases_g2(n, 40)
    limbs[::9] = 0  # infinity
    limbs[1:3] = msm.random_bases_g2_limbs([5, R - 5])  # P and -P
    ss = rand(n)
    ss[1] = ss[2]
    ss[10:60] = [1] * 50
    ss[60:70] = [0] * 10
    sl = ints_to_limbs(ss)
    # the key's byte layout uploads as it is
    raw = limbs.view(np.uint8).reshape(n, 192)
    got = msm.msm_g2(msm.bases_g2_to_device(raw), cp.asarray(sl), window)
    assert got == msm.msm_g2_ref(limbs, sl)


def test_msm_g2_same_scalar() -> None:
    n = 3000
    limbs = _bases_g2(n, 64)
    sl = ints_to_limbs([RNG.randrange(R)] * n)
    assert msm.msm_g2(msm.bases_g2_to_device(limbs), cp.asarray(sl)) == msm.msm_g2_ref(limbs, sl)


def _peak(fn) -> int:
    cp.get_default_memory_pool().free_all_blocks()
    with gpu.PeakTracker() as t:
        fn(t)
        return t.peak


def test_msm_footprint_matches_pool_peak() -> None:
    n = 1 << 18
    limbs = np.tile(_bases(1024), (n // 1024, 1))
    sl = ints_to_limbs(rand(1024) * (n // 1024))

    def run(t: gpu.PeakTracker) -> None:
        bases = msm.bases_to_device(limbs)
        scalars = cp.asarray(sl)
        msm.msm_g1(bases, scalars)

    peak = _peak(run)
    pred = footprint.msm_device_bytes(n)["total"]
    assert abs(peak - pred) <= 0.05 * pred, (peak, pred)


def test_msm_g2_footprint_matches_pool_peak() -> None:
    n = 1 << 16
    limbs = np.tile(_bases_g2(256), (n // 256, 1))
    sl = ints_to_limbs(rand(256) * (n // 256))

    def run(t: gpu.PeakTracker) -> None:
        bases = msm.bases_g2_to_device(limbs)
        scalars = cp.asarray(sl)
        msm.msm_g2(bases, scalars)

    peak = _peak(run)
    pred = footprint.msm_device_bytes(n, group="g2")["total"]
    assert abs(peak - pred) <= 0.05 * pred, (peak, pred)


def test_ntt_footprint_matches_pool_peak() -> None:
    n = 1 << 20
    ntt.clear_caches()
    vals = ints_to_limbs(rand(1024) * (n // 1024))

    def run(t: gpu.PeakTracker) -> None:
        a, b, c = (cp.asarray(vals) for _ in range(3))
        t.reset_peak()
        base = t.current
        ntt.compute_h(a, b, c)
        ntt.coset_ntt(a)
        t.peak -= base

    peak = _peak(run)
    pred = footprint.ntt_device_bytes(n)
    assert abs(peak - pred) <= 0.05 * pred, (peak, pred)
    ntt.clear_caches()


def test_oom_becomes_vram_exhausted() -> None:
    pool = cp.get_default_memory_pool()
    n = 1 << 16
    limbs = _bases(n, 256)
    bases = msm.bases_to_device(limbs)
    scalars = cp.asarray(ints_to_limbs(rand(n)))
    pool.free_all_blocks()
    limit = pool.get_limit()
    pool.set_limit(size=pool.total_bytes() + (1 << 20))
    try:
        with pytest.raises(VramExhausted) as e:
            msm.msm_g1(bases, scalars)
        assert e.value.pool.startswith("gpu") and e.value.requested > 0
    finally:
        pool.set_limit(size=limit)
    assert msm.msm_g1(bases, scalars) == msm.msm_ref(limbs, cp.asnumpy(scalars))
