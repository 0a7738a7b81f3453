"""Where the prover's GPU stages run: the `Device` protocol and the buffers it hands out.

Like a socket API written once against many network cards, the stages in
`simgpu.prover.groth16` are written once against `Device`; a device owns "device"
memory and the arithmetic that runs on it:

* `CupyDevice` (`simgpu.prover.cupy_device`): real VRAM through CuPy's memory pool (capped with `set_limit` to
  emulate a smaller card), the CUDA kernels of `simgpu.gpu.ntt` / `simgpu.gpu.msm`
  (G1, and G2 for a b_g2_msm run on the device).
* `CpuDevice` (`simgpu.prover.cpu_device`): the same calls on the CPU for small circuits;
  its device memory is booked in a `simgpu.ledger.Ledger`, so a cap gives a real
  `VramExhausted` on CI too.

Every allocation is made under a name (d_a, d_bc, h_msm_bases_batch, l_msm_scalars,
h_msm_temporaries, ...), and running out of device memory raises `VramExhausted` naming
it; `simgpu.prover.memory_plan` lists the same names with their sizes.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.errors import DesignError
from simgpu.ledger import current_holder, holder_record, largest_first
from simgpu.profile.schema import phase_key

if TYPE_CHECKING:
    from simgpu.prover.keys import ProvingKey

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
    device: Device
    token: Any = None
    live: bool = True

    def free(self) -> None:
        self.device.free(self)


class LiveBuffers:
    """A device's record of its live named buffers and whom each was allocated for (the
    holder of the allocating thread's `simgpu.ledger.holder_scope`), for OOM reports: like
    a cloakroom's stubs, taken at `add` and handed back at `discard`.  Weak: a buffer
    dropped without being freed is not kept alive by its stub."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: weakref.WeakKeyDictionary[DeviceBuffer, dict[str, Any]] = weakref.WeakKeyDictionary()

    def add(self, buf: DeviceBuffer) -> None:
        holder = current_holder()
        with self._lock:
            self._live[buf] = holder

    def discard(self, buf: DeviceBuffer) -> None:
        with self._lock:
            self._live.pop(buf, None)

    def holders(self) -> list[dict[str, Any]]:
        """Every live buffer with its holder, the largest first."""
        with self._lock:
            live = list(self._live.items())
        return largest_first([holder_record(b.name, b.nbytes, h) for b, h in live if b.live])


_phase = threading.local()


@contextlib.contextmanager
def phase_scope(name: str) -> Iterator[None]:
    """Name the phase of a stage this thread is in (the kernels' ntt, h_msm...), for the
    allocations an AllocTrace records meanwhile."""
    outer = getattr(_phase, "name", "")
    _phase.name = name
    try:
        yield
    finally:
        _phase.name = outer


def current_phase() -> str:
    """The phase this thread named last (phase_scope), or ""."""
    return getattr(_phase, "name", "")


class AllocTrace:
    """Every allocation and free a device's pool serves, in order: the record the model's
    caching pool (simgpu.devicepool) is checked and calibrated against.

    A row is (seconds since the trace began, thread, stage, op, bytes, address, the pool's
    bytes in arrays after it, the pool's bytes in all after it); the stage is
    "stage.phase" inside a named phase (phase_scope); op is "malloc" (the pool
    hands out a block: a cached one, a split one or a new one), "free" (back to its cache)
    or "grow" (the pool asks the driver for a new chunk).  Backends fill it where they can
    see their pool (CupyDevice, while a device's `peak_scope` is open in the thread).
    """

    def __init__(self) -> None:
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self.rows: list[tuple[float, str, str, str, int, int, int, int]] = []

    def note(self, op: str, stage: str, nbytes: int, ptr: int, used: int, total: int) -> None:
        t = time.perf_counter() - self._t0
        phase = current_phase()
        where = phase_key(stage, phase) if phase and stage else stage
        row = (t, threading.current_thread().name, where, op, nbytes, ptr, used, total)
        with self._lock:
            self.rows.append(row)


class PeakMeter:
    """Peak of a backend's used device bytes over a `with backend.peak_scope()` block."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.peak = start

    def see(self, used: int) -> None:
        if used > self.peak:
            self.peak = used


#: How the G2 MSM of the B query sizes its device arrays (simgpu.prover.memory_plan.g2_msm_points): "witness",
#: for the partition's own count of non-zero scalars (the smallest footprint, different
#: for every witness), or "key", for a count fixed by the circuit, which every partition
#: shares.  A caching pool keeps the first partition's blocks: with "witness" a later
#: partition's larger MSM cannot reuse them and takes a block another stage needed (the
#: race the capped H200 runs showed, docs/validation-log.md, the nineteenth lease).
MSM_CAPACITIES = ("witness", "key")


def checked_capacity(capacity: str) -> str:
    """`capacity` if it is one of MSM_CAPACITIES."""
    if capacity not in MSM_CAPACITIES:
        raise ValueError(f"msm_capacity must be one of {', '.join(MSM_CAPACITIES)}, got {capacity!r}")
    return capacity


@runtime_checkable
class Device(Protocol):
    """What the Groth16 stages need from a device."""

    name: str
    device: int
    resident_bases: bool  # keep the key's G1 bases on the device instead of streaming them
    stream_batch: int  # rows of bases per streamed batch
    #: how the G2 MSM sizes its arrays: one of MSM_CAPACITIES
    msm_capacity: str

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

    def gather(self, name: str, src: Any, index: Any, out: DeviceBuffer | None = None) -> DeviceBuffer:
        """A buffer holding src[index] (rows), `index` a device int32 array: `out` where
        given (booked earlier, as b_g2_msm books its arrays before its first copy), else a
        new one booked under `name`."""
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

    def alloc_bases_g2(self, name: str, rows: int) -> DeviceBuffer:
        """A buffer for `rows` G2 points in the device's representation, not yet filled
        (`write_bases_g2` fills it)."""
        ...

    def upload_bases_g2(self, name: str, host: np.ndarray) -> DeviceBuffer:
        """Upload G2 affine points (uint8 (n, 192), the key's xy encoding) in the device's
        point representation (uint32 (n, 48) Montgomery form on the GPU)."""
        ...

    def write_bases_g2(self, buf: DeviceBuffer, host: np.ndarray, row: int = 0) -> None:
        """Like `write`, for G2 points (converted as `upload_bases_g2` does)."""
        ...

    def msm_g2(self, bases: Any, scalars: Any, name: str) -> G2Point:
        """G2's sum scalars[i] * bases[i]; transient memory booked as `<name>_temporaries`."""
        ...

    def host_bases_g2(self, pk: ProvingKey) -> np.ndarray:
        """The host array a streamed batch of the B query's G2 points is copied from."""
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

    def peak_scope(self, stage: str = "") -> contextlib.AbstractContextManager[PeakMeter]:
        """Context manager measuring the peak of used() inside it (`stage` names the work
        inside, for a backend that records an AllocTrace)."""
        ...

    def synchronize(self) -> None: ...


class DeviceBuffers:
    """The device buffers a `prestage` leaves behind for `kernels`: d_a (the a vector, h
    after the NTTs) and d_bc (b and c, one allocation of shape (2, N, 8)).  The handle owns
    them: `release(name)` frees one group early, `free()` frees what is left."""

    def __init__(self, device: Device, buffers: dict[str, DeviceBuffer]) -> None:
        self.device = device
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
        self.device.free(buf)

    def free(self) -> None:
        while self._buffers:
            _, buf = self._buffers.popitem()
            self.device.free(buf)

    def __enter__(self) -> DeviceBuffers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()
