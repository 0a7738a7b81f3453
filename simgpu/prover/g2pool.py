"""b_g2_msm in worker processes, out of the driver's interpreter.

arkworks' G2 MSM releases the GIL, but feeding it does not: turning the key's B query
into G2Point objects costs about 1.5 us a point under the lock, 0.4 s a partition at
2^20 constraints.  In the driver process that is a pure-Python stretch beside the GPU
workers, and every CUDA call they make (each drops and retakes the lock) then waits for
CPython's switch interval: calibration measured kernels 21x slower beside such a thread.
A native prover (supraseal, cuzk) runs this MSM on CPU threads that never stall the GPU
driver; this pool does the same with processes.  Each worker loads the memory-mapped key
once and keeps the B query as G2Point objects; a partition sends only its positions and
scalars (a few MB) and gets back one point per chunk.
"""

from __future__ import annotations

import functools
import operator
from pathlib import Path
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G2Point, Scalar

from simgpu.gpu.encoding import g2_from_bytes, scalars_of_limbs
from simgpu.workers import spawn_pool, stop_pool

_ONE = Scalar(1)
#: This worker process's B query in G2, as arkworks points (set by _load).
_POINTS: list[G2Point] = []


def _load(key_path: str) -> None:
    """Worker initializer: deserialise the key's B query once."""
    from simgpu.prover.keys import load_keys

    pk, _ = load_keys(key_path)
    _POINTS[:] = g2_from_bytes(np.ascontiguousarray(pk.b_g2).tobytes())


def _ready() -> int:
    return len(_POINTS)


def _chunk(tails: np.ndarray, tail_scalars: np.ndarray, ones: np.ndarray) -> bytes:
    """One core's share: sum_i s_i P[tails_i] + sum_j P[ones_j], as affine xy bytes."""
    points = [_POINTS[i] for i in tails.tolist()] + [_POINTS[i] for i in ones.tolist()]
    scalars = scalars_of_limbs(tail_scalars) + [_ONE] * len(
        ones
    )  # arkworks adds these into one bucket: no doublings
    if not points:
        return G2Point.identity().to_xy_bytes_le()
    return G2Point.multiexp_unchecked(points, scalars).to_xy_bytes_le()


class G2Pool:
    """`workers` processes holding one key's B query; `msm` is the b_g2_msm stage, spread
    over `chunks` of them.  Size the pool for the cores, not for one MSM: stages running
    at once then share cores as threads of a native prover would, not a queue."""

    def __init__(self, key_path: str | Path, workers: int) -> None:
        self.workers = max(1, int(workers))
        self._pool = spawn_pool(self.workers, _load, (str(key_path),))
        # Start the workers now, so that loading the key is not inside a measured stage:
        # a submit finding no idle worker spawns one, and each takes far longer to load
        # the key than these submits take to arrive.
        try:
            sizes = {f.result() for f in [self._pool.submit(_ready) for _ in range(self.workers)]}
        except BaseException:
            stop_pool(self._pool)
            raise
        if len(sizes) != 1:
            raise RuntimeError(f"b_g2_msm workers loaded different keys: {sorted(sizes)} points")

    def msm(self, prepared: Any, chunks: int) -> G2Point:
        """sum_i z_i [v_i(tau)]_2 over the B query, zeros skipped, in `chunks` jobs."""
        split = prepared.split_b
        chunks = max(1, int(chunks))
        jobs = [
            self._pool.submit(_chunk, tails, scalars, ones)
            for tails, scalars, ones in zip(
                np.array_split(split.tails, chunks),
                np.array_split(split.tail_scalars, chunks),
                np.array_split(split.ones, chunks),
                strict=True,
            )
        ]
        make = G2Point.from_xy_bytes_unchecked_le
        return functools.reduce(operator.add, (make(f.result()) for f in jobs), G2Point.identity())

    def close(self, stop: bool = False) -> None:
        """Shut the pool down (`stop`: at once, its work abandoned)."""
        if stop:
            stop_pool(self._pool)
        else:
            self._pool.shutdown(cancel_futures=True)
