"""Device memory of the real kernels as functions of the problem size.

These are the sizes the kernels' Python drivers allocate (simgpu.gpu.ntt,
simgpu.gpu.msm), computed by the same plan functions the drivers use, so a VRAM
footprint in a profile or the model is the real one.  An MSM is over G1 or G2 (group
"g1" or "g2"): the same plan of digits, buckets and segments, with G2's points and
accumulators twice G1's size.  The MSM allocates worst-case
buffers up front (every digit non-zero, every bucket non-empty), so its footprint does
not depend on the scalars.  tests/test_kernels_gpu.py checks both against the CuPy pool's
peak.
"""

from __future__ import annotations

from dataclasses import dataclass

FR_BYTES = 32
AFFINE_BYTES = 96  # G1 affine, Montgomery form, 24 words
XYZZ_BYTES = 192  # G1 XYZZ accumulator, 48 words
U32 = 4
#: Bytes of an affine point and of an XYZZ accumulator per group (G2: coordinates in Fp2).
GROUP_AFFINE_BYTES = {"g1": AFFINE_BYTES, "g2": 2 * AFFINE_BYTES}
GROUP_XYZZ_BYTES = {"g1": XYZZ_BYTES, "g2": 2 * XYZZ_BYTES}

#: Below this many elements the twiddle and coset tables use 1024-entry low tables only.
SCALE_LO = 1024
#: Threads the bucket accumulation aims for (several waves of the H200's ~50k resident
#: threads at the kernel's register count), and the bucket-reduction's.
ACC_THREADS = 1 << 18
SEG_THREADS = 1 << 16
#: Partial sums a thread adds when the segment sums of each window are reduced: few,
#: since there are few windows and each round's chains are sequential.
WINDOW_PIECE = 8


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"size must be a power of two, got {n}")
    return n.bit_length() - 1


def ntt_table_entries(n: int) -> dict[str, int]:
    """Fr elements in the tables the NTT family keeps on the device for size n."""
    log_n = _log2(n)
    hi = max(1, n // SCALE_LO)
    return {
        # w_N^i for i <= N/2 (inverse transforms read it mirrored)
        "twiddles": n // 2 + 1 if log_n else 0,
        # its two generator tables, alive while it is built
        "twiddle_build": (SCALE_LO + (n // 2) // SCALE_LO + 1) if log_n else 0,
        # coset shifts: g^i, n^-1 g^-i, n^-1 g^i (compute_h), each lo + hi
        "coset": 3 * (SCALE_LO + hi),
        # constants: R^2, 1, n^-1, Z^-1 on the coset
        "constants": 4,
    }


def ntt_device_bytes(n: int, batch: int = 3) -> int:
    """Bytes the NTT family allocates for size n beyond the data itself: the cached
    twiddle, coset and constant tables, the generator tables alive while the twiddles
    are built, and the pointer list of a batched launch (compute_h batches 3 vectors;
    pass `batch` for k-vector batches)."""
    e = ntt_table_entries(n)
    return FR_BYTES * sum(e.values()) + 8 * batch


@dataclass(frozen=True)
class MsmPlan:
    """Sizes of one MSM (G1 or G2) of n points with c-bit signed windows."""

    n: int
    c: int
    nwin: int  # windows: ceil(256 / c) (signed digits need one spare bit on top)
    buckets: int  # per window: 2^(c-1)
    piece: int  # T: entries a thread adds before writing a partial sum
    seg: int  # buckets per thread in the bucket reduction
    digits: int  # upper bound on non-zero digits: n * nwin
    partials1: int  # bound on first-round partial sums
    partials2: int  # bound on later rounds' partial sums

    @property
    def nb(self) -> int:
        return self.nwin * self.buckets

    @property
    def segments(self) -> int:
        return self.nb // self.seg

    @property
    def segment_rows(self) -> int:
        """Rows the bucket reduction writes: per segment its weighted and its plain sum."""
        return 2 * self.segments

    @property
    def window_rows(self) -> int:
        """Bound on the rows of the first round that adds each window's segment rows."""
        return self.segment_rows // WINDOW_PIECE + self.nwin


def _pow2_floor(x: float) -> int:
    return 1 << max(0, int(x).bit_length() - 1) if x >= 1 else 1


#: From this size on the window is 16 bits (measured on the H200, 2026-11-30: at 2^20
#: c = 16 beat 14, 15, 17, 18 by 15-40%; at 2^24 it was within 2% of the fastest, c = 20,
#: with a quarter of its bucket memory, and 8% faster than c = 18).
LARGE_N_WINDOW = (1 << 19, 16)


def choose_window(n: int) -> int:
    """The window c for n points.  From 2^19 points on, the measured choice (16); below,
    the c minimising a cost model in Fp multiplications: n * nwin mixed additions (~10 M
    each, plus ~4 M of sorting and gathering), and per bucket the merge of its partial
    sums and two running-sum additions (~14 M each), ~3 additions in all."""
    if n >= LARGE_N_WINDOW[0]:
        return LARGE_N_WINDOW[1]
    best, best_cost = 2, float("inf")
    for c in range(2, 19):
        nwin = -(-256 // c)
        cost = n * nwin * 14 + nwin * (1 << (c - 1)) * 3 * 14
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def msm_plan(n: int, window: int | None = None, piece: int | None = None, seg: int | None = None) -> MsmPlan:
    """The MsmPlan of an MSM of n points: window c (choose_window unless given), piece T and
    segment length sized for the thread targets (piece and seg override them, for tests)."""
    if n < 1:
        raise ValueError("an MSM needs at least one point")
    c = window or choose_window(n)
    if not 2 <= c <= 24:
        raise ValueError(f"window must be in 2..24, got {c}")
    nwin = -(-256 // c)
    buckets = 1 << (c - 1)
    nb = nwin * buckets
    digits = n * nwin
    t = piece or min(256, max(8, _pow2_floor(digits / ACC_THREADS)))
    p1 = -(-digits // t) + min(nb, digits)
    p2 = p1 // t + min(nb, digits)
    seg = seg or min(buckets, 64, max(1, _pow2_floor(nb / SEG_THREADS)))
    if seg > buckets or seg & (seg - 1):
        raise ValueError(f"segment length must be a power of two <= {buckets}")
    return MsmPlan(n, c, nwin, buckets, t, seg, digits, p1, p2)


def msm_device_bytes(
    n: int,
    window: int | None = None,
    *,
    piece: int | None = None,
    seg: int | None = None,
    group: str = "g1",
) -> dict[str, int]:
    """Device bytes of an MSM over n points of `group` (msm_g1, msm_g2): the caller's
    bases (affine, Montgomery) and scalars, the sorted digit entries with their bucket
    counts and offsets, the partial bucket sums, and the bucket-reduction temporaries.
    (piece and seg override the plan's, as msm.msm_windows_on's do, for tests.)"""
    p = msm_plan(n, window, piece, seg)
    nb = p.nb
    xyzz = GROUP_XYZZ_BYTES[group]
    out = {
        "bases": GROUP_AFFINE_BYTES[group] * n,
        "scalars": FR_BYTES * n,
        # sorted entries; counts, offsets and the scatter cursor; overflow flag
        "digits": U32 * p.digits + U32 * (3 * nb + 1) + U32,
        # partial sums: first round, later rounds
        "buckets": xyzz * (p.partials1 + p.partials2),
        # piece offsets (two rounds live) and two per-bucket temporaries while computing
        # them; segment rows and their reduction; window offsets
        "temporaries": U32 * (2 * (nb + 1) + 2 * nb)
        + xyzz * (p.segment_rows + p.window_rows)
        + U32 * (p.nwin + 1) * 2,
    }
    out["total"] = sum(out.values())
    return out


# --- what one prover call holds beyond its data -----------------------------------


def _ntt_parts(n: int) -> tuple[int, int, int, int]:
    """(twiddles, per-size tables, build, scratch) bytes of compute_h for a domain of n.

    The NTT keeps on the device the twiddle table of the largest domain it has seen and,
    per domain size, its coset-shift and constant tables; building the twiddles holds two
    generator tables for a moment; each call allocates a small scratch (a pointer list)."""
    e = ntt_table_entries(n)
    twiddles = FR_BYTES * e["twiddles"]
    per_size = FR_BYTES * (sum(e.values()) - e["twiddles"] - e["twiddle_build"])
    build = FR_BYTES * e["twiddle_build"]
    scratch = int(ntt_device_bytes(n)) - twiddles - per_size - build
    return twiddles, per_size, build, scratch


def ntt_twiddle_bytes(n: int) -> int:
    """The cached twiddle table for domains up to n (one table, the largest seen)."""
    return _ntt_parts(n)[0]


def ntt_size_table_bytes(n: int) -> int:
    """The coset and constant tables cached for domain size n."""
    return _ntt_parts(n)[1]


def ntt_table_bytes(n: int) -> int:
    """Device bytes the NTT keeps cached for a prover of one domain size n."""
    tw, per_size, _, _ = _ntt_parts(n)
    return tw + per_size


def ntt_build_bytes(n: int) -> int:
    """Transient bytes of building the twiddles, the first time a domain this large runs."""
    return _ntt_parts(n)[2]


def ntt_transient_bytes(n: int) -> int:
    """Device scratch one compute_h allocates for a domain of n, beyond a, b, c and the
    cached tables."""
    return _ntt_parts(n)[3]


def msm_transient_bytes(k: int, group: str = "g1") -> int:
    """Device bytes `msm_g1` (`msm_g2` for group "g2") allocates for k points beyond
    its bases and scalars."""
    if k <= 0:
        return 0
    d = msm_device_bytes(k, group=group)
    return int(d["digits"] + d["buckets"] + d["temporaries"])


def g1_sum_transient_bytes(k: int) -> int:
    """Device bytes `g1_sum` allocates for k indexed points beyond its inputs.  Its scratch
    (an index copy and partial sums, about 11 B a point) is not in this account yet, so
    this is 0; it never sets a phase's peak (the tails' MSM does)."""
    return 0
