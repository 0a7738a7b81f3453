"""Large shared mappings brought in and let go without stopping the process's other threads.

Like moving a load through a building's one lift in many short trips instead of one long
one: the people waiting for the lift wait a trip, not the whole move.

The kernel guards a process's address space with one lock (Linux's mmap_lock).
Populating a 1 GiB mapping in one call (MAP_POPULATE) holds it for reading all along,
and unmapping it in one call holds it for writing.  A thread that asks for address space
meanwhile (malloc of a large block is an mmap; a growing heap is a brk) waits all that
time, and if it is running Python it waits holding the interpreter lock: every other
Python thread of the driver, the GPU workers' launch loops included, stands still with
it, whichever way the call itself let go of the interpreter lock.  Measured here
(CPython 3.11, 2 cores; `experiments/populate_hold.py --beside-allocations`, medians of
3): with one thread allocating 8 MiB blocks, a spinning Python thread stood still 158 ms
of a 1 GiB populate through libc (179 ms) and 51 ms of its unmap (56 ms); 10 ms of
either the way below.

So a mapping's pages are brought in by touching one byte a page, each page fault holding
the lock only for its own page (or not at all, where the kernel locks per region), and a
mapping is let go `UNMAP_STEP` bytes a call; both loops are compiled and run without the
interpreter lock, so no Python runs between the trips to hold anyone up.

On an H100 (the forty-sixth lease, docs/validation-log.md), paired on one machine, this
took the device's idle per landing result from 8.8-15.9 ms to under 6, and every
configuration of the validation grid ran 5-16% faster.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
import os
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

#: Bytes unmapped a call.  Each call holds the address-space lock for writing about
#: 0.05 ms a MiB (1 GiB took 50-65 ms in one call), so a thread asking for memory waits
#: about a millisecond; smaller steps cost more calls and give back the same time.
#: (munmap fails only for a bad address or range, which these are not by construction;
#: a step that failed would stay mapped, and its share of the result's memory with it.)
UNMAP_STEP = 16 << 20


@intrinsic
def _munmap(typingctx: Any, address: Any, size: Any) -> Any:
    """libc's munmap(address, size) called from compiled code (0 when it succeeded)."""
    sig = types.int32(types.uintp, types.uintp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        byte_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [byte_ptr, ir.IntType(64)])
        fn = builder.module.globals.get("munmap") or ir.Function(builder.module, fnty, "munmap")
        return builder.call(fn, [builder.inttoptr(args[0], byte_ptr), args[1]])

    return sig, codegen


def _jit(fn: Any) -> Any:
    """njit with the interpreter lock released; cached on disk where a cache dir is writable."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # numba found no writable cache location: compile per process
        return numba.njit(nogil=True)(fn)


@_jit
def _touch_pages(view: np.ndarray, page: int) -> int:
    """Read one byte of every page of `view` (their sum, so that the reads stay)."""
    total = 0
    for i in range(0, view.shape[0], page):
        total += view[i]
    return total


@_jit
def _unmap_in_steps(address: int, size: int, step: int) -> int:
    """Unmap [address, address + size) `step` bytes a call; how many calls failed."""
    failed = 0
    done = 0
    while done < size:
        n = min(step, size - done)
        if _munmap(np.uintp(address + done), np.uintp(n)) != 0:
            failed += 1
        done += n
    return failed


class _Mapping:
    """A region mapped through libc, unmapped in steps when the last array viewing it
    goes (the arrays' base keeps this alive)."""

    def __init__(self, address: int, size: int) -> None:
        self.address, self.size = address, size

    def __del__(self) -> None:
        _unmap_in_steps(self.address, self.size, UNMAP_STEP)


@functools.cache
def _libc() -> Any:
    """libc's mmap through ctypes, which lets go of the interpreter lock around the
    call; None where there is no such libc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        return libc
    except (OSError, AttributeError, TypeError):
        return None


def warm() -> None:
    """Compile the loops now (a fraction of a second, once a machine where numba's disk
    cache is writable) rather than in the first result received."""
    _touch_pages(np.zeros(1, np.uint8), mmap.PAGESIZE)
    _unmap_in_steps(0, 0, UNMAP_STEP)


def map_populated(fd: int, size: int) -> np.ndarray:
    """The `size` bytes of file `fd`, mapped shared and writable, every page in memory
    now, as uint8.

    Populated now, on the caller's thread: mapped lazily, the first touch would fall in
    prestage's upload, under the GPU lock (the H200 lease saw prestage at 2^22 take
    140 ms against 64 ms from private memory, the mapping's page faults in it).
    Mapped through libc rather than the mmap module because CPython's mmap.mmap kept
    the interpreter lock through the call up to 3.11 (3.12 lets go: CPython gh-44098).
    Falls back to the mmap module, populated in one call, where libc cannot be reached.
    """
    if size <= 0:
        return np.zeros(0, np.uint8)
    libc = _libc()
    prot = mmap.PROT_READ | mmap.PROT_WRITE
    if libc is None:
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return np.frombuffer(mmap.mmap(fd, size, flags=flags, prot=prot), dtype=np.uint8)
    address = libc.mmap(None, size, prot, mmap.MAP_SHARED, fd, 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        err = ctypes.get_errno()
        raise OSError(err, f"mapping {size} bytes of shared memory: {os.strerror(err)}")
    raw = (ctypes.c_uint8 * size).from_address(address)
    raw.mapping = _Mapping(address, size)  # unmapped with the last view of `raw`
    view = np.frombuffer(raw, dtype=np.uint8)
    _touch_pages(view, mmap.PAGESIZE)
    return view
