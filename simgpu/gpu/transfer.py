"""Host <-> device copies through page-locked staging: copies that do not hold the driver.

A copy from or to pageable memory is the driver's own errand: it moves the bytes through
a bounce buffer of its own, on the calling thread, and it returns only when they are
across (for a read-back, when every kernel queued before it has run).  While it runs the
driver lets no other thread of the process launch.  On the H200 a GPU worker's kernel
launch waited 10 ms on average behind the other worker's pageable copy, 1.27 s in a 15 s
run, and none with one worker (docs/data/h200-2026-12-02a).  A copy from page-locked
memory is a DMA the driver only queues; the wait for it is a stream synchronize or an
event, which holds nobody else up.

So every copy here goes through this thread's staging, like a loading dock: an upload
is packed onto the dock (a host memcpy, which releases the interpreter lock) and the
truck leaves at once; the dock has two bays, and a bay is packed again only when its
last truck has left (its event).  A read-back lands in the dock and is copied out.
Staging is per thread because GPU workers run on their own threads, and bounded: an
upload larger than a bay goes in bay-sized pieces, the next packed while the last moves.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from simgpu.gpu import cuda

#: Set (to anything) to copy as CuPy does, from and to pageable memory: the A/B of
#: lease scripts (experiments/device_lease16.sh), not a setting for a prover.
PAGEABLE_ENV = "SIMGPU_PAGEABLE_COPIES"

#: Bytes of one bay: large enough that a piece moves at the link's full speed, small
#: enough that two bays per GPU worker are a rounding error of host memory.
BAY_BYTES = 16 << 20


class _Dock:
    """One thread's two bays of page-locked memory and the event of each bay's last copy."""

    def __init__(self) -> None:
        import cupyx

        cp = cuda.get_cupy()
        self.bays = [cupyx.empty_pinned(BAY_BYTES, dtype=np.uint8) for _ in range(2)]
        self.left: list[Any] = [None, None]
        self.next = 0
        self.cp = cp

    def __del__(self) -> None:
        # a thread that ends with a copy still queued must not hand its bays back to
        # CuPy's pinned pool (and so to another thread) before the copy has left
        for ev in self.left:
            if ev is not None:
                ev.synchronize()

    def bay(self) -> tuple[int, np.ndarray]:
        """The next bay, once its last copy has left it."""
        k = self.next
        self.next ^= 1
        if self.left[k] is not None:
            self.left[k].synchronize()
            self.left[k] = None
        return k, self.bays[k]


_local = threading.local()


def _dock() -> _Dock:
    dock = getattr(_local, "dock", None)
    if dock is None:
        dock = _local.dock = _Dock()
    return dock


def page_locked(host: np.ndarray) -> bool:
    """Whether `host`'s memory is page-locked already (the key's cached bases are)."""
    cp = cuda.get_cupy()
    attrs = cp.cuda.runtime.pointerGetAttributes(host.ctypes.data)
    return int(attrs.type) == int(cp.cuda.runtime.memoryTypeHost)


def to_device(dst: Any, host: np.ndarray) -> None:
    """Copy `host` into the CuPy array `dst` (same bytes, C-contiguous) on the current
    stream; `host` may be reused as soon as this returns.  Pageable memory goes through
    the staging; page-locked memory straight across (CuPy's own copy, no staging)."""
    host = np.ascontiguousarray(host)
    if host.nbytes != dst.nbytes:
        raise ValueError(f"copy of {host.nbytes} bytes into an array of {dst.nbytes}")
    if not dst.flags.c_contiguous:
        raise ValueError("to_device: the destination must be C-contiguous")
    if host.nbytes == 0:
        return
    if os.environ.get(PAGEABLE_ENV) or page_locked(host):
        dst.set(host)
        return
    dock = _dock()
    stream = dock.cp.cuda.get_current_stream()
    src = host.reshape(-1).view(np.uint8)
    for start in range(0, src.nbytes, BAY_BYTES):
        piece = src[start : start + BAY_BYTES]
        k, bay = dock.bay()
        np.copyto(bay[: piece.nbytes], piece)
        (dst.data + start).copy_from_host_async(ctypes.c_void_p(bay.ctypes.data), piece.nbytes, stream)
        ev = dock.cp.cuda.Event(block=False, disable_timing=True)
        ev.record(stream)
        dock.left[k] = ev


def upload(host: np.ndarray) -> Any:
    """A new CuPy array holding `host` (through the staging, as to_device)."""
    cp = cuda.get_cupy()
    host = np.ascontiguousarray(host)
    out = cp.empty(host.shape, dtype=host.dtype)
    to_device(out, host)
    return out


def to_host(src: Any) -> np.ndarray:
    """`src` read back into a new host array: waits, in a stream synchronize, for
    everything queued before it on the current stream."""
    cp = cuda.get_cupy()
    if os.environ.get(PAGEABLE_ENV):
        return cp.asnumpy(src)
    src = cp.ascontiguousarray(src)
    out = np.empty(src.shape, dtype=src.dtype)
    flat = out.reshape(-1).view(np.uint8)
    dock = _dock()
    stream = cp.cuda.get_current_stream()
    for start in range(0, flat.nbytes, BAY_BYTES):
        n = min(BAY_BYTES, flat.nbytes - start)
        _, bay = dock.bay()
        (src.data + start).copy_to_host_async(ctypes.c_void_p(bay.ctypes.data), n, stream)
        stream.synchronize()
        flat[start : start + n] = bay[:n]
    return out


def read_int(src: Any) -> int:
    """One device element (a 0-d or 1-element CuPy array) as a Python int."""
    return int(to_host(src).reshape(-1)[0])
