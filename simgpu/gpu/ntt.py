"""NTT family over BLS12-381's Fr: GPU kernels through CuPy, and the CPU reference.

Device arrays are cupy uint32 arrays of shape (n, 8) or (k, n, 8) (k vectors of the
same n), C-contiguous, little-endian limbs; the transforms work in place on Montgomery
form, natural order in and out:

    to_montgomery(x); ntt(x); ntt(x, inverse=True); coset_ntt(x); coset_intt(x)
    h_pointwise(a, b, c)          a <- (a*b - c) / Z on the coset g*<w>
    compute_h(a, b, c)            Groth16's H: a <- h's coefficients (standard form)

`ntt_ref`, `h_ref` are the reference in Python integers.

The transforms are driven from here (pass plan, tables, scaling hooks) through a small
launcher interface; `_CupyLauncher` launches the kernels of ntt.cu, and the CI
tests drive the same code through a host build of the same kernels
(tests/host_harness), so the orchestration is tested without a GPU too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simgpu.gpu import cuda as gpu
from simgpu.gpu import transfer
from simgpu.gpu.bls12_381 import COSET_GENERATOR, FR, R_ORDER, root_of_unity
from simgpu.gpu.encoding import ints_to_limbs
from simgpu.gpu.footprint import SCALE_LO

R = R_ORDER
TILE_LOG = 10  # elements per shared-memory tile: 2^10 x 32 B = 32 KB
MAX_LOG_N = 28  # twiddle indices are 32-bit (8 words each)
#: From this size the bit reversal runs by tiles of 16 x 16 elements (ntt.cu, BR_B = 4).
BITREV_TILE_MIN_LOG = 8

# --------------------------------------------------------------------------- reference


def _ntt_ref_core(a: list[int], w: int) -> list[int]:
    """In-order radix-2 DIF with a final bit reversal: sum_j a_j w^(ij) for every i."""
    n = len(a)
    a = list(a)
    h = n // 2
    while h >= 1:
        wh = pow(w, n // (2 * h), R)
        tw = [1] * h
        for i in range(1, h):
            tw[i] = tw[i - 1] * wh % R
        if h >= 64:  # long runs: slice the blocks
            for s in range(0, n, 2 * h):
                u, v = a[s : s + h], a[s + h : s + 2 * h]
                a[s : s + h] = [(x + y) % R for x, y in zip(u, v, strict=True)]
                a[s + h : s + 2 * h] = [(x - y) * t % R for x, y, t in zip(u, v, tw, strict=True)]
        else:  # short runs: slice by stride, one twiddle per slice
            for j in range(h):
                u, v, t = a[j :: 2 * h], a[j + h :: 2 * h], tw[j]
                a[j :: 2 * h] = [(x + y) % R for x, y in zip(u, v, strict=True)]
                a[j + h :: 2 * h] = [(x - y) * t % R for x, y in zip(u, v, strict=True)]
        h //= 2
    log_n = n.bit_length() - 1
    return [a[_bitrev(i, log_n)] for i in range(n)]


def _bitrev(i: int, bits: int) -> int:
    return int(f"{i:0{bits}b}"[::-1], 2) if bits else 0


def ntt_ref(values: list[int], inverse: bool = False, coset: bool = False) -> list[int]:
    """Reference transform in Python integers (standard form, natural order).

    forward: y_i = sum_j x_j w^(ij)          (coset: x_j g^j first: y_i = X(g w^i))
    inverse: x_j = n^-1 sum_i y_i w^(-ij)    (coset: then x_j g^-j)
    with w the primitive n-th root of unity of bls12_381.root_of_unity and g = 7."""
    n = len(values)
    if n < 1 or n & (n - 1):
        raise ValueError(f"NTT size must be a power of two, got {n}")
    log_n = n.bit_length() - 1
    w = root_of_unity(log_n)
    vals = [v % R for v in values]
    if not inverse:
        if coset:
            g, gi = COSET_GENERATOR, 1
            for i in range(n):
                vals[i] = vals[i] * gi % R
                gi = gi * g % R
        return _ntt_ref_core(vals, w)
    out = _ntt_ref_core(vals, pow(w, -1, R))
    ninv = pow(n, -1, R)
    if coset:
        g_inv, s = pow(COSET_GENERATOR, -1, R), ninv
        for i in range(n):
            out[i] = out[i] * s % R
            s = s * g_inv % R
        return out
    return [v * ninv % R for v in out]


def z_coset_inverse(n: int) -> int:
    """1 / Z(g w^i) with Z = X^n - 1: the same for every i, (g^n - 1)^-1."""
    return pow(pow(COSET_GENERATOR, n, R) - 1, -1, R)


def h_ref(a: list[int], b: list[int], c: list[int]) -> list[int]:
    """Reference of compute_h: the coefficients of h = (A B - C) / Z, where A, B, C
    interpolate a, b, c over the domain <w> of size n (standard form ints)."""
    n = len(a)
    if not (len(b) == len(c) == n):
        raise ValueError("a, b, c must have one length")
    ea, eb, ec = (ntt_ref(ntt_ref(v, inverse=True), coset=True) for v in (a, b, c))
    zinv = z_coset_inverse(n)
    eh = [(x * y - z) * zinv % R for x, y, z in zip(ea, eb, ec, strict=True)]
    return ntt_ref(eh, inverse=True, coset=True)


# --------------------------------------------------------------------------- plan


def pass_plan(log_n: int, tile_log: int = TILE_LOG) -> list[int]:
    """Stages per pass: ceil(log_n / 10) passes of nearly equal size (24 -> 8, 8, 8)."""
    if log_n == 0:
        return []
    npass = -(-log_n // tile_log)
    base, extra = divmod(log_n, npass)
    return [base + 1] * extra + [base] * (npass - extra)


@dataclass(frozen=True)
class Scale:
    """A scaling hook of a pass: mode 1 multiplies by lo[0]; mode 2 by
    lo[idx & 1023] * hi[idx >> 10], idx the position or (bitrev) its bit reversal."""

    mode: int
    bitrev: bool
    lo: Any
    hi: Any
    # host-side factor for n = 1 (no pass runs): the factor at index 0
    factor0: int


class NttLauncher(Protocol):
    """What the orchestration needs from a device: arrays and the ntt.cu kernels."""

    xp: Any

    def upload(self, limbs: np.ndarray) -> Any: ...

    def ntt_pass(
        self,
        vecs: Sequence[Any],
        dif: bool,
        log_n: int,
        log_s: int,
        k: int,
        tile_log: int,
        inverse: bool,
        tw: Any,
        tw_log: int,
        pre: Scale | None,
        post: Scale | None,
    ) -> None: ...

    def bitrev(self, vecs: Sequence[Any], log_n: int, cst: Any | None) -> None: ...

    def mul_const(self, x: Any, cst: Any) -> None: ...

    def pointwise(self, a: Any, b: Any, c: Any, zinv: Any) -> None: ...

    def twiddles(self, count: int, lo: Any, hi: Any) -> Any: ...


def _mont_limbs(values: Sequence[int]) -> np.ndarray:
    return ints_to_limbs([FR.to_mont(v % R) for v in values])


def _powers(base: int, count: int, start: int = 1) -> list[int]:
    out, v = [], start % R
    for _ in range(count):
        out.append(v)
        v = v * base % R
    return out


class NttTables:
    """Device tables of one backend, built on first use and kept: the twiddle table of
    the largest size seen (smaller transforms read it with a stride), coset-shift tables
    and constants per size."""

    def __init__(self, be: NttLauncher) -> None:
        self.be = be
        self.tw: Any = None
        self.tw_log = 0
        self._scales: dict[tuple[str, int], Any] = {}
        self._consts: dict[tuple[str, int], Any] = {}

    def twiddles(self, log_n: int) -> tuple[Any, int]:
        if self.tw is None or self.tw_log < log_n:
            n = 1 << log_n
            w = root_of_unity(log_n)
            half = n // 2
            lo = self.be.upload(_mont_limbs(_powers(w, SCALE_LO)))
            hi = self.be.upload(_mont_limbs(_powers(pow(w, SCALE_LO, R), half // SCALE_LO + 1)))
            self.tw = None  # drop the smaller table before building the larger one
            self.tw = self.be.twiddles(half + 1, lo, hi)
            self.tw_log = log_n
            del lo, hi
        return self.tw, self.tw_log

    def const(self, name: str, log_n: int) -> tuple[Any, int]:
        key = (name, log_n if name in ("ninv", "zinv") else 0)
        n = 1 << log_n
        value = {
            "r2": FR.R2,  # raw limbs: mont_mul(x, R^2) = x R
            "raw_one": 1,  # raw limbs: mont_mul(x, 1) = x / R
            "ninv": FR.to_mont(pow(n, -1, R)),
            "zinv": FR.to_mont(z_coset_inverse(n)),
        }[name]
        if key not in self._consts:
            self._consts[key] = self.be.upload(ints_to_limbs([value]))
        # factor0: the same constant as a standard-form multiplier
        factor0 = {"r2": FR.R, "raw_one": pow(FR.R, -1, R)}.get(name, FR.from_mont(value))
        return self._consts[key], factor0

    def const_scale(self, name: str, log_n: int) -> Scale:
        arr, f0 = self.const(name, log_n)
        return Scale(1, False, arr, arr, f0)

    def power_scale(self, name: str, log_n: int, bitrev: bool) -> Scale:
        """c * g^(+-idx): 'coset' g^i, 'coset_inv' n^-1 g^-i, 'coset_h' n^-1 g^i."""
        n = 1 << log_n
        g = COSET_GENERATOR
        ginv = pow(g, -1, R)
        ninv = pow(n, -1, R)
        base, c = {"coset": (g, 1), "coset_inv": (ginv, ninv), "coset_h": (g, ninv)}[name]
        key = (name, log_n)
        if key not in self._scales:
            lo = self.be.upload(_mont_limbs(_powers(base, SCALE_LO, start=c)))
            hi = self.be.upload(_mont_limbs(_powers(pow(base, SCALE_LO, R), max(1, n // SCALE_LO))))
            self._scales[key] = (lo, hi)
        lo, hi = self._scales[key]
        return Scale(2, bitrev, lo, hi, c)

    def clear(self) -> None:
        self.tw = None
        self.tw_log = 0
        self._scales.clear()
        self._consts.clear()


def _run_passes(
    be: NttLauncher,
    tables: NttTables,
    vecs: Sequence[Any],
    log_n: int,
    dif: bool,
    inverse: bool,
    pre: Scale | None = None,
    post: Scale | None = None,
) -> None:
    """One full transform (DIF: natural -> bit-reversed; DIT: bit-reversed -> natural)
    with optional scaling on the first load and the last store."""
    # Tests shrink the tile (backend attribute) to exercise many passes at small sizes.
    tile_max = getattr(be, "tile_log_max", TILE_LOG)
    ks = pass_plan(log_n, tile_max)
    if not ks:  # n = 1: the transform is the identity; apply the factors at index 0
        f = (pre.factor0 if pre else 1) * (post.factor0 if post else 1) % R
        if f != 1:
            cst = be.upload(_mont_limbs([f]))
            for v in vecs:
                be.mul_const(v, cst)
        return
    tw, tw_log = tables.twiddles(log_n)
    tile_log = min(tile_max, log_n)
    log_s = log_n if dif else 0  # DIF runs the large spans first, DIT the small ones
    for i, k in enumerate(ks):
        if dif:
            log_s -= k
        be.ntt_pass(
            vecs,
            dif,
            log_n,
            log_s,
            k,
            tile_log,
            inverse,
            tw,
            tw_log,
            pre if i == 0 else None,
            post if i == len(ks) - 1 else None,
        )
        if not dif:
            log_s += k


# Transforms on a list of same-size vectors (device arrays of shape (n, 8)).


def _t_ntt(be: NttLauncher, t: NttTables, vecs: Sequence[Any], log_n: int, inverse: bool) -> None:
    if not inverse:
        _run_passes(be, t, vecs, log_n, dif=True, inverse=False)
        be.bitrev(vecs, log_n, None)
    else:
        be.bitrev(vecs, log_n, None)
        _run_passes(be, t, vecs, log_n, dif=False, inverse=True, post=t.const_scale("ninv", log_n))


def _t_coset_ntt(be: NttLauncher, t: NttTables, vecs: Sequence[Any], log_n: int) -> None:
    pre = t.power_scale("coset", log_n, bitrev=False)
    _run_passes(be, t, vecs, log_n, dif=True, inverse=False, pre=pre)
    be.bitrev(vecs, log_n, None)


def _t_coset_intt(be: NttLauncher, t: NttTables, vecs: Sequence[Any], log_n: int) -> None:
    be.bitrev(vecs, log_n, None)
    post = t.power_scale("coset_inv", log_n, bitrev=False)
    _run_passes(be, t, vecs, log_n, dif=False, inverse=True, post=post)


def _t_compute_h(
    be: NttLauncher,
    t: NttTables,
    a: Sequence[Any],
    b: Sequence[Any],
    c: Sequence[Any],
    log_n: int,
) -> None:
    """Groth16's H without a bit-reversal pass in between: an inverse DIF leaves the
    coefficients bit-reversed, its last store applies 1/n and the coset shift g^j at the
    bit-reversed index, and a forward DIT takes them back to natural-order evaluations
    on the coset.  The first load converts to Montgomery form."""
    allv = [*a, *b, *c]
    pre = t.const_scale("r2", log_n)
    post = t.power_scale("coset_h", log_n, bitrev=True)
    _run_passes(be, t, allv, log_n, dif=True, inverse=True, pre=pre, post=post)
    _run_passes(be, t, allv, log_n, dif=False, inverse=False)
    zinv, _ = t.const("zinv", log_n)
    for x, y, z in zip(a, b, c, strict=True):
        be.pointwise(x, y, z, zinv)
    post = t.power_scale("coset_inv", log_n, bitrev=True)
    _run_passes(be, t, a, log_n, dif=True, inverse=True, post=post)
    one, _ = t.const("raw_one", log_n)
    be.bitrev(a, log_n, one)  # back to natural order, out of Montgomery form


# --------------------------------------------------------------------------- CuPy backend


class _CupyLauncher:
    def __init__(self) -> None:
        self.cp = gpu.get_cupy()
        self.xp = self.cp
        self.mod = gpu.load_module("ntt.cu")
        self.k_dif = self.mod.get_function("ntt_dif_pass")
        self.k_dit = self.mod.get_function("ntt_dit_pass")
        self.k_bitrev = self.mod.get_function("ntt_bitrev")
        self.k_bitrev_tiled = self.mod.get_function("ntt_bitrev_tiled")
        self.k_mul = self.mod.get_function("fr_mul_const")
        self.k_pw = self.mod.get_function("fr_h_pointwise")
        self.k_tw = self.mod.get_function("ntt_twiddles")

    # through this thread's staging (simgpu.gpu.transfer): a pageable copy, even of a
    # pass's few pointers, would hold the other workers' launches while it ran
    def upload(self, limbs: np.ndarray) -> Any:
        return transfer.upload(np.ascontiguousarray(limbs, dtype=np.uint32))

    def _ptrs(self, vecs: Sequence[Any]) -> Any:
        return transfer.upload(np.array([v.data.ptr for v in vecs], dtype=np.uint64))

    def ntt_pass(
        self,
        vecs: Sequence[Any],
        dif: bool,
        log_n: int,
        log_s: int,
        k: int,
        tile_log: int,
        inverse: bool,
        tw: Any,
        tw_log: int,
        pre: Scale | None,
        post: Scale | None,
    ) -> None:
        u = np.uint32
        ptrs = self._ptrs(vecs)
        nul = tw  # any valid pointer for an unused table
        args = (
            ptrs, u(log_n), u(log_s), u(k), u(tile_log), u(inverse), tw, u(tw_log),
            u(pre.mode if pre else 0), u(pre.bitrev if pre else 0),
            pre.lo if pre else nul, pre.hi if pre else nul,
            u(post.mode if post else 0), u(post.bitrev if post else 0),
            post.lo if post else nul, post.hi if post else nul,
        )  # fmt: skip
        grid = (1 << (log_n - tile_log), len(vecs))
        (self.k_dif if dif else self.k_dit)(grid, (256,), args)

    def bitrev(self, vecs: Sequence[Any], log_n: int, cst: Any | None) -> None:
        n = 1 << log_n
        ptrs = self._ptrs(vecs)
        use = cst is not None
        args = (ptrs, np.uint32(log_n), np.uint32(use), cst if use else ptrs)
        if log_n >= BITREV_TILE_MIN_LOG:  # one block per tile (pair), 256 threads
            self.k_bitrev_tiled((1 << (log_n - BITREV_TILE_MIN_LOG), len(vecs)), (256,), args)
        else:
            self.k_bitrev(((n + 255) // 256, len(vecs)), (256,), args)

    def mul_const(self, x: Any, cst: Any) -> None:
        count = x.size // 8
        gpu.launch(self.k_mul, count, 256, (x, np.uint64(count), cst))

    def pointwise(self, a: Any, b: Any, c: Any, zinv: Any) -> None:
        count = a.size // 8
        gpu.launch(self.k_pw, count, 256, (a, b, c, np.uint64(count), zinv))

    def twiddles(self, count: int, lo: Any, hi: Any) -> Any:
        tw = self.cp.empty((count, 8), dtype=self.cp.uint32)
        gpu.launch(self.k_tw, count, 256, (tw, np.uint64(count), lo, hi))
        return tw


_backends: dict[int, tuple[_CupyLauncher, NttTables]] = {}


def _backend() -> tuple[_CupyLauncher, NttTables]:
    cp = gpu.get_cupy()
    dev = cp.cuda.Device().id
    if dev not in _backends:
        be = _CupyLauncher()
        _backends[dev] = (be, NttTables(be))
    return _backends[dev]


def clear_caches() -> None:
    """Free the cached twiddle/coset tables on every device (they are rebuilt on use)."""
    for _, tables in _backends.values():
        tables.clear()


def _vectors(x: Any) -> tuple[list[Any], int]:
    """The (n, 8) vectors of a (n, 8) or (k, n, 8) device array, and log2 n."""
    cp = gpu.get_cupy()
    if not isinstance(x, cp.ndarray) or x.dtype != cp.uint32 or not x.flags.c_contiguous:
        raise TypeError("expected a C-contiguous cupy uint32 array of shape (n, 8) or (k, n, 8)")
    if x.ndim == 2 and x.shape[1] == 8:
        vecs = [x]
    elif x.ndim == 3 and x.shape[2] == 8:
        vecs = [x[i] for i in range(x.shape[0])]
    else:
        raise ValueError(f"expected shape (n, 8) or (k, n, 8), got {x.shape}")
    n = x.shape[-2]
    if n < 1 or n & (n - 1):
        raise ValueError(f"NTT size must be a power of two, got {n}")
    log_n = n.bit_length() - 1
    if log_n > MAX_LOG_N:
        raise ValueError(f"NTT size 2^{log_n} exceeds 2^{MAX_LOG_N}")
    return vecs, log_n


@gpu.oom_guarded
def to_montgomery(x: Any) -> None:
    """x <- x R mod r, in place (any shape (..., 8))."""
    be, t = _backend()
    be.mul_const(x, t.const("r2", 0)[0])


@gpu.oom_guarded
def from_montgomery(x: Any) -> None:
    """x <- x / R mod r, in place."""
    be, t = _backend()
    be.mul_const(x, t.const("raw_one", 0)[0])


@gpu.oom_guarded
def ntt(x: Any, inverse: bool = False) -> None:
    """In-place NTT (Montgomery form, natural order in and out) of each vector of x."""
    vecs, log_n = _vectors(x)
    be, t = _backend()
    _t_ntt(be, t, vecs, log_n, inverse)


@gpu.oom_guarded
def coset_ntt(x: Any) -> None:
    """In place: coefficients -> evaluations on the coset g<w> (g = 7)."""
    vecs, log_n = _vectors(x)
    be, t = _backend()
    _t_coset_ntt(be, t, vecs, log_n)


@gpu.oom_guarded
def coset_intt(x: Any) -> None:
    """In place: evaluations on the coset g<w> -> coefficients."""
    vecs, log_n = _vectors(x)
    be, t = _backend()
    _t_coset_intt(be, t, vecs, log_n)


def _same(a: Any, *others: Any) -> None:
    for o in others:
        if o.shape != a.shape:
            raise ValueError(f"shape mismatch: {a.shape} vs {o.shape}")


@gpu.oom_guarded
def h_pointwise(a: Any, b: Any, c: Any) -> None:
    """a <- (a b - c) Z^-1 on the coset (Montgomery form); (n, 8) or (k, n, 8)."""
    _same(a, b, c)
    _, log_n = _vectors(a)
    be, t = _backend()
    be.pointwise(a, b, c, t.const("zinv", log_n)[0])


@gpu.oom_guarded
def compute_h(a: Any, b: Any, c: Any) -> None:
    """Groth16's H from standard-form evaluations a, b, c over the domain: afterwards a
    holds h's n coefficients in standard form, natural order; b and c are clobbered.
    Batched (k, n, 8) inputs are k independent problems, all launched together."""
    _same(a, b, c)
    va, log_n = _vectors(a)
    vb, _ = _vectors(b)
    vc, _ = _vectors(c)
    be, t = _backend()
    _t_compute_h(be, t, va, vb, vc, log_n)


@gpu.oom_guarded
def prepare_h(a: Any) -> None:
    """Build every table compute_h(a, ...) reads, so that compute_h itself allocates
    only its few pointer arrays.  Unlike compute_h this is a pure function of the size:
    a caller short of memory can free what it caches and call it again."""
    _, log_n = _vectors(a)
    _, t = _backend()
    t.twiddles(log_n)
    t.const("r2", log_n)
    t.const("zinv", log_n)
    t.const("raw_one", log_n)
    t.power_scale("coset_h", log_n, bitrev=True)
    t.power_scale("coset_inv", log_n, bitrev=True)


def ntt_multiplies(n: int) -> int:
    """Fr multiplications a radix-2 NTT of size n cannot avoid: (n/2) log2 n."""
    return (n // 2) * int(math.log2(n)) if n > 1 else 0
