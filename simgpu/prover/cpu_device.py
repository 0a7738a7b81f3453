"""The CPU backend: the prover's GPU stages on the CPU, for machines without a GPU (CI).

Same calls as `CupyDevice`, so the stage code in `simgpu.prover.groth16` (batching,
buffer lifetimes, the 0/1 split of the MSMs) is the code that runs in CI.  "Device"
buffers are numpy arrays whose bytes are booked in a `simgpu.ledger.Ledger` (pool
"gpu<device>") under the buffer's name, with the VRAM cap as the ledger's capacity: a
too-small cap raises the same `VramExhausted` as CuPy's allocator, naming the buffer and
the buffers live at that instant with their holders (the ledger books each allocation
for the holder of the calling thread's `simgpu.ledger.holder_scope`).
What the CUDA kernels allocate inside a call (NTT scratch and the tables they cache per
domain size, MSM temporaries) is booked with the sizes `simgpu.prover.memory_plan`
takes from the kernels' own account, at the same moments, so the ledger follows the
GPU's memory plan byte for byte.

Arithmetic: the H polynomial through the kernels' Python-integer reference
(`simgpu.gpu.ntt.h_ref`; fine to 2^12, about a second there), MSMs through py-arkworks.
Also here: the windowed fixed-base multiplication the trusted setup uses on the CPU
(spawned worker processes for large batches: call it under `if __name__ == "__main__"`
from a script).
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.errors import DesignError
from simgpu.gpu.encoding import (
    FR_BYTES,
    G1_WORDS,
    G2_BYTES,
    g1_from_limbs,
    ints_to_limbs,
    limbs_to_ints,
    scalars_of_limbs,
)
from simgpu.ledger import Allocation, Ledger, vram_ledger
from simgpu.prover.device import DeviceBuffer, PeakMeter, checked_capacity
from simgpu.workers import pool_of

if TYPE_CHECKING:
    from simgpu.prover.keys import ProvingKey

#: Cap of a CpuDevice without a VRAM limit (a ledger needs a finite capacity): 1 PiB.
UNBOUNDED = 1 << 50
#: Streamed batch of the CPU backend by default (rows of 96 bytes).
DEFAULT_CPU_STREAM_BATCH = 1 << 16


# --- fixed-base scalar multiplication (trusted setup on the CPU) -------------------------

_WINDOW = 8  # bits per window: 32 windows of 255 nonzero multiples each


def _group(kind: str) -> type:
    return {"g1": G1Point, "g2": G2Point}[kind]


@functools.lru_cache(maxsize=4)
def _window_table(kind: str, base_bytes: bytes) -> list:
    """table[w * 256 + d] = d * 2^(8w) * base: a fixed-base product is then a sum of 32
    table entries (one per scalar byte), about 5x faster than arkworks' scalar mul."""
    group = _group(kind)
    base = group.from_xy_bytes_unchecked_le(base_bytes)
    table = []
    for _ in range(256 // _WINDOW):
        acc = group.identity()
        row = [acc]
        for _ in range((1 << _WINDOW) - 1):
            acc = acc + base
            row.append(acc)
        table.extend(row)
        base = acc + base  # 256 * base: the next window's unit
    return table


def _fixed_base_chunk(kind: str, base_bytes: bytes, scalars: np.ndarray) -> bytes:
    """xy-LE bytes of [s] base for each scalar row (uint32 (k, 8) standard form)."""
    table = _window_table(kind, base_bytes)
    get = table.__getitem__
    digits = np.ascontiguousarray(scalars, dtype="<u4").view(np.uint8).reshape(-1, FR_BYTES)
    offsets = np.arange(FR_BYTES, dtype=np.int64) << _WINDOW
    out = []
    for row in (digits.astype(np.int64) + offsets).tolist():
        out.append(functools.reduce(operator.add, map(get, row)).to_xy_bytes_le())
    return b"".join(out)


def fixed_base_mul(
    kind: str, base: G1Point | G2Point, scalars: np.ndarray, workers: int | None = None
) -> np.ndarray:
    """[s_i] base for each scalar (uint32 (n, 8) standard form).  G1 -> uint32 (n, 24),
    G2 -> uint8 (n, 192).  About 90 us per G1 and 180 us per G2 point per core; with
    `workers` > 1 (default: all cores) large batches are split over spawned processes."""
    base_bytes = base.to_xy_bytes_le()
    n = len(scalars)
    workers = (os.cpu_count() or 1) if workers is None else max(1, workers)
    if workers == 1 or n < 4096:
        raw = _fixed_base_chunk(kind, base_bytes, scalars)
    else:
        chunks = np.array_split(np.asarray(scalars), workers * 4)
        with pool_of(workers) as ex:
            parts = ex.map(_fixed_base_chunk, [kind] * len(chunks), [base_bytes] * len(chunks), chunks)
            raw = b"".join(parts)
    if kind == "g1":
        return np.frombuffer(raw, "<u4").reshape(n, G1_WORDS).astype(np.uint32, copy=True)
    return np.frombuffer(raw, np.uint8).reshape(n, G2_BYTES).copy()


# --- the backend -------------------------------------------------------------------------


class CpuDevice:
    """The CPU stand-in for a GPU: ledger-booked numpy buffers, reference arithmetic.

    vram_limit: the emulated card's memory (None: unbounded).  resident_bases /
    stream_batch / msm_capacity: as on CupyDevice (the same stage code streams the key in
    batches and sizes the G2 MSM the same way).
    """

    name = "cpu"

    def __init__(
        self,
        vram_limit: int | None = None,
        *,
        resident_bases: bool = False,
        stream_batch: int = DEFAULT_CPU_STREAM_BATCH,
        device: int = 0,
        setup_workers: int | None = None,
        msm_capacity: str = "witness",
    ) -> None:
        self.device = int(device)
        self.resident_bases = bool(resident_bases)
        self.stream_batch = int(stream_batch)
        self.msm_capacity = checked_capacity(msm_capacity)
        self._vram_limit = int(vram_limit) if vram_limit else None
        self.ledger: Ledger = vram_ledger(self.device, self._vram_limit or UNBOUNDED)
        self.setup_workers = setup_workers
        self._resident: dict[tuple[str, str], DeviceBuffer] = {}
        self._ntt_tables: dict[int, Allocation] = {}
        self._twiddles: Allocation | None = None
        self._twiddles_n = 0
        # The ledger is plain arithmetic; GPU workers sharing this backend take turns.
        self._lock = threading.RLock()

    # --- memory -----------------------------------------------------------------------
    def _book(self, nbytes: int, name: str) -> Allocation:
        with self._lock:
            return self.ledger.alloc(nbytes, name)

    def _unbook(self, alloc: Allocation) -> None:
        with self._lock:
            alloc.release()

    def alloc(self, name: str, shape: tuple[int, ...], dtype: Any = np.uint32) -> DeviceBuffer:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        token = self._book(nbytes, name)
        return DeviceBuffer(name, np.zeros(shape, dtype), nbytes, self, token)

    def upload(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc(name, host.shape, host.dtype)
        buf.array[...] = host
        return buf

    def write(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        buf.array[row : row + len(host)] = host

    def upload_bases(self, name: str, host: np.ndarray) -> DeviceBuffer:
        return self.upload(name, host)  # the CPU's point representation is the key's

    def write_bases(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        self.write(buf, host, row)

    def alloc_bases_g2(self, name: str, rows: int) -> DeviceBuffer:
        return self.alloc(name, (rows, 192), np.uint8)  # G2 points stay in the key's xy bytes

    def upload_bases_g2(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc_bases_g2(name, len(host))
        self.write_bases_g2(buf, host, 0)
        return buf

    def write_bases_g2(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        self.write(buf, host, row)

    def free(self, buf: DeviceBuffer) -> None:
        if not buf.live:
            raise DesignError(f"gpu{self.device}: {buf.name} freed twice")
        buf.live = False
        self._unbook(buf.token)
        buf.array = None

    def gather(self, name: str, src: Any, index: Any, out: DeviceBuffer | None = None) -> DeviceBuffer:
        if out is None:
            out = self.alloc(name, (len(index),) + tuple(src.shape[1:]), src.dtype)
        np.take(src, index, axis=0, out=out.array)
        return out

    # --- arithmetic -------------------------------------------------------------------
    def compute_h(self, a: Any, b: Any, c: Any) -> None:
        """h into a.  Books what the CUDA NTTs allocate, when they do: per call a scratch;
        per domain size its coset and constant tables, kept; for a domain larger than any
        before, a new twiddle table replacing the old one, with the generator tables it is
        built from held meanwhile."""
        from simgpu.gpu.footprint import (
            ntt_build_bytes,
            ntt_size_table_bytes,
            ntt_transient_bytes,
            ntt_twiddle_bytes,
        )
        from simgpu.gpu.ntt import h_ref  # the kernels' reference (CuPy-free import)

        n = len(a)
        held = [self._book(ntt_transient_bytes(n), "ntt_scratch")]
        try:
            with self._lock:
                if n not in self._ntt_tables:
                    self._ntt_tables[n] = self._book(ntt_size_table_bytes(n), "ntt_tables")
                if n > self._twiddles_n:
                    if self._twiddles is not None:
                        self._unbook(self._twiddles)
                        self._twiddles, self._twiddles_n = None, 0
                    held.append(self._book(ntt_build_bytes(n), "ntt_twiddle_build"))
                    self._twiddles = self._book(ntt_twiddle_bytes(n), "ntt_twiddles")
                    self._twiddles_n = n
            h = h_ref(*(limbs_to_ints(x) for x in (a, b, c)))
            a[...] = ints_to_limbs(h)
        finally:
            for alloc in held:
                self._unbook(alloc)

    def drop_ntt_tables(self) -> None:
        """Free the cached NTT tables (as simgpu.gpu.ntt.clear_caches does on the GPU)."""
        with self._lock:
            while self._ntt_tables:
                _, alloc = self._ntt_tables.popitem()
                self._unbook(alloc)
            if self._twiddles is not None:
                self._unbook(self._twiddles)
                self._twiddles, self._twiddles_n = None, 0

    def msm(self, bases: Any, scalars: Any, name: str) -> G1Point:
        from simgpu.gpu.footprint import msm_transient_bytes

        temps = self._book(msm_transient_bytes(len(bases)), f"{name}_temporaries")
        try:
            return G1Point.multiexp_unchecked(g1_from_limbs(bases), scalars_of_limbs(scalars))
        finally:
            self._unbook(temps)

    def g1_sum(self, bases: Any, index: Any, name: str) -> G1Point:
        from simgpu.gpu.footprint import g1_sum_transient_bytes

        temps = self._book(g1_sum_transient_bytes(len(index)), f"{name}_temporaries")
        try:
            points = g1_from_limbs(np.take(bases, index, axis=0))
            return functools.reduce(operator.add, points, G1Point.identity())
        finally:
            self._unbook(temps)

    def msm_g2(self, bases: Any, scalars: Any, name: str) -> G2Point:
        """arkworks' G2 multiexp, booking what the CUDA G2 MSM allocates."""
        from simgpu.gpu.footprint import msm_transient_bytes
        from simgpu.gpu.msm import msm_g2_ref

        temps = self._book(msm_transient_bytes(len(scalars), "g2"), f"{name}_temporaries")
        try:
            return msm_g2_ref(bases, scalars)
        finally:
            self._unbook(temps)

    def fixed_base_mul_g1(self, base: G1Point, scalars: np.ndarray) -> np.ndarray:
        return fixed_base_mul("g1", base, scalars, self.setup_workers)

    # --- the key's bases ----------------------------------------------------------------
    def host_bases(self, pk: ProvingKey, query: str) -> np.ndarray:
        return pk.query(query)

    def host_bases_g2(self, pk: ProvingKey) -> np.ndarray:
        return pk.b_g2

    def resident(self, pk: ProvingKey, query: str) -> DeviceBuffer:
        key = (pk.key_id, query)
        with self._lock:
            if key not in self._resident:
                self._resident[key] = self.upload_bases(f"srs_{query}", pk.query(query))
            return self._resident[key]

    def drop_resident(self) -> None:
        with self._lock:
            while self._resident:
                _, buf = self._resident.popitem()
                self.free(buf)

    # --- queries ------------------------------------------------------------------------
    def used(self) -> int:
        return self.ledger.used

    def limit(self) -> int | None:
        return self._vram_limit

    def capacity(self) -> int:
        return self.ledger.capacity

    @contextlib.contextmanager
    def peak_scope(self, stage: str = "") -> Iterator[PeakMeter]:
        """Peak of the ledger inside the block (the ledger tracks it at every booking;
        `stage` is for backends that trace their pool: the ledger needs no trace)."""
        outer_peak = self.ledger.peak
        self.ledger.peak = self.ledger.used
        meter = PeakMeter(self.ledger.used)
        try:
            yield meter
        finally:
            meter.see(self.ledger.peak)
            self.ledger.peak = max(outer_peak, self.ledger.peak)

    def synchronize(self) -> None:
        return None
