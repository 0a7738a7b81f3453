"""Multi-scalar multiplication on the GPU (Pippenger, msm.cu) in G1 and G2, and the
CPU references through arkworks.

Device layout of bases: cupy uint32 (n, 24) for G1, affine x then y in Montgomery form;
(n, 48) for G2, x.c0, x.c1, y.c0, y.c1 (arkworks' xy order) in Montgomery form; the
point at infinity all zeros (`bases_to_device` / `bases_g2_to_device` convert from the
standard-form limbs of simgpu.gpu.encoding: a G2 row is the 192-byte xy encoding as 48
words).  Scalars: cupy uint32 (n, 8), standard form, < r.

    bases_to_device(limbs, out=None) -> device bases          (G1)
    bases_g2_to_device(limbs, out=None) -> device bases       (G2)
    msm_g1(bases_dev, scalars_dev, window=None) -> G1Point
    msm_g2(bases_dev, scalars_dev, window=None) -> G2Point
    g1_sum(bases_dev, index_dev=None) -> G1Point
    fixed_base_mul_g1(base, scalars_dev) -> np.ndarray (n, 24), standard-form affine
    msm_ref(bases_limbs, scalars_limbs) -> G1Point
    msm_g2_ref(bases_limbs, scalars_limbs) -> G2Point

The algorithm is described in msm.cu; one driver runs it for either group (a `Group`
names the kernels and the row sizes).  Every buffer is sized by
simgpu.gpu.footprint.msm_plan and allocated before the first kernel runs, so
footprint.msm_device_bytes is the MSM's device memory whatever the scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from simgpu.gpu import cuda as gpu
from simgpu.gpu import transfer
from simgpu.gpu.bls12_381 import FP, G1_B, P_MOD, R_ORDER
from simgpu.gpu.encoding import (
    g1_from_limbs,
    g1_from_xy,
    g1_to_limbs,
    ints_to_limbs,
    limbs_to_ints,
    scalar_of,
    scalars_of_limbs,
)
from simgpu.gpu.footprint import WINDOW_PIECE, MsmPlan, msm_plan


@dataclass(frozen=True)
class Group:
    """One group's MSM parameters: its name, the harness's code for it, the words of one
    coordinate (Fp: 12, Fp2: 24) and the suffix of its kernels' names."""

    name: str
    code: int
    coord_words: int
    suffix: str

    @property
    def aff_words(self) -> int:
        return 2 * self.coord_words

    @property
    def xyzz_words(self) -> int:
        return 4 * self.coord_words


G1 = Group("g1", 1, 12, "")
G2 = Group("g2", 2, 24, "_g2")
XYZZ_WORDS = G1.xyzz_words
#: G2's curve coefficient b = 4 (1 + u), as (c0, c1).
G2_B = (4, 4)
#: Fixed-base multiplication: 8-bit windows (32 of them), points per thread.
FB_WINDOW_BITS = 8
FB_CHUNK = 32


class MsmLauncher(Protocol):
    """What the driver needs from a device: u32 arrays and the msm.cu kernels."""

    xp: Any

    def alloc(self, shape: Any, zero: bool = False) -> Any: ...
    def upload(self, limbs: np.ndarray) -> Any: ...
    def to_host(self, a: Any) -> np.ndarray: ...
    def read_int(self, a: Any) -> int: ...
    def digits(
        self, scalars: Any, n: int, c: int, nwin: int, counts: Any, sorted_: Any, overflow: Any, scatter: bool
    ) -> None: ...
    def accumulate(
        self,
        bases: Any,
        sorted_: Any,
        bucket_off: Any,
        rank: Any,
        nb: int,
        t: int,
        nthreads: int,
        out: Any,
        group: Group = G1,
    ) -> None: ...
    def ranges(self, bucket_off: Any, rank: Any, nb: int, t: int, start: Any, end: Any) -> None: ...
    def reduce(
        self,
        src: Any,
        start: Any,
        end: Any,
        piece_off: Any,
        nb: int,
        t: int,
        npieces: int,
        out: Any,
        group: Group = G1,
    ) -> None: ...
    def bucket_sums(
        self,
        sums: Any,
        start: Any,
        end: Any,
        b: int,
        seg: int,
        nseg: int,
        total: int,
        out: Any,
        group: Group = G1,
    ) -> None: ...
    def seg_offsets(self, segs: Any, seg: int, nseg: int, total: int, group: Group = G1) -> None: ...
    def fixed_base(
        self, scalars: Any, n: int, table: Any, chunk: int, nthreads: int, out: Any, tmp: Any
    ) -> None: ...
    def fp_mul_const(self, x: Any, count: int, cst: Any) -> None: ...


# --------------------------------------------------------------------------- host side


def xyzz_to_point(row: np.ndarray) -> G1Point:
    """A G1Point from one XYZZ row (48 words, Montgomery form).  x = X/ZZ and y = Y/ZZZ
    are ratios, which Montgomery form leaves unchanged; g1_from_xy checks the result is
    on the curve and in the subgroup."""
    X, Y, ZZ, ZZZ = limbs_to_ints(np.asarray(row, dtype=np.uint32).reshape(4, 12))
    if ZZ % P_MOD == 0:  # lazily reduced Fp: 0 may be stored as p
        return G1Point.identity()
    x = X * pow(ZZ, -1, P_MOD) % P_MOD
    y = Y * pow(ZZZ, -1, P_MOD) % P_MOD
    return g1_from_xy(x, y)


def _affine_rows(rows: np.ndarray) -> list[tuple[int, int] | None]:
    """Affine (x, y) of XYZZ rows, None for infinity, with one field inversion for all
    rows (Montgomery's trick): the host tail of an MSM stays well under a millisecond."""
    vals = [limbs_to_ints(np.asarray(r, dtype=np.uint32).reshape(4, 12)) for r in rows]
    dens = [zz * zzz % P_MOD for _, _, zz, zzz in vals]
    prefix, acc = [], 1
    for d in dens:
        prefix.append(acc)
        if d:
            acc = acc * d % P_MOD
    inv = pow(acc, -1, P_MOD)
    out: list[tuple[int, int] | None] = [None] * len(vals)
    for i in range(len(vals) - 1, -1, -1):
        x, y, zz, zzz = vals[i]
        if not dens[i]:
            continue
        inv_i = inv * prefix[i] % P_MOD  # 1 / (ZZ ZZZ)
        inv = inv * dens[i] % P_MOD
        out[i] = (x * inv_i * zzz % P_MOD, y * inv_i * zz % P_MOD)
    return out


def combine_windows(rows: np.ndarray, c: int) -> G1Point:
    """sum_k 2^(c k) W_k over the window sums (one arkworks multiexp of nwin terms).
    Each W_k is checked to be on the curve, the result to be in the subgroup."""
    points, scalars = [], []
    for k, xy in enumerate(_affine_rows(rows)):
        if xy is None:
            continue
        x, y = xy
        if (y * y - x * x * x - G1_B) % P_MOD:
            raise ArithmeticError(f"MSM window {k} is not on the curve")
        raw = x.to_bytes(48, "little") + y.to_bytes(48, "little")
        points.append(G1Point.from_xy_bytes_unchecked_le(raw))
        scalars.append(scalar_of(pow(2, c * k, R_ORDER)))
    if not points:
        return G1Point.identity()
    out = G1Point.multiexp_unchecked(points, scalars)
    if not out.is_in_subgroup():
        raise ArithmeticError("MSM result is not in the G1 subgroup")
    return out


def msm_ref(bases_limbs: np.ndarray, scalars_limbs: np.ndarray) -> G1Point:
    """Reference: arkworks' multiexp over standard-form limbs (bases (n, 24), scalars
    (n, 8))."""
    bases = g1_from_limbs(np.asarray(bases_limbs))
    scalars = [scalar_of(v) for v in limbs_to_ints(np.asarray(scalars_limbs))]
    if not bases:
        return G1Point.identity()
    return G1Point.multiexp_unchecked(bases, scalars)


# G2 on the host: Fp2 = Fp[u]/(u^2 + 1) as pairs of ints, for the few window sums.


def _f2mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return ((a[0] * b[0] - a[1] * b[1]) % P_MOD, (a[0] * b[1] + a[1] * b[0]) % P_MOD)


def _f2inv(a: tuple[int, int]) -> tuple[int, int]:
    inv = pow(a[0] * a[0] + a[1] * a[1], -1, P_MOD)  # the norm; non-zero for a != 0
    return (a[0] * inv % P_MOD, -a[1] * inv % P_MOD)


def g2_limbs(points: Sequence[G2Point]) -> np.ndarray:
    """Standard-form limbs (n, 48) of G2 points: their xy encoding as u32 words."""
    raw = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(raw, dtype="<u4").reshape(-1, G2.aff_words).astype(np.uint32, copy=False)


def _g2_from_xy(x: tuple[int, int], y: tuple[int, int], what: str) -> G2Point:
    """A G2 point from affine Fp2 coordinates, checked to be on the curve."""
    y2, x3 = _f2mul(y, y), _f2mul(_f2mul(x, x), x)
    if ((y2[0] - x3[0] - G2_B[0]) % P_MOD, (y2[1] - x3[1] - G2_B[1]) % P_MOD) != (0, 0):
        raise ArithmeticError(f"{what} is not on the G2 curve")
    raw = b"".join(v.to_bytes(48, "little") for v in (*x, *y))
    return G2Point.from_xy_bytes_unchecked_le(raw)


def _g2_affine(row: np.ndarray, what: str) -> G2Point:
    """The G2 point of one XYZZ row (96 words, Montgomery form: ratios are unchanged)."""
    v = limbs_to_ints(np.asarray(row, dtype=np.uint32).reshape(8, 12))
    X, Y, ZZ, ZZZ = ((v[2 * i] % P_MOD, v[2 * i + 1] % P_MOD) for i in range(4))
    if ZZ == (0, 0):
        return G2Point.identity()
    return _g2_from_xy(_f2mul(X, _f2inv(ZZ)), _f2mul(Y, _f2inv(ZZZ)), what)


def xyzz_to_point_g2(row: np.ndarray) -> G2Point:
    """A G2Point from one XYZZ row, checked to be on the curve and in the subgroup."""
    out = _g2_affine(row, "XYZZ row")
    if not out.is_in_subgroup():
        raise ArithmeticError("point is not in the G2 subgroup")
    return out


def combine_windows_g2(rows: np.ndarray, c: int) -> G2Point:
    """G2's sum_k 2^(c k) W_k (arkworks), each W_k checked to be on the curve, the result
    to be in the subgroup."""
    points, scalars = [], []
    for k, row in enumerate(rows):
        p = _g2_affine(row, f"MSM window {k}")
        if p != G2Point.identity():
            points.append(p)
            scalars.append(scalar_of(pow(2, c * k, R_ORDER)))
    if not points:
        return G2Point.identity()
    out = G2Point.multiexp_unchecked(points, scalars)
    if not out.is_in_subgroup():
        raise ArithmeticError("MSM result is not in the G2 subgroup")
    return out


def msm_g2_ref(bases_limbs: np.ndarray, scalars_limbs: np.ndarray) -> G2Point:
    """Reference: arkworks' G2 multiexp over standard-form limbs (bases (n, 48) or the
    (n, 192) bytes of the key's B query, scalars (n, 8))."""
    raw = np.ascontiguousarray(bases_limbs).tobytes()
    bases = [G2Point.from_xy_bytes_unchecked_le(raw[i : i + 192]) for i in range(0, len(raw), 192)]
    if not bases:
        return G2Point.identity()
    return G2Point.multiexp_unchecked(bases, scalars_of_limbs(np.asarray(scalars_limbs)))


# --------------------------------------------------------------------------- driver


def _pieces(be: MsmLauncher, start: Any, end: Any, ngroups: int, t: int, out_off: Any, tmp: Any) -> int:
    """out_off <- prefix sums of ceil((end - start) / t) over the groups; returns the
    total (one device-to-host read).  In place, no temporaries."""
    xp = be.xp
    cnt = tmp[:ngroups]
    xp.subtract(end[:ngroups], start[:ngroups], out=cnt)
    cnt += xp.uint32(t - 1)
    xp.floor_divide(cnt, xp.uint32(t), out=cnt)
    out_off[0] = 0
    xp.cumsum(cnt, dtype=xp.uint32, out=out_off[1 : ngroups + 1])
    return be.read_int(out_off[ngroups])


def _reduce_rounds(
    be: MsmLauncher, src: Any, dst: Any, start: Any, end: Any, off_a: Any, off_b: Any,
    tmp: Any, ngroups: int, t: int, longest: int, group: Group = G1,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """Add each group's partial sums (src[start[g]:end[g]]) in rounds until one is left
    per non-empty group; returns (buffer, start, end) locating them.  `longest` bounds
    the partial sums of any group.  src/dst and off_a/off_b alternate."""
    offs = [off_a, off_b]
    r = 0
    while longest > 1:
        out_off = offs[r % 2]
        npieces = _pieces(be, start, end, ngroups, t, out_off, tmp)
        be.reduce(src, start, end, out_off, ngroups, t, npieces, dst, group)
        src, dst = dst, src
        start, end = out_off[:ngroups], out_off[1 : ngroups + 1]
        longest = -(-longest // t)
        r += 1
    return src, start, end


def _msm_windows(
    be: MsmLauncher, bases: Any, scalars: Any, n: int, plan: MsmPlan, group: Group = G1
) -> np.ndarray:
    """The nwin window sums (XYZZ rows of `group`, Montgomery form) of the MSM."""
    xp = be.xp
    nb, t, nwin = plan.nb, plan.piece, plan.nwin
    xw = group.xyzz_words
    u32 = xp.uint32
    # Every buffer up front, at its worst-case size (see footprint.msm_device_bytes).
    sorted_ = be.alloc(plan.digits)
    counts = be.alloc(nb, zero=True)
    bucket_off = be.alloc(nb + 1, zero=True)
    cursor = be.alloc(nb)
    overflow = be.alloc(1, zero=True)
    part1 = be.alloc((plan.partials1, xw))
    part2 = be.alloc((plan.partials2, xw))
    off_a = be.alloc(nb + 1)
    off_b = be.alloc(nb + 1)
    tmp = be.alloc(nb)
    tmp2 = be.alloc(nb)
    segs = be.alloc((plan.segment_rows, xw))
    segs2 = be.alloc((plan.window_rows, xw))
    woff = be.alloc(nwin + 1)

    mark = getattr(be, "mark", None) or (lambda label: None)
    mark("start")
    # 1-3: digits, counts, counting sort by (window, bucket)
    be.digits(scalars, n, plan.c, nwin, counts, sorted_, overflow, False)
    xp.cumsum(counts, dtype=u32, out=bucket_off[1:])
    cursor[...] = bucket_off[:nb]
    be.digits(scalars, n, plan.c, nwin, cursor, sorted_, overflow, True)
    if be.read_int(overflow[0]):
        raise ValueError("MSM scalars must be < 2^255 (reduce them mod r)")
    total = be.read_int(bucket_off[nb])
    mark("sort")
    if total == 0:  # every scalar is zero
        return np.zeros((nwin, xw), dtype=np.uint32)

    # 4: chunks of t entries per thread; rank[b] = non-empty buckets before b
    rank = cursor
    xp.minimum(counts, xp.uint32(1), out=tmp)
    rank[0] = 0
    xp.cumsum(tmp[: nb - 1], dtype=u32, out=rank[1:])
    be.accumulate(bases, sorted_, bucket_off, rank, nb, t, -(-total // t), part1, group)
    start, end = tmp, tmp2
    be.ranges(bucket_off, rank, nb, t, start, end)
    xp.subtract(end, start, out=counts)
    longest = be.read_int(counts.max())
    mark("accumulate")

    # 5: rounds until one sum per bucket
    sums, s_start, s_end = _reduce_rounds(
        be, part1, part2, start, end, off_a, off_b, counts, nb, t, longest, group
    )

    mark("merge")
    # 6: per segment of plan.seg buckets its weighted and plain running sums, the plain
    # one then times the segment's first bucket; per window the sum of its 2 nseg rows
    nseg = plan.buckets // plan.seg
    be.bucket_sums(sums, s_start, s_end, plan.buckets, plan.seg, nseg, plan.segments, segs, group)
    be.seg_offsets(segs, plan.seg, nseg, plan.segments, group)
    mark("bucket_sums")
    woff[...] = be.upload(np.arange(nwin + 1, dtype=np.uint32) * np.uint32(2 * nseg))
    # The segment sums of a window are few, long sequential chains: measured on the H200,
    # a round's time is set by one thread's chain (~50 us per addition at this
    # occupancy), so small pieces and more rounds (log_8) beat big pieces (T = 256).
    wsum, _, _ = _reduce_rounds(
        be, segs, segs2, woff[:nwin], woff[1:], off_a, off_b, counts, nwin, WINDOW_PIECE, 2 * nseg, group
    )
    # every window has 2 nseg > 0 entries, so window w's sum ends up in row w
    rows = be.to_host(wsum[:nwin])
    mark("windows")
    return rows


def msm_windows_on(be: MsmLauncher, bases: Any, scalars: Any, window: int | None = None,
                   piece: int | None = None, seg: int | None = None, group: Group = G1,
                   ) -> tuple[np.ndarray, MsmPlan]:  # fmt: skip
    """The window sums of an MSM on a backend (GPU or the host harness), and its plan
    (piece and seg override the plan's, for tests)."""
    n = int(scalars.shape[0])
    plan = msm_plan(max(n, 1), window, piece, seg)
    if plan.digits >= 1 << 32 or n >= 1 << 31:  # positions and point indices are 32-bit
        raise ValueError(f"{n} points x {plan.nwin} windows is too many for one MSM: split it")
    if n == 0:
        return np.zeros((plan.nwin, group.xyzz_words), dtype=np.uint32), plan
    return _msm_windows(be, bases, scalars, n, plan, group), plan


def g1_sum_on(be: MsmLauncher, bases: Any, index: Any | None, n: int, t: int = 64) -> np.ndarray:
    """sum of bases[index] (all n when index is None) as one XYZZ row: the accumulate
    and reduce kernels with a single bucket."""
    xp = be.xp
    if n == 0:
        return np.zeros(XYZZ_WORDS, dtype=np.uint32)
    entries = be.alloc(n)
    if index is None:
        entries[...] = xp.arange(n, dtype=xp.uint32)
    else:
        entries[...] = index.reshape(-1).astype(xp.uint32)
    bucket_off = be.upload(np.array([0, n], dtype=np.uint32))
    rank = be.alloc(1, zero=True)
    nthreads = -(-n // t)
    part1 = be.alloc((nthreads, XYZZ_WORDS))
    part2 = be.alloc((-(-nthreads // t), XYZZ_WORDS))
    start, end = be.alloc(1), be.alloc(1)
    off_a, off_b, tmp = be.alloc(2), be.alloc(2), be.alloc(1)
    be.accumulate(bases, entries, bucket_off, rank, 1, t, nthreads, part1)
    be.ranges(bucket_off, rank, 1, t, start, end)
    sums, s_start, _ = _reduce_rounds(be, part1, part2, start, end, off_a, off_b, tmp, 1, t, nthreads)
    return be.to_host(sums[be.read_int(s_start[0])])


_fb_tables: dict[bytes, np.ndarray] = {}


def fixed_base_table(base: G1Point) -> np.ndarray:
    """Standard-form affine limbs (32*256, 24) of d * 2^(8k) * base, row 256 k + d."""
    key = base.to_compressed_bytes()
    if key not in _fb_tables:
        pts: list[G1Point] = []
        pk = base
        for _ in range(32):
            row = [G1Point.identity()]
            for _ in range(255):
                row.append(row[-1] + pk)
            pts.extend(row)
            pk = pk * Scalar(256)
        _fb_tables[key] = g1_to_limbs(pts)
    return _fb_tables[key]


def fixed_base_on(be: MsmLauncher, base: G1Point, scalars: Any, n: int) -> np.ndarray:
    """[s_i * base] for n scalars on a backend (GPU or the host harness), as standard-form
    affine limbs (n, 24): the fixed-base kernel over fixed_base_table, moved to Montgomery
    form on the device."""
    if n == 0:
        return np.zeros((0, 24), dtype=np.uint32)
    table = be.upload(fixed_base_table(base))
    be.fp_mul_const(table, table.size // 12, be.upload(ints_to_limbs([FP.R2], 12)))
    out = be.alloc((n, 24))
    tmp = be.alloc((n, 36))
    nthreads = -(-n // FB_CHUNK)
    be.fixed_base(scalars, n, table, FB_CHUNK, nthreads, out, tmp)
    return be.to_host(out)


# --------------------------------------------------------------------------- CuPy backend


class _CupyLauncher:
    THREADS = 128

    def __init__(self) -> None:
        self.cp = gpu.get_cupy()
        self.xp = self.cp
        #: when a list, mark() appends (label, cuda event): the benchmark's phase times
        self.events: list[tuple[str, Any]] | None = None
        self.k: dict[str, Any] = {}
        self._loaded: set[int] = set()
        self._need(1, 2, 3, 4)  # G1; G2's modules load on its first MSM

    #: The kernels of each module (msm.cu's MSM_PART).
    PARTS = {
        1: ("msm_count", "msm_scatter", "msm_accumulate", "msm_ranges", "fp_mul_const"),
        2: ("msm_reduce",),
        3: ("msm_bucket_sums", "msm_seg_offsets"),
        4: ("g1_fixed_base_mul",),
        5: ("msm_accumulate_g2",),
        6: ("msm_reduce_g2",),
        7: ("msm_bucket_sums_g2", "msm_seg_offsets_g2"),
    }

    def _need(self, *parts: int) -> None:
        for part in parts:
            if part not in self._loaded:
                mod = gpu.load_module("msm.cu", (f"MSM_PART={part}",))
                self.k.update({name: mod.get_function(name) for name in self.PARTS[part]})
                self._loaded.add(part)

    def _kernel(self, name: str, group: Group) -> Any:
        if group.suffix and name + group.suffix not in self.k:
            self._need(5, 6, 7)
        return self.k[name + group.suffix]

    def mark(self, label: str) -> None:
        if self.events is not None:
            ev = self.cp.cuda.Event()
            ev.record()
            self.events.append((label, ev))

    def alloc(self, shape: Any, zero: bool = False) -> Any:
        make = self.cp.zeros if zero else self.cp.empty
        return make(shape, dtype=self.cp.uint32)

    # Copies through this thread's staging (simgpu.gpu.transfer): every read-back here
    # waits for the stream, and a pageable one would hold the other workers' launches
    # for as long.
    def upload(self, limbs: np.ndarray) -> Any:
        return transfer.upload(np.ascontiguousarray(limbs, dtype=np.uint32))

    def to_host(self, a: Any) -> np.ndarray:
        return transfer.to_host(a)

    def read_int(self, a: Any) -> int:
        return transfer.read_int(a)

    def digits(
        self, scalars: Any, n: int, c: int, nwin: int, counts: Any, sorted_: Any, overflow: Any, scatter: bool
    ) -> None:
        u = np.uint32
        # one thread per scalar, rounded up to whole warps (the warp-aggregated atomics
        # need all 32 lanes)
        if scatter:
            args = (scalars, u(n), u(c), u(nwin), counts, sorted_, overflow)
            gpu.launch(self.k["msm_scatter"], n, 256, args)
        else:
            gpu.launch(self.k["msm_count"], n, 256, (scalars, u(n), u(c), u(nwin), counts, overflow))

    def accumulate(
        self,
        bases: Any,
        sorted_: Any,
        bucket_off: Any,
        rank: Any,
        nb: int,
        t: int,
        nthreads: int,
        out: Any,
        group: Group = G1,
    ) -> None:
        u = np.uint32
        args = (bases, sorted_, bucket_off, rank, u(nb), u(t), u(nthreads), out)
        gpu.launch(self._kernel("msm_accumulate", group), nthreads, self.THREADS, args)

    def ranges(self, bucket_off: Any, rank: Any, nb: int, t: int, start: Any, end: Any) -> None:
        u = np.uint32
        gpu.launch(self.k["msm_ranges"], nb, 256, (bucket_off, rank, u(nb), u(t), start, end))

    def reduce(
        self,
        src: Any,
        start: Any,
        end: Any,
        piece_off: Any,
        nb: int,
        t: int,
        npieces: int,
        out: Any,
        group: Group = G1,
    ) -> None:
        u = np.uint32
        args = (src, start, end, piece_off, u(nb), u(t), u(npieces), out)
        gpu.launch(self._kernel("msm_reduce", group), npieces, self.THREADS, args)

    def bucket_sums(
        self,
        sums: Any,
        start: Any,
        end: Any,
        b: int,
        seg: int,
        nseg: int,
        total: int,
        out: Any,
        group: Group = G1,
    ) -> None:
        u = np.uint32
        args = (sums, start, end, u(b), u(seg), u(nseg), u(total), out)
        gpu.launch(self._kernel("msm_bucket_sums", group), total, self.THREADS, args)

    def seg_offsets(self, segs: Any, seg: int, nseg: int, total: int, group: Group = G1) -> None:
        u = np.uint32
        args = (segs, u(seg), u(nseg), u(total))
        gpu.launch(self._kernel("msm_seg_offsets", group), total, self.THREADS, args)

    def fixed_base(
        self, scalars: Any, n: int, table: Any, chunk: int, nthreads: int, out: Any, tmp: Any
    ) -> None:
        u = np.uint32
        args = (scalars, u(n), table, u(chunk), u(nthreads), out, tmp)
        gpu.launch(self.k["g1_fixed_base_mul"], nthreads, self.THREADS, args)

    def fp_mul_const(self, x: Any, count: int, cst: Any) -> None:
        gpu.launch(self.k["fp_mul_const"], count, 256, (x, np.uint64(count), cst))


_backends: dict[int, _CupyLauncher] = {}


def _backend() -> _CupyLauncher:
    cp = gpu.get_cupy()
    dev = cp.cuda.Device().id
    if dev not in _backends:
        _backends[dev] = _CupyLauncher()
    return _backends[dev]


def _check_rows(a: Any, words: int, what: str) -> int:
    cp = gpu.get_cupy()
    if not isinstance(a, cp.ndarray) or a.dtype != cp.uint32 or not a.flags.c_contiguous:
        raise TypeError(f"{what}: expected a C-contiguous cupy uint32 array")
    if a.ndim != 2 or a.shape[1] != words:
        raise ValueError(f"{what}: expected shape (n, {words}), got {a.shape}")
    return int(a.shape[0])


@gpu.oom_guarded
def bases_to_device(limbs: np.ndarray, out: Any | None = None) -> Any:
    """Upload standard-form affine limbs (n, 24) and convert them to Montgomery form.
    `out` (a cupy (m, 24) uint32 array, m >= n) is filled in place and returned."""
    cp = gpu.get_cupy()
    be = _backend()
    limbs = np.ascontiguousarray(limbs, dtype=np.uint32)
    if limbs.ndim != 2 or limbs.shape[1] != 24:
        raise ValueError(f"bases: expected shape (n, 24), got {limbs.shape}")
    n = limbs.shape[0]
    if out is None:
        out = cp.empty((n, 24), dtype=cp.uint32)
    elif _check_rows(out, 24, "out") < n:
        raise ValueError(f"out has {out.shape[0]} rows, need {n}")
    dst = out[:n]
    transfer.to_device(dst, limbs)
    be.fp_mul_const(dst, 2 * n, _r2_fp(be))
    return out


_r2_cache: dict[int, Any] = {}


def _r2_fp(be: _CupyLauncher) -> Any:
    dev = be.cp.cuda.Device().id
    if dev not in _r2_cache:
        _r2_cache[dev] = be.upload(ints_to_limbs([FP.R2], 12))
    return _r2_cache[dev]


@gpu.oom_guarded
def msm_g1(bases_dev: Any, scalars_dev: Any, window: int | None = None) -> G1Point:
    """sum_i scalars[i] * bases[i] over the n rows of scalars_dev (bases_dev may have
    more rows: a reused batch buffer).  Window c by footprint.choose_window(n) unless
    given."""
    n = _check_rows(scalars_dev, 8, "scalars")
    if _check_rows(bases_dev, 24, "bases") < n:
        raise ValueError("fewer bases than scalars")
    rows, plan = msm_windows_on(_backend(), bases_dev, scalars_dev, window)
    return combine_windows(rows, plan.c)


@gpu.oom_guarded
def bases_g2_to_device(limbs: np.ndarray, out: Any | None = None) -> Any:
    """Upload G2 standard-form affine limbs (n, 48) -- or the key's (n, 192) bytes -- and
    convert them to Montgomery form.  `out` (cupy (m, 48) uint32, m >= n) is filled in
    place and returned."""
    cp = gpu.get_cupy()
    be = _backend()
    limbs = np.ascontiguousarray(limbs)
    if limbs.dtype == np.uint8 and limbs.ndim == 2 and limbs.shape[1] == 4 * G2.aff_words:
        limbs = limbs.view("<u4")
    limbs = np.ascontiguousarray(limbs, dtype=np.uint32)
    if limbs.ndim != 2 or limbs.shape[1] != G2.aff_words:
        raise ValueError(f"G2 bases: expected shape (n, 48), got {limbs.shape}")
    n = limbs.shape[0]
    if out is None:
        out = cp.empty((n, G2.aff_words), dtype=cp.uint32)
    elif _check_rows(out, G2.aff_words, "out") < n:
        raise ValueError(f"out has {out.shape[0]} rows, need {n}")
    dst = out[:n]
    transfer.to_device(dst, limbs)
    be.fp_mul_const(dst, 4 * n, _r2_fp(be))
    return out


@gpu.oom_guarded
def msm_g2(bases_dev: Any, scalars_dev: Any, window: int | None = None) -> G2Point:
    """G2's sum_i scalars[i] * bases[i] over the n rows of scalars_dev (bases_dev (m, 48)
    from bases_g2_to_device, m >= n).  Window by footprint.choose_window(n) unless given."""
    n = _check_rows(scalars_dev, 8, "scalars")
    if _check_rows(bases_dev, G2.aff_words, "bases") < n:
        raise ValueError("fewer bases than scalars")
    rows, plan = msm_windows_on(_backend(), bases_dev, scalars_dev, window, group=G2)
    return combine_windows_g2(rows, plan.c)


@gpu.oom_guarded
def g1_sum(bases_dev: Any, index_dev: Any | None = None) -> G1Point:
    """Sum of all bases, or of bases[index_dev] (a cupy integer array): the MSM of
    scalars equal to 1, without digits."""
    n = _check_rows(bases_dev, 24, "bases") if index_dev is None else int(index_dev.size)
    return xyzz_to_point(g1_sum_on(_backend(), bases_dev, index_dev, n))


@gpu.oom_guarded
def fixed_base_mul_g1(base: G1Point, scalars_dev: Any) -> np.ndarray:
    """[s_i * base] as standard-form affine limbs (n, 24) (infinity = zeros), for the
    trusted setup: 32 table additions per scalar, one inversion per 32 points."""
    n = _check_rows(scalars_dev, 8, "scalars")
    return fixed_base_on(_backend(), base, scalars_dev, n)


def msm_multiplies(n: int, window: int | None = None, group: Group = G1) -> int:
    """Fp multiplications the bucket method cannot avoid for n points: n * ceil(255/c)
    mixed additions of 10, plus the running sums over the buckets (2 full additions of
    14 per bucket); in G2 each of those products is an Fp2 product of 3 Fp ones."""
    plan = msm_plan(n, window)
    per = 3 if group is G2 else 1
    return per * (n * -(-255 // plan.c) * 10 + plan.nb * 2 * 14)


def random_bases_g2_limbs(scalars: Sequence[int]) -> np.ndarray:
    """Standard-form limbs (n, 48) of k_i * G2 generator (CPU, arkworks): test data."""
    g = G2Point()
    return g2_limbs([g * scalar_of(k) for k in scalars]).copy()


def random_bases_limbs(scalars: Sequence[int]) -> np.ndarray:
    """Standard-form affine limbs of k_i * G1 generator (CPU, arkworks): test data."""
    g = G1Point()
    return g1_to_limbs([g * scalar_of(k) for k in scalars]).copy()
