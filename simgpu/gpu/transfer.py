"""Host <-> device copies through page-locked staging: copies that do not hold the driver.

A copy from or to pageable memory is the driver's own errand: it moves the bytes through
a bounce buffer of its own, on the calling thread, and it returns only when they are
across (for a read-back, when every kernel queued before it has run).  While it runs the
driver lets no other thread of the process launch.  On the H200 a GPU worker's kernel
launch waited 10 ms on average behind the other worker's pageable copy, 1.27 s in a 15 s
run, and none with one worker (docs/data/h200-2026-12-02a).  A copy from page-locked
memory is a DMA the driver only queues; the wait for it is a stream synchronize or an
event, which holds nobody else up.

So every copy here goes through a page-locked block, like parcels through a loading
dock: an upload is packed into a block taken from CuPy's pinned pool (a host memcpy,
split over a few copier threads when it is large: one thread copies about 5 GB/s on
those hosts), the truck leaves at once, and the block goes back to the pool only when
its truck has arrived (its event), checked at the thread's next copy.  The uploading
thread never waits for the device: on the one stream that the workers share, a copy
queues behind the other workers' kernels.  A read-back lands in a block and is copied
out, after a stream synchronize.

Each thread that uploads has its own crew of packers, so that one worker's packing
never queues behind another's.  Whether that mattered was measured, not assumed: the
twenty-first lease's traces had b_g2_msm's uploads leave just after the next worker's
prestage's, but an A/B on an H100 (experiments/copier_ab.py, docs/data/h100-2026-12-05)
found none.  b_g2_msm beside one prestage took 73.0 ms with one crew for the process
and 73.8 with its own (63.3 alone), and beside prestage and kernels 132.8 and 130.3
(medians of 10).

A crew outlives its thread: when the thread ends, the next thread that uploads takes it
over.  A finalizer is a new thread every partition, and each of a new crew's four
threads must win the interpreter lock to start, while the thread that starts it waits:
on a 2-core host a 64-192 MiB pack from a new thread took 0.3-0.6 ms longer with a new
crew than with a warm one alone, and up to 12 ms longer beside 1-3 busy Python threads,
though not in every setting (medians of 40, `experiments/crew_start.py`).  On the
twenty-seventh lease split-finalizer's b_g2_msm reached its temporaries 7 ms later than
single-lock's, whose worker thread keeps its crew.  On the twenty-eighth, K twice each
way (FRESH_COPIERS_ENV for the old way): handed-on crews brought b_g2_msm to its
temporaries 1-3 ms sooner at the median and its p95 from 191-207 ms to 137-140
(docs/validation-log.md).

Host memory: the blocks in flight stay in CuPy's pinned pool once freed; the model's
host ledger does not carry them.

A partition's a, b and c skip the dock.  Like cuzk, which registers them with
`cudaHostRegister` before it takes the GPU lock, the driver page-locks them where they
landed (`pin_pages`, as a result comes back from its synthesis worker: simgpu.prover.
handoff), so that the prestage, under the lock, only queues their copies.  Packed
through the dock, the prestage's 384 MiB at 2^22 took 31 ms alone and 86 ms in a
pipeline of two GPU workers: four copier threads racing the syntheses for cores and
memory bandwidth, under the lock.  Pinned, the prestage's thread is done in 0.5 ms, its
copies land in 11 ms alone and 25 ms in that pipeline, and the pipeline ran 9% faster;
locking them takes 24 ms, on the result's way back (docs/data/h100-2026-12-06i).  A pin is let go
(`HostPin.close`: its copies waited for, then `cudaHostUnregister`) on the thread that
drops it last, the hand-off's releaser in a pipeline.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from simgpu.gpu import cuda

#: Set (to anything) to copy as CuPy does, from and to pageable memory: the A/B of the
#: lease scripts (experiments/leases/device_lease16.sh), not a setting for a prover.
PAGEABLE_ENV = "SIMGPU_PAGEABLE_COPIES"

#: Set (to anything) for one crew of copiers shared by every thread, as before each
#: thread had its own: the A/B of experiments/copier_ab.py, not a setting for a prover.
SHARED_COPIERS_ENV = "SIMGPU_SHARED_COPIERS"

#: Set (to anything) for a new crew for every thread, as before crews were handed on:
#: the A/B of experiments/leases/device_lease28.sh, not a setting for a prover.
FRESH_COPIERS_ENV = "SIMGPU_FRESH_COPIERS"

#: cudaHostRegisterPortable (CuPy names no constant for it)
HOST_REGISTER_PORTABLE = 1

#: Uploads at least this large are packed by the copier threads, in this many pieces.
PARALLEL_BYTES = 8 << 20
COPIERS = 4

#: Per thread: its crew of copiers and its blocks in flight.
_local = threading.local()
_shared: ThreadPoolExecutor | None = None
_shared_lock = threading.Lock()
#: Crews whose thread has ended, for the next thread that uploads (deque: append and pop
#: are atomic, and a lock could deadlock in a finalizer run by the collector).
_idle: deque[ThreadPoolExecutor] = deque()


class _Crew:
    """A thread's hold on its copiers: dropped with the thread's locals when the thread
    ends, it hands them on."""

    def __init__(self, copiers: ThreadPoolExecutor) -> None:
        self.copiers = copiers

    def __del__(self) -> None:
        try:
            if not os.environ.get(FRESH_COPIERS_ENV):
                _idle.append(self.copiers)
        except Exception:  # at interpreter exit the module's globals may be gone already
            pass


def _pool() -> ThreadPoolExecutor:
    """The calling thread's crew of copiers: at its first large upload, a crew whose
    thread has ended, else a new one."""
    if os.environ.get(SHARED_COPIERS_ENV):
        global _shared
        with _shared_lock:
            if _shared is None:
                _shared = ThreadPoolExecutor(COPIERS, thread_name_prefix="staging")
            return _shared
    mine = getattr(_local, "crew", None)
    if mine is None:
        try:
            copiers = _idle.pop()
        except IndexError:
            name = threading.current_thread().name
            copiers = ThreadPoolExecutor(COPIERS, thread_name_prefix=f"staging-{name}")
        mine = _local.crew = _Crew(copiers)
    return mine.copiers


class _InFlight:
    """One thread's blocks whose copies the stream has not reached yet, oldest first."""

    def __init__(self) -> None:
        self.blocks: deque[tuple[Any, np.ndarray]] = deque()

    def reap(self) -> None:
        """Give back every block whose copy is done (events complete in stream order)."""
        while self.blocks and self.blocks[0][0].done:
            self.blocks.popleft()

    def __del__(self) -> None:
        # a thread that ends with a copy still queued must not hand its blocks back to
        # the pool (and so to another thread) before the copy has left them
        for ev, _ in self.blocks:
            ev.synchronize()


def _in_flight() -> _InFlight:
    mine = getattr(_local, "in_flight", None)
    if mine is None:
        mine = _local.in_flight = _InFlight()
    return mine


def _pack(block: np.ndarray, src: np.ndarray) -> None:
    """block[:] = src (both flat uint8): one memcpy, or COPIERS at once when large
    (numpy releases the interpreter lock inside each)."""
    n = src.nbytes
    if n < PARALLEL_BYTES:
        np.copyto(block, src)
        return
    step = -(-n // COPIERS)
    futures = [_pool().submit(np.copyto, block[i : i + step], src[i : i + step]) for i in range(0, n, step)]
    for f in futures:
        f.result()


class HostPin:
    """Host memory page-locked where it lies (`cudaHostRegister`), and the copies queued
    from it: it stays locked, and mapped (the pin holds a view), until those copies have
    left it.  close() waits for them and unlocks; dropping the last reference closes."""

    def __init__(self, host: np.ndarray) -> None:
        cp = cuda.get_cupy()
        self._host: np.ndarray | None = None  # set once locked: close() then unlocks
        self.ptr = int(host.ctypes.data)
        self.nbytes = int(host.nbytes)
        self._copies: list[Any] = []
        self._lock = threading.Lock()
        # portable: a second GPU's workers copy from it too
        cp.cuda.runtime.hostRegister(self.ptr, self.nbytes, HOST_REGISTER_PORTABLE)
        self._host = host
        with _pins_lock:
            _pins[self.ptr] = weakref.ref(self)

    def holds(self, host: np.ndarray) -> bool:
        """Whether `host`'s bytes lie inside this pin."""
        start = int(host.ctypes.data)
        return self._host is not None and self.ptr <= start and start + host.nbytes <= self.ptr + self.nbytes

    def note(self, copy_done: Any) -> None:
        """A copy from this memory is queued: `copy_done` is its event."""
        with self._lock:
            self._copies = [ev for ev in self._copies if not ev.done]
            self._copies.append(copy_done)

    def close(self) -> None:
        """Wait for the copies from it, then unlock it (once)."""
        with self._lock:
            if self._host is None:
                return
            copies, self._copies = self._copies, []
            for ev in copies:
                ev.synchronize()
            with _pins_lock:
                _pins.pop(self.ptr, None)
            cuda.get_cupy().cuda.runtime.hostUnregister(self.ptr)
            self._host = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit CUDA or the module may be gone already
            pass


#: Live pins by address, not kept alive by the table: their last holder closes them.
#: Re-entrant: a pin the collector finalizes while this thread reads the table closes.
_pins: dict[int, weakref.ref[HostPin]] = {}
_pins_lock = threading.RLock()


_refusals: set[str] = set()


def pin_pages(host: np.ndarray) -> HostPin | None:
    """Page-lock `host` (C-contiguous) where it lies, so that uploads from it are DMAs
    the driver only queues; None where CUDA refuses it, or the pageable A/B is on
    (PAGEABLE_ENV): the uploads then go through the staging.  Whether to pin at all is
    the prover's setting (ProverSettings.abc_upload)."""
    if os.environ.get(PAGEABLE_ENV) or host.nbytes == 0:
        return None
    if not host.flags.c_contiguous:
        raise ValueError("pin_pages: the memory must be C-contiguous")
    cp = cuda.get_cupy()
    try:
        return HostPin(host)
    except cp.cuda.runtime.CUDARuntimeError as e:  # no room to lock, already registered
        # only CUDA's refusals fall back: a first lease's pins all fell back silently on
        # a misspelt flag, so each kind of refusal is said once
        if str(e) not in _refusals:
            _refusals.add(str(e))
            warnings.warn(f"a, b, c not page-locked ({e}): uploads go through the staging", stacklevel=2)
        return None


def _pin_of(host: np.ndarray) -> HostPin | None:
    with _pins_lock:
        refs = list(_pins.values())
    for ref in refs:
        pin = ref()
        if pin is not None and pin.holds(host):
            return pin
    return None


def page_locked(host: np.ndarray) -> bool:
    """Whether `host`'s memory is page-locked already (the key's cached bases are)."""
    cp = cuda.get_cupy()
    attrs = cp.cuda.runtime.pointerGetAttributes(host.ctypes.data)
    return int(attrs.type) == int(cp.cuda.runtime.memoryTypeHost)


def to_device(dst: Any, host: np.ndarray) -> None:
    """Copy `host` into the CuPy array `dst` (same bytes, C-contiguous) on the current
    stream; `host` may be reused as soon as this returns.  Memory a HostPin holds is
    queued straight from where it lies (the pin waits for the copy before it unlocks);
    other pageable memory goes through the staging; other page-locked memory (the key's
    cached bases) straight across, in CuPy's own copy."""
    host = np.ascontiguousarray(host)
    if host.nbytes != dst.nbytes:
        raise ValueError(f"copy of {host.nbytes} bytes into an array of {dst.nbytes}")
    if not dst.flags.c_contiguous:
        raise ValueError("to_device: the destination must be C-contiguous")
    if host.nbytes == 0:
        return
    cp = cuda.get_cupy()
    pin = _pin_of(host)
    if pin is not None:  # queued from where it lies; the pin outlives the copy
        stream = cp.cuda.get_current_stream()
        dst.data.copy_from_host_async(ctypes.c_void_p(host.ctypes.data), host.nbytes, stream)
        ev = cp.cuda.Event(block=False, disable_timing=True)
        ev.record(stream)
        pin.note(ev)
        return
    if os.environ.get(PAGEABLE_ENV) or page_locked(host):
        dst.set(host)
        return
    import cupyx

    mine = _in_flight()
    mine.reap()
    src = host.reshape(-1).view(np.uint8)
    block = cupyx.empty_pinned(src.nbytes, dtype=np.uint8)
    _pack(block, src)
    stream = cp.cuda.get_current_stream()
    dst.data.copy_from_host_async(ctypes.c_void_p(block.ctypes.data), src.nbytes, stream)
    ev = cp.cuda.Event(block=False, disable_timing=True)
    ev.record(stream)
    mine.blocks.append((ev, block))


def upload(host: np.ndarray) -> Any:
    """A new CuPy array holding `host` (through the staging, as to_device)."""
    out = cuda.get_cupy().empty(host.shape, dtype=host.dtype)
    to_device(out, host)
    return out


def to_host(src: Any) -> np.ndarray:
    """`src` read back into a new host array: waits, in a stream synchronize, for
    everything queued before it on the current stream."""
    cp = cuda.get_cupy()
    if os.environ.get(PAGEABLE_ENV):
        return cp.asnumpy(src)
    import cupyx

    src = cp.ascontiguousarray(src)
    block = cupyx.empty_pinned(max(1, src.nbytes), dtype=np.uint8)
    stream = cp.cuda.get_current_stream()
    if src.nbytes:
        src.data.copy_to_host_async(ctypes.c_void_p(block.ctypes.data), src.nbytes, stream)
        stream.synchronize()
    return block[: src.nbytes].view(src.dtype).reshape(src.shape).copy()


def read_int(src: Any) -> int:
    """One device element (a 0-d or 1-element CuPy array) as a Python int."""
    return int(to_host(src).reshape(-1)[0])
