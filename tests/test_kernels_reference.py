"""CPU side of the real kernels (CI, no GPU).

1. The references against independent checks: the NTT reference against a naive DFT,
   round trips and coset relations; h_ref against polynomial identities; the MSM
   reference (arkworks) against a naive sum.
2. The kernels' own code, built for the host (tests/host_harness: the PTX carry chains
   emulated), against Python integers: field and curve arithmetic, and the complete
   NTT / MSM drivers of simgpu.gpu.ntt and simgpu.gpu.msm with their pass plans,
   tables, digit sorting and reduction rounds.  Skipped without a C++ compiler.
3. The footprint model against the drivers' actual allocations (host harness).
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from simgpu.errors import SimgpuError
from simgpu.gpu import cuda as gpu
from simgpu.gpu import footprint, msm, ntt
from simgpu.gpu.bls12_381 import COSET_GENERATOR, FP, FR, P_MOD, R_ORDER, root_of_unity
from simgpu.gpu.encoding import g1_from_xy, g1_to_limbs, ints_to_limbs, limbs_to_ints

R = R_ORDER
RNG = random.Random()


def rand(n: int) -> list[int]:
    return [RNG.randrange(R) for _ in range(n)]


# --------------------------------------------------------------------------- references


def naive_dft(x: list[int], w: int) -> list[int]:
    n = len(x)
    return [sum(x[j] * pow(w, i * j, R) for j in range(n)) % R for i in range(n)]


@pytest.mark.parametrize("log_n", range(0, 6))
def test_ntt_ref_matches_naive_dft(log_n: int) -> None:
    n = 1 << log_n
    x = rand(n)
    w = root_of_unity(log_n)
    assert ntt.ntt_ref(x) == naive_dft(x, w)
    assert ntt.ntt_ref(x, inverse=True) == [v * pow(n, -1, R) % R for v in naive_dft(x, pow(w, -1, R))]
    g = COSET_GENERATOR
    assert ntt.ntt_ref(x, coset=True) == naive_dft([v * pow(g, j, R) % R for j, v in enumerate(x)], w)


@pytest.mark.parametrize("log_n", [0, 1, 3, 8, 10])
def test_ntt_ref_round_trips(log_n: int) -> None:
    x = rand(1 << log_n)
    assert ntt.ntt_ref(ntt.ntt_ref(x), inverse=True) == x
    assert ntt.ntt_ref(ntt.ntt_ref(x, coset=True), inverse=True, coset=True) == x


def test_coset_evaluations_are_polynomial_values() -> None:
    n = 16
    coeffs = rand(n)
    evals = ntt.ntt_ref(coeffs, coset=True)
    w, g = root_of_unity(4), COSET_GENERATOR
    for i in (0, 3, 15):
        pt = g * pow(w, i, R) % R
        assert evals[i] == sum(c * pow(pt, j, R) for j, c in enumerate(coeffs)) % R


@pytest.mark.parametrize("log_n", [0, 1, 4, 7])
def test_h_ref_is_the_quotient(log_n: int) -> None:
    n = 1 << log_n
    # a satisfied constraint system: a_i b_i = c_i on the domain, so Z divides A B - C
    a, b = rand(n), rand(n)
    c = [x * y % R for x, y in zip(a, b, strict=True)]
    h = ntt.h_ref(a, b, c)
    A, B, C = (ntt.ntt_ref(v, inverse=True) for v in (a, b, c))

    def ev(p: list[int], x: int) -> int:
        return sum(v * pow(x, j, R) for j, v in enumerate(p)) % R

    for _ in range(3):  # A B - C = h Z at random points, Z = X^n - 1
        x = RNG.randrange(R)
        assert (ev(A, x) * ev(B, x) - ev(C, x)) % R == ev(h, x) * (pow(x, n, R) - 1) % R
    assert h[-1] == 0 or n == 1  # deg h = deg(A B - C) - n <= n - 2


def test_msm_ref_matches_naive_sum() -> None:
    g = G1Point()
    ks = [RNG.randrange(1, R) for _ in range(20)]
    ss = rand(20)
    ss[3] = 0
    limbs = msm.random_bases_limbs(ks)
    limbs[5] = 0  # infinity
    exp = G1Point.identity()
    for i, (k, s) in enumerate(zip(ks, ss, strict=True)):
        if i != 5:
            exp = exp + g * Scalar(k) * Scalar(s)
    assert msm.msm_ref(limbs, ints_to_limbs(ss)) == exp
    assert msm.msm_ref(limbs[:0], ints_to_limbs([])) == G1Point.identity()


def test_constants_and_header() -> None:
    assert pow(root_of_unity(20), 1 << 20, R) == 1 and pow(root_of_unity(20), 1 << 19, R) != 1
    for f in (FR, FP):
        assert f.modulus < 1 << (f.bits - 1)  # the limb algorithms' headroom
        assert (f.modulus * f.inv32 + 1) % (1 << 32) == 0
    h = gpu.constants_header()
    assert f"0x{FP.inv32:08x}u" in h and f"0x{FR.modulus & 0xFFFFFFFF:08x}u" in h
    src = gpu.assemble_source("msm.cu", ("MSM_PART=2",))
    assert src.startswith("#define MSM_PART 2") and "struct FpP" in src and '#include "' not in src


def test_cupy_missing_is_one_line_error() -> None:
    if gpu.cupy_available():
        pytest.skip("checks the message shown without CuPy; CuPy is installed here")
    with pytest.raises(SimgpuError) as e:
        gpu.get_cupy()
    assert "\n" not in str(e.value) and "CuPy/CUDA not available" in str(e.value)


def test_footprint_functions() -> None:
    last = 0
    for lg in range(4, 25, 4):
        d = footprint.msm_device_bytes(1 << lg)
        assert d["total"] == sum(v for k, v in d.items() if k != "total") > last
        last = d["total"]
        p = footprint.msm_plan(1 << lg)
        assert p.nwin * p.c >= 256 and p.buckets == 1 << (p.c - 1)
    assert footprint.ntt_device_bytes(1 << 20) > 32 * (1 << 19)
    with pytest.raises(ValueError):
        footprint.ntt_device_bytes(3)


# --------------------------------------------------------------------------- host harness


def _load_hostops():
    # by path: works whether or not the repository root is on sys.path
    path = Path(__file__).resolve().parent / "host_harness" / "hostops.py"
    spec = importlib.util.spec_from_file_location("simgpu_test_hostops", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


hostops = _load_hostops()


@pytest.fixture(scope="module")
def harness():
    if hostops.compiler() is None:
        pytest.skip("no C++ compiler for the host harness")
    h = hostops.Harness()
    yield h
    h.close()


@pytest.mark.parametrize("field", [FR, FP])
def test_host_field_arithmetic(harness, field) -> None:
    be = hostops.HostMsmBackend(harness)
    q, n = field.modulus, field.limbs
    edge = [0, 1, 2, q - 1, q - 2, q // 2, (1 << 32) % q, (1 << (32 * n - 1)) % q]
    xs = edge + [RNG.randrange(q) for _ in range(300)]
    ys = edge[::-1] + [RNG.randrange(q) for _ in range(300)]
    a = ints_to_limbs([field.to_mont(v) for v in xs], n)
    b = ints_to_limbs([field.to_mont(v) for v in ys], n)
    which = 0 if field is FR else 1

    # Fp is reduced lazily: results are representatives in [0, 2q); Fr's are canonical.
    bound = 2 * q if field is FP else q

    def run(op: int, x=a, y=b) -> list[int]:
        out = limbs_to_ints(be.field(which, op, x, y))
        assert all(v < bound for v in out)
        return [field.from_mont(v) for v in out]

    assert run(0) == [x * y % q for x, y in zip(xs, ys, strict=True)]
    assert run(1) == [(x + y) % q for x, y in zip(xs, ys, strict=True)]
    assert run(2) == [(x - y) % q for x, y in zip(xs, ys, strict=True)]
    assert run(3, a[:40], b[:40]) == [pow(x, -1, q) if x else 0 for x in xs[:40]]
    assert run(6) == [(-x) % q for x in xs]
    assert run(7) == [x * x % q for x in xs]
    # chains of operations on non-canonical representatives (q itself stands for 0)
    if field is FP:
        reps = ints_to_limbs([q] * 4 + [field.to_mont(x) + q for x in xs[8:40]], n)
        vals = [0] * 4 + xs[8:40]
        got = limbs_to_ints(be.field(which, 0, reps, reps))
        assert [field.from_mont(v) for v in got] == [v * v % q for v in vals]
        got = limbs_to_ints(be.field(which, 2, reps, reps[::-1].copy()))
        assert [field.from_mont(v) for v in got] == [
            (x - y) % q for x, y in zip(vals, vals[::-1], strict=True)
        ]
    std = ints_to_limbs(xs, n)
    assert [v % q for v in limbs_to_ints(be.field(which, 4, std, std))] == [field.to_mont(x) for x in xs]
    assert [v % q for v in limbs_to_ints(be.field(which, 5, a, a))] == xs


@pytest.mark.parametrize("field", [FR, FP])
def test_host_multiplication_at_the_input_bounds(harness, field) -> None:
    """The wide multiply-add schedule's carry bounds (field.cuh) at their edges: every
    product of the largest inputs a field accepts (r - 1 for Fr; up to 2p - 1 for the
    lazy Fp, which are representatives of p - 1, 0, ...), and thousands of random ones."""
    be = hostops.HostMsmBackend(harness)
    q, n = field.modulus, field.limbs
    top = 2 * q if field is FP else q  # inputs the multiplication accepts: [0, top)
    edge = [top - 1, top - 2, top - q, top - q + 1, q - 1, 1, 0, (1 << (32 * n - 2)) % top]
    xs = [a for a in edge for _ in edge] + [RNG.randrange(top) for _ in range(4000)]
    ys = [b for _ in edge for b in edge] + [RNG.randrange(top) for _ in range(4000)]
    out = limbs_to_ints(be.field(0 if field is FR else 1, 0, ints_to_limbs(xs, n), ints_to_limbs(ys, n)))
    rinv = pow(field.R, -1, q)
    assert all(v < top for v in out)
    assert [v % q for v in out] == [x * y * rinv % q for x, y in zip(xs, ys, strict=True)]


def _xy(p: G1Point) -> tuple[int, int]:
    v = limbs_to_ints(g1_to_limbs([p]).reshape(2, 12))
    return v[0], v[1]


def _xyzz_row(p: G1Point) -> list[int]:
    if p == G1Point.identity():
        return [0] * 4
    x, y = _xy(p)
    z = RNG.randrange(1, P_MOD)
    zz, zzz = z * z % P_MOD, z * z * z % P_MOD
    return [FP.to_mont(v) for v in (x * zz % P_MOD, y * zzz % P_MOD, zz, zzz)]


def _aff_row(p: G1Point) -> list[int]:
    return [0, 0] if p == G1Point.identity() else [FP.to_mont(v) for v in _xy(p)]


def test_host_g1_formulas(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    g, inf = G1Point(), G1Point.identity()
    pts = [g * Scalar(RNG.randrange(1, R)) for _ in range(12)]
    cases = [(pts[i], pts[i + 1]) for i in range(8)]
    cases += [(pts[0], pts[0]), (pts[1], -pts[1]), (inf, pts[2]), (pts[3], inf), (inf, inf)]
    a = ints_to_limbs(sum((_xyzz_row(p) for p, _ in cases), []), 12).reshape(-1, 48)
    b_aff = ints_to_limbs(sum((_aff_row(q) for _, q in cases), []), 12).reshape(-1, 24)
    b_xyzz = ints_to_limbs(sum((_xyzz_row(q) for _, q in cases), []), 12).reshape(-1, 48)
    dec = [msm.xyzz_to_point(r) for r in be.g1(0, a, b_aff)]
    assert dec == [p + q for p, q in cases]
    assert [msm.xyzz_to_point(r) for r in be.g1(1, a, b_xyzz)] == [p + q for p, q in cases]
    assert [msm.xyzz_to_point(r) for r in be.g1(2, a, b_xyzz)] == [p + p for p, _ in cases]
    assert [msm.xyzz_to_point(r) for r in be.g1(3, a, b_aff)] == [q + q for _, q in cases]
    for k in (0, 1, 6, 999, (1 << 20) - 1):
        assert [msm.xyzz_to_point(r) for r in be.g1(4, a, b_xyzz, k)] == [p * Scalar(k) for p, _ in cases]
    assert g1_from_xy(0, 0) == inf


@pytest.mark.parametrize("tile", [10, 3])
def test_host_ntt_drivers(harness, tile: int) -> None:
    be = hostops.HostNttBackend(harness)
    be.tile_log_max = tile  # small tiles: many passes, C > 1 groups per tile
    t = ntt.NttTables(be)

    def mont(vals: list[int], k: int, n: int) -> np.ndarray:
        return ints_to_limbs([FR.to_mont(v) for v in vals]).reshape(k, n, 8).copy()

    def std(x: np.ndarray) -> list[int]:
        return [FR.from_mont(v) for v in limbs_to_ints(x.reshape(-1, 8))]

    for log_n in [0, 1, 2, 5, 7, 9] if tile == 3 else [0, 3, 8, 10, 11]:
        n, k = 1 << log_n, 2
        xs = [rand(n) for _ in range(k)]
        for name, fn, inv, coset in (
            ("ntt", lambda v, ln: ntt._t_ntt(be, t, v, ln, False), False, False),
            ("intt", lambda v, ln: ntt._t_ntt(be, t, v, ln, True), True, False),
            ("coset_ntt", lambda v, ln: ntt._t_coset_ntt(be, t, v, ln), False, True),
            ("coset_intt", lambda v, ln: ntt._t_coset_intt(be, t, v, ln), True, True),
        ):
            x = mont(sum(xs, []), k, n)
            fn([x[i] for i in range(k)], log_n)
            exp = sum((ntt.ntt_ref(v, inverse=inv, coset=coset) for v in xs), [])
            assert std(x) == exp, (name, log_n)
        abc = [[rand(n) for _ in range(k)] for _ in range(3)]
        a, b, c = (ints_to_limbs(sum(v, [])).reshape(k, n, 8).copy() for v in abc)
        ntt._t_compute_h(be, t, list(a), list(b), list(c), log_n)
        exp = sum((ntt.h_ref(abc[0][i], abc[1][i], abc[2][i]) for i in range(k)), [])
        assert limbs_to_ints(a.reshape(-1, 8)) == exp


def _host_msm(be, limbs: np.ndarray, ss: list[int], **kw) -> G1Point:
    bases = be.upload(limbs)
    be.fp_mul_const(bases, bases.size // 12, be.upload(ints_to_limbs([FP.R2], 12)))
    rows, plan = msm.msm_windows_on(be, bases, be.upload(ints_to_limbs(ss)), **kw)
    return msm.combine_windows(rows, plan.c)


def test_host_msm_driver(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    for n in (1, 2, 5, 100):
        limbs = msm.random_bases_limbs([RNG.randrange(1, R) for _ in range(n)])
        for ss, kw in (
            (rand(n), {}),
            (rand(n), {"window": 2}),
            (rand(n), {"window": 9, "piece": 8, "seg": 16}),
            ([0] * n, {}),
            ([1] * n, {"window": 5, "piece": 8}),
            ([R - 1] * n, {"window": 4, "piece": 8, "seg": 2}),
        ):
            assert _host_msm(be, limbs, ss, **kw) == msm.msm_ref(limbs, ints_to_limbs(ss)), (n, kw)


def test_host_msm_edge_bases_and_long_buckets(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    n = 400
    limbs = msm.random_bases_limbs([RNG.randrange(1, R) for _ in range(5)])
    limbs = limbs[np.array([RNG.randrange(5) for _ in range(n)])]
    limbs[::7] = 0
    limbs[1:3] = msm.random_bases_limbs([3, R - 3])
    for ss in (rand(n), [7] * n):  # one bucket of n points: several reduction rounds
        assert _host_msm(be, limbs, ss, window=6, piece=8) == msm.msm_ref(limbs, ints_to_limbs(ss))


def test_host_g1_sum_and_fixed_base(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    n = 150
    limbs = msm.random_bases_limbs([RNG.randrange(1, R) for _ in range(n)])
    bases = be.upload(limbs)
    be.fp_mul_const(bases, bases.size // 12, be.upload(ints_to_limbs([FP.R2], 12)))
    got = msm.xyzz_to_point(msm.g1_sum_on(be, bases, None, n, 8))
    assert got == msm.msm_ref(limbs, ints_to_limbs([1] * n))
    idx = np.array(RNG.sample(range(n), 40), dtype=np.uint32)
    got = msm.xyzz_to_point(msm.g1_sum_on(be, bases, be.upload(idx), 40, 8))
    assert got == msm.msm_ref(limbs[idx], ints_to_limbs([1] * 40))
    ks = rand(40) + [0, 1, R - 1]
    out = msm.fixed_base_on(be, G1Point(), be.upload(ints_to_limbs(ks)), len(ks))
    assert np.array_equal(out, msm.random_bases_limbs(ks))


def test_host_msm_allocations_match_footprint(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    n = 200
    limbs = msm.random_bases_limbs([RNG.randrange(1, R) for _ in range(n)])
    bases = be.upload(limbs)
    scalars = be.upload(ints_to_limbs(rand(n)))
    msm.msm_windows_on(be, bases, scalars)
    assert be.peak == footprint.msm_device_bytes(n)["total"]
    for kw in ({"window": 9, "piece": 64, "seg": 16}, {"window": 3, "piece": 16}):
        be.peak = be.current
        msm.msm_windows_on(be, bases, scalars, **kw)
        assert be.peak - be.current == footprint.msm_device_bytes(n, **kw)["total"] - 128 * n


def test_msm_size_limit_is_an_error() -> None:
    class Huge:
        shape = (1 << 28, 8)

    with pytest.raises(ValueError, match="split it"):
        msm.msm_windows_on(None, None, Huge(), window=16)


# --------------------------------------------------------------------------- G2 (host harness)


def _f2(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    q = P_MOD
    return ((a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)


def test_host_fp2_arithmetic(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    q = P_MOD
    edge = [(0, 0), (1, 0), (0, 1), (q - 1, q - 1), (q - 1, 1), (1, q - 1)]
    xs = edge + [(RNG.randrange(q), RNG.randrange(q)) for _ in range(200)]
    ys = edge[::-1] + [(RNG.randrange(q), RNG.randrange(q)) for _ in range(200)]

    # lazily reduced inputs: each coordinate either v or v + p (both represent v)
    def enc(vals):
        words = [FP.to_mont(c) + q * RNG.randrange(2) for v in vals for c in v]
        return ints_to_limbs(words, 12).reshape(-1, 24)

    a, b = enc(xs), enc(ys)

    def run(op: int) -> list[tuple[int, int]]:
        out = limbs_to_ints(be.fp2(op, a, b).reshape(-1, 12))
        assert all(v < 2 * q for v in out)
        v = [FP.from_mont(x) for x in out]
        return list(zip(v[::2], v[1::2], strict=True))

    assert run(0) == [_f2(x, y) for x, y in zip(xs, ys, strict=True)]
    assert run(1) == [((x[0] + y[0]) % q, (x[1] + y[1]) % q) for x, y in zip(xs, ys, strict=True)]
    assert run(2) == [((x[0] - y[0]) % q, (x[1] - y[1]) % q) for x, y in zip(xs, ys, strict=True)]
    assert run(3) == [_f2(x, x) for x in xs]
    assert run(4) == [((-x[0]) % q, (-x[1]) % q) for x in xs]


def _g2_coords(p: G2Point) -> list[int]:
    return limbs_to_ints(msm.g2_limbs([p]).reshape(4, 12))  # x0, x1, y0, y1


def _g2_xyzz_row(p: G2Point) -> list[int]:
    if p == G2Point.identity():
        return [0] * 8
    x0, x1, y0, y1 = _g2_coords(p)
    z = (RNG.randrange(1, P_MOD), RNG.randrange(P_MOD))
    zz = _f2(z, z)
    zzz = _f2(zz, z)
    vals = [*_f2((x0, x1), zz), *_f2((y0, y1), zzz), *zz, *zzz]
    return [FP.to_mont(v) for v in vals]


def _g2_aff_row(p: G2Point) -> list[int]:
    return [0] * 4 if p == G2Point.identity() else [FP.to_mont(v) for v in _g2_coords(p)]


def test_host_g2_formulas(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    g, inf = G2Point(), G2Point.identity()
    pts = [g * Scalar(RNG.randrange(1, R)) for _ in range(8)]
    cases = [(pts[i], pts[i + 1]) for i in range(5)]
    cases += [(pts[0], pts[0]), (pts[1], -pts[1]), (inf, pts[2]), (pts[3], inf), (inf, inf)]
    a = ints_to_limbs(sum((_g2_xyzz_row(p) for p, _ in cases), []), 12).reshape(-1, 96)
    b_aff = ints_to_limbs(sum((_g2_aff_row(q) for _, q in cases), []), 12).reshape(-1, 48)
    b_xyzz = ints_to_limbs(sum((_g2_xyzz_row(q) for _, q in cases), []), 12).reshape(-1, 96)
    dec = msm.xyzz_to_point_g2
    assert [dec(r) for r in be.g2(0, a, b_aff)] == [p + q for p, q in cases]
    assert [dec(r) for r in be.g2(1, a, b_xyzz)] == [p + q for p, q in cases]
    assert [dec(r) for r in be.g2(2, a, b_xyzz)] == [p + p for p, _ in cases]
    assert [dec(r) for r in be.g2(3, a, b_aff)] == [q + q for _, q in cases]
    for k in (0, 1, 6, 999):
        assert [dec(r) for r in be.g2(4, a, b_xyzz, k)] == [p * Scalar(k) for p, _ in cases]


def _host_msm_g2(be, limbs: np.ndarray, ss: list[int], **kw) -> G2Point:
    bases = be.upload(limbs)
    be.fp_mul_const(bases, bases.size // 12, be.upload(ints_to_limbs([FP.R2], 12)))
    rows, plan = msm.msm_windows_on(be, bases, be.upload(ints_to_limbs(ss)), group=msm.G2, **kw)
    return msm.combine_windows_g2(rows, plan.c)


def test_host_msm_g2_driver(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    n = 40
    limbs = msm.random_bases_g2_limbs([RNG.randrange(1, R) for _ in range(n)])
    limbs[7] = 0  # infinity
    limbs[3] = msm.random_bases_g2_limbs([R - 1])[0]  # -G
    limbs[4] = msm.random_bases_g2_limbs([1])[0]  # G
    for ss, kw in (
        (rand(n), {}),
        (rand(n), {"window": 5, "piece": 8, "seg": 4}),
        ([RNG.randrange(3) for _ in range(n)], {"window": 3, "piece": 8}),
        ([0] * n, {}),
    ):
        assert _host_msm_g2(be, limbs, ss, **kw) == msm.msm_g2_ref(limbs, ints_to_limbs(ss)), kw


def test_host_msm_g2_allocations_match_footprint(harness) -> None:
    be = hostops.HostMsmBackend(harness)
    n = 30
    limbs = msm.random_bases_g2_limbs([RNG.randrange(1, R) for _ in range(n)])
    bases = be.upload(limbs)
    scalars = be.upload(ints_to_limbs(rand(n)))
    kw = {"window": 4, "piece": 8, "seg": 2}
    be.peak = be.current
    msm.msm_windows_on(be, bases, scalars, group=msm.G2, **kw)
    want = footprint.msm_device_bytes(n, group="g2", **kw)
    assert be.peak - be.current == want["total"] - want["bases"] - want["scalars"]
    assert want["bases"] == 192 * n
    assert footprint.msm_transient_bytes(n, "g2") > footprint.msm_transient_bytes(n)


@pytest.mark.parametrize("log_n", [8, 9, 10, 13])
def test_host_bitrev_tiled_is_the_permutation(harness, log_n: int) -> None:
    be = hostops.HostNttBackend(harness)
    n, k = 1 << log_n, 2
    x = np.random.default_rng().integers(0, 1 << 32, size=(k, n, 8), dtype=np.uint64).astype(np.uint32)
    x[..., 7] &= 0x3FFFFFFF  # < r: the constant multiply below needs reduced inputs
    rev = np.array([ntt._bitrev(i, log_n) for i in range(n)])
    y = x.copy()
    be.bitrev([y[i] for i in range(k)], log_n, None)
    assert np.array_equal(y, x[:, rev])
    one = ints_to_limbs([FR.R2])  # times R^2 in Montgomery: to Montgomery form
    be.bitrev([y[i] for i in range(k)], log_n, one)
    got = [FR.from_mont(v) for v in limbs_to_ints(y.reshape(-1, 8))]
    assert got == limbs_to_ints(x.reshape(-1, 8))
