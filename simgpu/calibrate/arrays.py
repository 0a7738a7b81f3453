"""The prover's arrays inside each buffer of a profile, read from its pool's trace.

A profile books a phase's memory as a few named buffers (an MSM's staging, then its
temporaries); the prover allocates the same bytes as a dozen arrays (the bases batch; the
digits, the buckets, their sums...).  The total is what the exact ledger needs.  A
caching pool (simgpu.devicepool) also needs the grain, because the grain decides how its
blocks split: think of the same length of cloth cut for one coat or for twelve shirts,
the offcuts are not the same.  This module turns a lone partition's trace
(simgpu.prover.device.AllocTrace, recorded by calibrate) into the profile's
``[buffer_arrays]``: each buffer's arrays as fractions of its bytes, in allocation order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simgpu.devicepool import UNIT
from simgpu.profile.schema import phase_key

#: Where the arrays at a phase's peak are split between its staging and its temporaries:
#: the staging ends at the first array whose running total reaches the staging's bytes
#: less this share (the plan's staging and the arrays differ by rounding, and a few
#: index arrays).
STAGING_SLACK = 0.02
#: Digits of each array's fraction: enough that the arrays cut from a buffer of a few
#: hundred MiB come back to the byte (six digits left a 384 MiB batch ~200 B off, on
#: either side of the block it must fit).
FRACTION_DIGITS = 12


def phase_arrays(rows: Sequence[Sequence[Any]]) -> dict[str, list[int]]:
    """Per label of a trace (a stage, or "stage.phase"): the arrays allocated under it that
    are live at its peak, in allocation order (bytes).  Frees are matched by address
    whatever their label (an array may be let go by the next stage, or by the executor)."""
    live: dict[str, dict[int, int]] = {}
    best: dict[str, tuple[int, list[int]]] = {}
    for row in rows:
        label, op, nbytes, ptr = row[2], row[3], int(row[4]), int(row[5])
        if op == "malloc" and ptr:
            mine = live.setdefault(label, {})
            mine[ptr] = nbytes
            total = sum(mine.values())
            if total > best.get(label, (0, []))[0]:
                best[label] = (total, list(mine.values()))
        elif op == "free":
            for mine in live.values():
                if mine.pop(ptr, None) is not None:
                    break
    return {label: sizes for label, (_, sizes) in best.items()}


def buffer_arrays(
    stages: Mapping[str, Mapping[str, Any]], sizes: Mapping[str, int], arrays: Mapping[str, list[int]]
) -> dict[str, list[float]]:
    """[buffer_arrays] for a profile's `stages` (their TOML tables) from `phase_arrays` of
    a lone partition at the size where the buffers have `sizes` (bytes): each staged
    phase's arrays, the first ones up to its staging's bytes for the staging buffer and
    the rest for its (one) transient buffer; a buffer of one array is left out."""
    out: dict[str, list[float]] = {}
    for name, st in stages.items():
        for ph in st.get("phases", []):
            got = arrays.get(phase_key(name, ph["name"]))  # kernels.h_msm, or b_g2_msm itself
            if not got:
                continue
            staging, transient = list(ph.get("staging", [])), list(ph.get("transient", []))
            if len(staging) > 1 or len(transient) > 1:
                continue  # which array is whose is not in the trace
            cut = 0
            if staging:
                want = sizes.get(staging[0], 0) * (1 - STAGING_SLACK)
                total = 0
                while cut < len(got) and total < want:
                    total += got[cut]
                    cut += 1
            staged = list(got[:cut])
            if staging:
                # The plan's staging also holds the gathered tails and their scalars,
                # which the prover allocates as arrays of their own beside the bases
                # batch: what the staging holds beyond the arrays counted here is one
                # array more, so that the batch itself keeps its exact size (a pool
                # block that held one batch takes the next only if it is no smaller).
                rest = sizes.get(staging[0], 0) - sum(staged)
                if staged and rest > UNIT:
                    staged.append(rest)
            for buf, part in ((staging[:1], staged), (transient[:1], got[cut:])):
                if buf and len(part) > 1:
                    whole = float(sum(part))
                    out[buf[0]] = [round(x / whole, FRACTION_DIGITS) for x in part]
    return out


def arrays_table(
    stages: Mapping[str, Mapping[str, Any]],
    runs: Iterable[tuple[int, Mapping[str, int], Mapping[str, list[int]]]],
) -> dict[str, dict[str, list]]:
    """The profile's ``[buffer_arrays]`` from traced runs (size, the plan's buffer bytes,
    phase_arrays) at several sizes: each buffer's fractions as points, since the grain
    does not scale with the size (a Pippenger MSM's buckets take the same bytes at every
    size, its bases and digits grow with it)."""
    out: dict[str, dict[str, list]] = {}
    for n, sizes, arrays in sorted(runs, key=lambda r: r[0]):
        for name, fractions in buffer_arrays(stages, sizes, arrays).items():
            out.setdefault(name, {"points": []})["points"].append([int(n), fractions])
    return out
