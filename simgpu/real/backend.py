"""Where the prover's GPU stages run: the Backend protocol and the CuPy backend.

The stages in `simgpu.real.groth16` are written once against `Backend`; a backend owns
"device" memory and the arithmetic that runs on it:

* `CupyBackend` (here): real VRAM through CuPy's memory pool (capped with `set_limit` to
  emulate a smaller card), the CUDA kernels of `simgpu.real.ntt` / `simgpu.real.msm`.
* `CpuBackend` (`simgpu.real.cpu_backend`): the same calls on the CPU for small circuits;
  its device memory is booked in a `simgpu.ledger.Ledger`, so a cap gives a real
  `VramExhausted` on CI too.

Every allocation is made under a name (d_a, d_bc, h_msm_bases_batch, l_msm_scalars,
h_msm_temporaries, ...), and running out of device memory raises `VramExhausted` naming
it; `simgpu.real.prover_footprint` lists the same names with their sizes.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from py_arkworks_bls12381 import G1Point

from simgpu.errors import DesignError, VramExhausted

if TYPE_CHECKING:
    from simgpu.real.keys import ProvingKey

T = TypeVar("T")

#: Rows of proving-key bases per streamed batch (96 bytes each): 4M rows = 384 MiB.
DEFAULT_STREAM_BATCH = 1 << 22

#: The G1 queries of the proving key that the kernels stage streams (H, L, A, B1).
G1_QUERIES = ("h", "l", "a", "b1")


@dataclass(eq=False)
class DeviceBuffer:
    """One named allocation of device memory.  `array` is a cupy.ndarray on the CuPy
    backend and a numpy.ndarray on the CPU backend; `token` is the backend's own record."""

    name: str
    array: Any
    nbytes: int
    backend: Backend
    token: Any = None
    live: bool = True

    def free(self) -> None:
        self.backend.free(self)


class PeakMeter:
    """Peak of a backend's used device bytes over a `with backend.peak_scope()` block."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.peak = start

    def see(self, used: int) -> None:
        if used > self.peak:
            self.peak = used


@runtime_checkable
class Backend(Protocol):
    """What the Groth16 stages need from a device."""

    name: str
    device: int
    resident_bases: bool  # keep the key's G1 bases on the device instead of streaming them
    stream_batch: int  # rows of bases per streamed batch

    def alloc(self, name: str, shape: tuple[int, ...], dtype: Any = np.uint32) -> DeviceBuffer:
        """A device buffer booked under `name`; VramExhausted naming it if it does not fit."""
        ...

    def upload(self, name: str, host: np.ndarray) -> DeviceBuffer:
        """alloc + host-to-device copy of `host`."""
        ...

    def write(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        """Copy host rows into buf.array[row : row + len(host)] (no allocation)."""
        ...

    def upload_bases(self, name: str, host: np.ndarray) -> DeviceBuffer:
        """Upload G1 affine points (uint32 (n, 24) standard form) in the device's point
        representation (Montgomery form on the GPU)."""
        ...

    def write_bases(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        """Like `write`, for G1 points (converted as `upload_bases` does)."""
        ...

    def free(self, buf: DeviceBuffer) -> None: ...

    def gather(self, name: str, src: Any, index: Any) -> DeviceBuffer:
        """A new buffer holding src[index] (rows), `index` a device int32 array."""
        ...

    def compute_h(self, a: Any, b: Any, c: Any) -> None:
        """Evaluations a, b, c (N, 8) over the domain -> h's coefficients in a; b, c
        clobbered.  Transient scratch is booked as `ntt_scratch`."""
        ...

    def msm(self, bases: Any, scalars: Any, name: str) -> G1Point:
        """sum scalars[i] * bases[i]; transient memory booked as `<name>_temporaries`."""
        ...

    def g1_sum(self, bases: Any, index: Any, name: str) -> G1Point:
        """sum bases[index[i]] (the scalars equal to one, batch-added)."""
        ...

    def host_bases(self, pk: ProvingKey, query: str) -> np.ndarray:
        """The host array a streamed batch of `query`'s bases is copied from."""
        ...

    def resident(self, pk: ProvingKey, query: str) -> DeviceBuffer:
        """`query`'s bases kept on the device (uploaded on first use, booked `srs_<query>`)."""
        ...

    def drop_resident(self) -> None:
        """Free every resident key buffer."""
        ...

    def fixed_base_mul_g1(self, base: G1Point, scalars: np.ndarray) -> np.ndarray:
        """[s_i] base for scalars uint32 (n, 8) -> affine uint32 (n, 24) (trusted setup)."""
        ...

    def used(self) -> int:
        """Device bytes in use (allocations, resident key bases included)."""
        ...

    def limit(self) -> int | None:
        """The VRAM cap, or None."""
        ...

    def capacity(self) -> int:
        """The cap if any, else the device's memory."""
        ...

    def peak_scope(self) -> contextlib.AbstractContextManager[PeakMeter]:
        """Context manager measuring the peak of used() inside it."""
        ...

    def synchronize(self) -> None: ...


class DeviceBuffers:
    """The device buffers a `prestage` leaves behind for `kernels`: d_a (the a vector, h
    after the NTTs) and d_bc (b and c, one allocation of shape (2, N, 8)).  The handle owns
    them: `release(name)` frees one group early, `free()` frees what is left."""

    def __init__(self, backend: Backend, buffers: dict[str, DeviceBuffer]) -> None:
        self.backend = backend
        self._buffers = dict(buffers)

    def held(self) -> list[str]:
        return list(self._buffers)

    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._buffers.values())

    def array(self, name: str) -> Any:
        try:
            return self._buffers[name].array
        except KeyError:
            raise DesignError(f"device buffer {name} is not held (released or never made)") from None

    def release(self, name: str) -> None:
        buf = self._buffers.pop(name, None)
        if buf is None:
            raise DesignError(f"device buffer {name} released twice")
        self.backend.free(buf)

    def free(self) -> None:
        while self._buffers:
            _, buf = self._buffers.popitem()
            self.backend.free(buf)

    def __enter__(self) -> DeviceBuffers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


def _key_cache_id(pk: ProvingKey, query: str) -> tuple[str, str]:
    return (pk.key_id, query)


class CupyBackend:
    """The GPU backend: CuPy arrays on one device, CUDA kernels of simgpu.real.ntt/msm.

    vram_limit caps CuPy's memory pool (`MemoryPool.set_limit`) so that a smaller card is
    emulated by real allocation failures.  resident_bases keeps the key's G1 bases on the
    device after first use; otherwise they live in pinned host memory and each MSM streams
    them in batches of `stream_batch` rows (as supraseal does).
    """

    name = "cupy"

    def __init__(
        self,
        device: int = 0,
        vram_limit: int | None = None,
        resident_bases: bool = False,
        stream_batch: int = DEFAULT_STREAM_BATCH,
    ) -> None:
        from simgpu.real.gpu import get_cupy

        self.cp = get_cupy()
        self.device = int(device)
        self.resident_bases = bool(resident_bases)
        self.stream_batch = int(stream_batch)
        self._vram_limit = int(vram_limit) if vram_limit else None
        with self.cp.cuda.Device(self.device):
            self.pool = self.cp.get_default_memory_pool()
            if self._vram_limit is not None:
                self.pool.set_limit(size=self._vram_limit)
            self._device_bytes = int(self.cp.cuda.runtime.memGetInfo()[1])
        self._pinned: dict[tuple[str, str], np.ndarray] = {}
        self._resident: dict[tuple[str, str], DeviceBuffer] = {}
        self._cache_lock = threading.Lock()  # GPU workers of one device share the caches

    # --- memory -----------------------------------------------------------------------
    def _exhausted(self, name: str, err: BaseException, free: int) -> VramExhausted:
        """`free`: what the pool could still give when the allocation failed."""
        cap = self.capacity()
        if isinstance(err, VramExhausted):
            # the kernels measured it at the failing allocation itself
            requested, inner, free = err.requested, f" ({err.buffer})" if err.buffer else "", err.free
        else:
            requested, inner = int(getattr(err, "_size", 0)), ""
        return VramExhausted(f"gpu{self.device}", requested, free, cap, buffer=f"{name}{inner}")

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

        CuPy's pool counts its cache of freed blocks against set_limit and does not flush
        it by itself, so under a cap a first failure gives the cache back and, for a call
        that can be repeated (allocations, the MSMs: pure functions of their inputs),
        tries once more.  Calls that work in place (compute_h) are not repeated: their
        input may be half-transformed.  The kernels raise CuPy's OutOfMemoryError or
        already a VramExhausted (simgpu.real.gpu.oom_guarded); both are handled."""
        oom = (self.cp.cuda.memory.OutOfMemoryError, VramExhausted)
        err = None
        if retry:
            try:
                return fn()
            except oom as e:
                traceback.clear_frames(e.__traceback__)
            self.pool.free_all_blocks()
        try:
            return fn()
        except oom as e:
            free = self._free_now()  # before the failed call's buffers go back
            traceback.clear_frames(e.__traceback__)
            err = self._exhausted(name, e, free)
        # Raised outside the except block: no traceback keeps the failed call's arrays alive.
        raise err

    def alloc(self, name: str, shape: tuple[int, ...], dtype: Any = np.uint32) -> DeviceBuffer:
        cp = self.cp
        with cp.cuda.Device(self.device):
            arr = self._guarded(name, lambda: cp.empty(shape, dtype=dtype))
        return DeviceBuffer(name, arr, int(arr.nbytes), self)

    def upload(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc(name, host.shape, host.dtype)
        with self.cp.cuda.Device(self.device):
            buf.array.set(np.ascontiguousarray(host))
        return buf

    def write(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        with self.cp.cuda.Device(self.device):
            buf.array[row : row + len(host)].set(np.ascontiguousarray(host))

    def upload_bases(self, name: str, host: np.ndarray) -> DeviceBuffer:
        buf = self.alloc(name, host.shape, np.uint32)
        self.write_bases(buf, host, 0)
        return buf

    def write_bases(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        from simgpu.real import msm

        host = np.ascontiguousarray(host)
        with self.cp.cuda.Device(self.device):
            out = buf.array[row : row + len(host)]
            self._guarded(buf.name, lambda: msm.bases_to_device(host, out=out))

    def free(self, buf: DeviceBuffer) -> None:
        if not buf.live:
            raise DesignError(f"gpu{self.device}: {buf.name} freed twice")
        buf.live = False
        buf.array = None  # the last reference: the block goes back to the pool

    def gather(self, name: str, src: Any, index: Any) -> DeviceBuffer:
        out = self.alloc(name, (int(index.shape[0]),) + tuple(src.shape[1:]), src.dtype)
        try:
            with self.cp.cuda.Device(self.device):
                self._guarded(name, lambda: self.cp.take(src, index, axis=0, out=out.array))
        except BaseException:
            self.free(out)
            raise
        return out

    # --- arithmetic (the CUDA kernels) --------------------------------------------------
    def compute_h(self, a: Any, b: Any, c: Any) -> None:
        from simgpu.real import ntt

        with self.cp.cuda.Device(self.device):
            if self._vram_limit is not None:
                # Under a cap, give the pool's cache back first: compute_h cannot be
                # retried (it works in place), so a cached block must not fail it.
                self.pool.free_all_blocks()
            self._guarded("ntt_scratch", lambda: ntt.compute_h(a, b, c), retry=False)

    def msm(self, bases: Any, scalars: Any, name: str) -> G1Point:
        from simgpu.real import msm

        with self.cp.cuda.Device(self.device):
            return self._guarded(f"{name}_temporaries", lambda: msm.msm_g1(bases, scalars))

    def g1_sum(self, bases: Any, index: Any, name: str) -> G1Point:
        from simgpu.real import msm

        with self.cp.cuda.Device(self.device):
            return self._guarded(f"{name}_temporaries", lambda: msm.g1_sum(bases, index))

    def fixed_base_mul_g1(self, base: G1Point, scalars: np.ndarray) -> np.ndarray:
        from simgpu.real import msm

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
    def peak_scope(self) -> Iterator[PeakMeter]:
        """Peak of the pool's used bytes, seen at every allocation in this thread (a CuPy
        memory hook; hooks are thread-local, so run the measured code in this thread)."""
        cp, pool = self.cp, self.pool
        meter = PeakMeter(self.used())

        class _PeakHook(cp.cuda.MemoryHook):
            name = f"simgpu-peak-{id(meter)}"

            def malloc_postprocess(self, **kwargs: Any) -> None:
                meter.see(int(pool.used_bytes()))

        with self.cp.cuda.Device(self.device), _PeakHook():
            yield meter
        meter.see(self.used())

    def synchronize(self) -> None:
        with self.cp.cuda.Device(self.device):
            self.cp.cuda.get_current_stream().synchronize()


def cupy_backend_available() -> bool:
    """True when CuPy and a CUDA device are usable (the GPU tests skip otherwise)."""
    try:
        from simgpu.real.gpu import cupy_available

        return bool(cupy_available())
    except Exception:
        return False
