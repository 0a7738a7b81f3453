"""The GPU as the prover's `Device`: CuPy arrays and the CUDA kernels of simgpu.gpu.

Real VRAM through CuPy's memory pool, capped with `set_limit` to emulate a smaller
card, so an allocation beyond the cap is a real `cudaMalloc` failure, raised as
`VramExhausted` naming the buffer and the named buffers live at that instant with their
holders (the device's own record, `LiveBuffers`).  What the kernels allocate inside a
call and the pool's cache of freed blocks are not named buffers: an OOM report shows
them as the part of the used bytes no holder accounts for.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.errors import DesignError, VramExhausted
from simgpu.prover.device import (
    DEFAULT_STREAM_BATCH,
    AllocTrace,
    DeviceBuffer,
    LiveBuffers,
    PeakMeter,
    checked_capacity,
)

if TYPE_CHECKING:
    from simgpu.prover.keys import ProvingKey

T = TypeVar("T")


def _key_cache_id(pk: ProvingKey, query: str) -> tuple[str, str]:
    return (pk.key_id, query)


class CupyDevice:
    """The GPU backend: CuPy arrays on one device, CUDA kernels of simgpu.gpu.ntt/msm.

    vram_limit caps CuPy's memory pool (`MemoryPool.set_limit`) so that a smaller card is
    emulated by real allocation failures.  resident_bases keeps the key's G1 bases on the
    device after first use; otherwise they live in pinned host memory and each MSM streams
    them in batches of `stream_batch` rows (as supraseal does).  msm_capacity: how the G2
    MSM of b_g2_msm sizes its arrays, by the witness or by the key
    (simgpu.prover.device.MSM_CAPACITIES).
    """

    name = "cupy"

    def __init__(
        self,
        device: int = 0,
        vram_limit: int | None = None,
        resident_bases: bool = False,
        stream_batch: int = DEFAULT_STREAM_BATCH,
        msm_capacity: str = "witness",
    ) -> None:
        from simgpu.gpu.cuda import get_cupy

        self.cp = get_cupy()
        self.device = int(device)
        self.resident_bases = bool(resident_bases)
        self.stream_batch = int(stream_batch)
        self.msm_capacity = checked_capacity(msm_capacity)
        self._vram_limit = int(vram_limit) if vram_limit else None
        with self.cp.cuda.Device(self.device):
            self.pool = self.cp.get_default_memory_pool()
            # The pool is the process's: a cap an earlier device object set must not outlive
            # it (device objects of one device in one process share one cap: the last sets it).
            self.pool.set_limit(size=self._vram_limit or 0)
            self._device_bytes = int(self.cp.cuda.runtime.memGetInfo()[1])
        self._pinned: dict[tuple[str, str], np.ndarray] = {}
        self._resident: dict[tuple[str, str], DeviceBuffer] = {}
        self._cache_lock = threading.Lock()  # GPU workers of one device share the caches
        self.live = LiveBuffers()
        #: cache flushes under memory pressure since this device was made (see flush)
        self.flushes = 0
        #: at each allocation that failed even after a flush: the pool's bytes in live
        #: arrays and in its cache (see _note_shortfall)
        self.shortfalls: list[dict[str, int]] = []
        #: set to an AllocTrace to record every allocation and free (see peak_scope)
        self.alloc_trace: AllocTrace | None = None

    # --- memory -----------------------------------------------------------------------
    def _exhausted(self, name: str, err: BaseException, free: int, cached: int = 0) -> VramExhausted:
        """`free`: what the pool could still give when the allocation failed; `cached`:
        what it kept free then in blocks that arrays still held (after the flush, for a
        call that was tried again)."""
        cap = self.capacity()
        if isinstance(err, VramExhausted):
            # the kernels measured it at the failing allocation itself
            requested, inner, free = err.requested, f" ({err.buffer})" if err.buffer else "", err.free
        else:
            requested, inner = int(getattr(err, "_size", 0)), ""
        return VramExhausted(
            f"gpu{self.device}",
            requested,
            free,
            cap,
            buffer=f"{name}{inner}",
            holders=self.live.holders(),
            cached=cached,
        )

    def _free_now(self) -> int:
        """Bytes the pool can still hand out: under a cap, the limit less everything it
        holds (its cache of freed blocks counts against the limit too)."""
        limit = self.pool.get_limit()
        if limit:
            return max(0, int(limit) - int(self.pool.total_bytes()))
        free, _ = self.cp.cuda.runtime.memGetInfo()
        return int(free) + int(self.pool.free_bytes())

    def _guarded(self, name: str, fn: Callable[[], T], *, retry: bool = True) -> T:
        """Run fn and translate running out of memory into VramExhausted naming `name`.

        CuPy's pool counts its cache of freed blocks against set_limit, and what it gives
        back by itself at the limit is its version's business, so under a cap a first
        failure gives the cache back (flush) and, for a call
        that can be repeated (allocations, the MSMs: pure functions of their inputs),
        tries once more.  Calls that work in place (compute_h) are not repeated: their
        input may be half-transformed.  The kernels raise CuPy's OutOfMemoryError or
        already a VramExhausted (simgpu.gpu.cuda.oom_guarded); both are handled."""
        oom = (self.cp.cuda.memory.OutOfMemoryError, VramExhausted)
        err = None
        if retry:
            try:
                return fn()
            except oom as e:
                traceback.clear_frames(e.__traceback__)
            self.flush()
        try:
            return fn()
        except oom as e:
            free = self._free_now()  # before the failed call's buffers go back
            shortfall = self._note_shortfall()
            traceback.clear_frames(e.__traceback__)
            err = self._exhausted(name, e, free, shortfall["cached"])
        # Raised outside the except block: no traceback keeps the failed call's arrays alive.
        raise err

    def _note_shortfall(self) -> dict[str, int]:
        """Record how the pool's bytes split at a failure that a flush did not cure: in
        live arrays, and in its cache.  free_all_blocks gives back only whole cached
        blocks, so what stays cached after a flush is the free part of blocks split
        between arrays (or blocks other workers freed since): bytes the cap counts that
        no array holds, which the model's ledger does not have.  Returns the record."""
        used, total = int(self.pool.used_bytes()), int(self.pool.total_bytes())
        shortfall = {"in_arrays": used, "cached": total - used}
        with self._cache_lock:
            self.shortfalls.append(shortfall)
        return shortfall

    def flush(self) -> None:
        """Give the pool's cache of freed blocks back to the driver.  Each cudaFree waits
        for the whole device, every worker's queued kernels included, and what is then
        allocated again is a fresh cudaMalloc: under a cap this is the cost of running
        short.  `flushes` counts them, for the run's record."""
        self.pool.free_all_blocks()
        with self._cache_lock:
            self.flushes += 1
        if self.alloc_trace is not None:
            self.alloc_trace.note("flush", "", 0, 0, *_pool_bytes(self.pool))

    def alloc(self, name: str, shape: tuple[int, ...], dtype: Any = np.uint32) -> DeviceBuffer:
        cp = self.cp
        with cp.cuda.Device(self.device):
            arr = self._guarded(name, lambda: cp.empty(shape, dtype=dtype))
        buf = DeviceBuffer(name, arr, int(arr.nbytes), self)
        self.live.add(buf)
        return buf

    def upload(self, name: str, host: np.ndarray) -> DeviceBuffer:
        from simgpu.gpu import transfer

        buf = self.alloc(name, host.shape, host.dtype)
        with self.cp.cuda.Device(self.device):
            transfer.to_device(buf.array, host)  # staged: a pageable copy holds the driver
        return buf

    def write(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        from simgpu.gpu import transfer

        with self.cp.cuda.Device(self.device):
            transfer.to_device(buf.array[row : row + len(host)], host)

    def upload_bases(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc(name, host.shape, np.uint32)
        self.write_bases(buf, host, 0)
        return buf

    def write_bases(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        from simgpu.gpu import msm

        host = np.ascontiguousarray(host)
        with self.cp.cuda.Device(self.device):
            out = buf.array[row : row + len(host)]
            self._guarded(buf.name, lambda: msm.bases_to_device(host, out=out))

    def alloc_bases_g2(self, name: str, rows: int) -> DeviceBuffer:
        return self.alloc(name, (rows, 48), np.uint32)

    def upload_bases_g2(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc_bases_g2(name, len(host))
        self.write_bases_g2(buf, host, 0)
        return buf

    def write_bases_g2(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        from simgpu.gpu import msm

        host = np.ascontiguousarray(host)
        with self.cp.cuda.Device(self.device):
            out = buf.array[row : row + len(host)]
            self._guarded(buf.name, lambda: msm.bases_g2_to_device(host, out=out))

    def pin_pages(self, host: np.ndarray) -> Any:
        """Page-lock host memory where it lies for uploads from it (transfer.pin_pages):
        its handle, or None where CUDA refuses."""
        from simgpu.gpu import transfer

        with self.cp.cuda.Device(self.device):
            return transfer.pin_pages(host)

    def free(self, buf: DeviceBuffer) -> None:
        if not buf.live:
            raise DesignError(f"gpu{self.device}: {buf.name} freed twice")
        buf.live = False
        self.live.discard(buf)
        buf.array = None  # the last reference: the block goes back to the pool

    def gather(self, name: str, src: Any, index: Any, out: DeviceBuffer | None = None) -> DeviceBuffer:
        own = out is None  # a buffer made here is freed here on failure; a booked one is the caller's
        if own:
            out = self.alloc(name, (int(index.shape[0]),) + tuple(src.shape[1:]), src.dtype)
        try:
            with self.cp.cuda.Device(self.device):
                self._guarded(name, lambda: self.cp.take(src, index, axis=0, out=out.array))
        except BaseException:
            if own:
                self.free(out)
            raise
        return out

    # --- arithmetic (the CUDA kernels) --------------------------------------------------
    def compute_h(self, a: Any, b: Any, c: Any) -> None:
        from simgpu.gpu import ntt

        with self.cp.cuda.Device(self.device):
            # compute_h works in place and cannot be repeated, so what it could fail to
            # allocate (its tables) is built first, in a call that can.  What is left
            # are pointer arrays of a few bytes, which the pool carves from any cached
            # block.  Giving the cache back before every call instead cost a device-wide
            # synchronisation per partition under a cap (see flush).
            self._guarded("ntt_tables", lambda: ntt.prepare_h(a))
            self._guarded("ntt_scratch", lambda: ntt.compute_h(a, b, c), retry=False)

    def msm(self, bases: Any, scalars: Any, name: str) -> G1Point:
        from simgpu.gpu import msm

        with self.cp.cuda.Device(self.device):
            return self._guarded(f"{name}_temporaries", lambda: msm.msm_g1(bases, scalars))

    def g1_sum(self, bases: Any, index: Any, name: str) -> G1Point:
        from simgpu.gpu import msm

        with self.cp.cuda.Device(self.device):
            return self._guarded(f"{name}_temporaries", lambda: msm.g1_sum(bases, index))

    def msm_g2(self, bases: Any, scalars: Any, name: str) -> G2Point:
        from simgpu.gpu import msm

        with self.cp.cuda.Device(self.device):
            return self._guarded(f"{name}_temporaries", lambda: msm.msm_g2(bases, scalars))

    def fixed_base_mul_g1(self, base: G1Point, scalars: np.ndarray) -> np.ndarray:
        from simgpu.gpu import msm

        out = np.empty((len(scalars), 24), np.uint32)
        step = 1 << 22  # bounds the device memory of one call (scalars + affine outputs)
        for s in range(0, len(scalars), step):
            buf = self.upload("setup_scalars", scalars[s : s + step])
            try:
                with self.cp.cuda.Device(self.device):
                    out[s : s + len(buf.array)] = self._guarded(
                        "setup_temporaries", lambda b=buf: msm.fixed_base_mul_g1(base, b.array)
                    )
            finally:
                self.free(buf)
        return out

    # --- the key's bases ----------------------------------------------------------------
    def host_bases(self, pk: ProvingKey, query: str) -> np.ndarray:
        """A pinned copy of the query's bases (made once per key): DMA-able, so batches
        upload at full PCIe speed, as supraseal keeps its SRS in pinned memory."""
        key = _key_cache_id(pk, query)
        with self._cache_lock:
            if key not in self._pinned:
                import cupyx

                src = pk.query(query)
                pinned = cupyx.empty_pinned(src.shape, dtype=src.dtype)
                np.copyto(pinned, src)
                self._pinned[key] = pinned
            return self._pinned[key]

    def host_bases_g2(self, pk: ProvingKey) -> np.ndarray:
        """A pinned copy of the B query's G2 points, as host_bases keeps the G1 queries."""
        key = _key_cache_id(pk, "b_g2")
        with self._cache_lock:
            if key not in self._pinned:
                import cupyx

                pinned = cupyx.empty_pinned(pk.b_g2.shape, dtype=pk.b_g2.dtype)
                np.copyto(pinned, pk.b_g2)
                self._pinned[key] = pinned
            return self._pinned[key]

    def resident(self, pk: ProvingKey, query: str) -> DeviceBuffer:
        key = _key_cache_id(pk, query)
        host = self.host_bases(pk, query)
        with self._cache_lock:
            if key not in self._resident:
                self._resident[key] = self.upload_bases(f"srs_{query}", host)
            return self._resident[key]

    def drop_resident(self) -> None:
        with self._cache_lock:
            while self._resident:
                _, buf = self._resident.popitem()
                self.free(buf)

    def drop_pinned(self) -> None:
        with self._cache_lock:
            self._pinned.clear()

    # --- queries ------------------------------------------------------------------------
    def set_vram_limit(self, vram_limit: int | None) -> None:
        """Change the pool's cap (None lifts it).  The pool is shared by every user of the
        device in this process, so tests that cap it put it back."""
        self._vram_limit = int(vram_limit) if vram_limit else None
        with self.cp.cuda.Device(self.device):
            self.pool.set_limit(size=self._vram_limit or 0)

    def used(self) -> int:
        with self.cp.cuda.Device(self.device):
            return int(self.pool.used_bytes())

    def limit(self) -> int | None:
        return self._vram_limit

    def capacity(self) -> int:
        return self._vram_limit or self._device_bytes

    @contextlib.contextmanager
    def peak_scope(self, stage: str = "") -> Iterator[PeakMeter]:
        """Peak of the pool's used bytes, seen at every allocation in this thread (a CuPy
        memory hook; hooks are thread-local, so run the measured code in this thread).
        With `alloc_trace` set, the same hook records every allocation and free under
        `stage`."""
        cp, pool, trace = self.cp, self.pool, self.alloc_trace
        meter = PeakMeter(self.used())

        class _PoolHook(cp.cuda.MemoryHook):
            name = f"simgpu-pool-{id(meter)}"

            def malloc_postprocess(self, **kw: Any) -> None:
                used = int(pool.used_bytes())
                meter.see(used)
                if trace is not None:
                    trace.note("malloc", stage, kw["mem_size"], kw["mem_ptr"], used, int(pool.total_bytes()))

            if trace is not None:

                def free_postprocess(self, **kw: Any) -> None:
                    trace.note("free", stage, kw["mem_size"], kw["mem_ptr"], *_pool_bytes(pool))

                def alloc_postprocess(self, **kw: Any) -> None:
                    trace.note("grow", stage, kw["mem_size"], kw["mem_ptr"], *_pool_bytes(pool))

        with self.cp.cuda.Device(self.device), _PoolHook():
            yield meter
        meter.see(self.used())

    def synchronize(self) -> None:
        with self.cp.cuda.Device(self.device):
            self.cp.cuda.get_current_stream().synchronize()


def _pool_bytes(pool: Any) -> tuple[int, int]:
    """The pool's bytes in arrays and in all (arrays and cache)."""
    return int(pool.used_bytes()), int(pool.total_bytes())


def cupy_device_available() -> bool:
    """True when CuPy and a CUDA device are usable (the GPU tests skip otherwise)."""
    try:
        from simgpu.gpu.cuda import cupy_available

        return bool(cupy_available())
    except Exception:
        return False
