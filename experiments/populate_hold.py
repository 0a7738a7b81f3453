"""Does mapping a received result hold up the driver's other threads?  (issue #19, item 4)

On the forty-fourth lease's H100 the driver's Python stood still for more than 10 ms
9-16 times a run, most often across a result's `mmap(..., MAP_POPULATE)` in
simgpu.prover.handoff.receive, while the device ran dry (experiments/landing_calls.py).
This times, on this machine's CPython and no GPU, the longest stretch a spinning Python
thread goes without running while another thread maps (and populates) a file of shared
memory the size of a result, and then drops the mapping, three ways:

- the mmap module, populated in one call (CPython up to 3.11 keeps the interpreter lock
  through it; 3.12 lets go: gh-44098);
- libc in one call (MAP_POPULATE, then one munmap), the interpreter lock let go;
- simgpu.prover.address_space: pages touched one by one, unmapped 16 MiB a call.

`--beside-allocations` adds a thread that allocates 8 MiB blocks in a loop, each an mmap
of its own, holding the interpreter lock between calls, as the driver's threads do.  A
one-call populate or unmap holds the kernel's address-space lock all along, so that
thread waits in the kernel with the interpreter lock in hand, and the spinning thread
stands still with it, whichever way the interpreter lock was let go:

    python experiments/populate_hold.py --size 1GiB --repeats 3 --beside-allocations
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from simgpu.prover import address_space, handoff
from simgpu.units import parse_size

WAYS = ("mmap module", "libc, one call", "address_space")


def longest_gap_beside(call: Callable[[], Any]) -> tuple[float, float]:
    """(the longest stretch this thread's Python went without running while `call` ran
    on another thread, the call's seconds)."""
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        t = time.perf_counter()
        call()
        took.append(time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=run)
    last = time.perf_counter()
    gap = 0.0
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    th.join()
    return gap, took[0]


@contextmanager
def allocating_beside(on: bool) -> Iterator[None]:
    """A thread allocating 8 MiB blocks (glibc maps each with its own mmap) while the
    body runs, when `on`."""
    if not on:
        yield
        return
    stop = threading.Event()

    def allocate() -> None:
        while not stop.is_set():
            block = np.empty(8 << 20, np.uint8)
            block[0] = 1  # one page touched: the block is real
            del block

    th = threading.Thread(target=allocate)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


def _map_one_call(fd: int, size: int) -> np.ndarray:
    """The way before address_space: libc's mmap with MAP_POPULATE, one munmap."""
    libc = address_space._libc()
    prot = mmap.PROT_READ | mmap.PROT_WRITE
    address = libc.mmap(None, size, prot, mmap.MAP_SHARED | mmap.MAP_POPULATE, fd, 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    raw = (ctypes.c_uint8 * size).from_address(address)
    raw.mapping = _WholeUnmap(address, size)
    return np.frombuffer(raw, dtype=np.uint8)


class _WholeUnmap:
    def __init__(self, address: int, size: int) -> None:
        self.address, self.size = address, size

    def __del__(self) -> None:
        address_space._libc().munmap(ctypes.c_void_p(self.address), ctypes.c_size_t(self.size))


def _mapper(way: str) -> Callable[[int, int], np.ndarray]:
    if way == "mmap module":
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return lambda fd, size: np.frombuffer(mmap.mmap(fd, size, flags=flags), dtype=np.uint8)
    if way == "libc, one call":
        return _map_one_call
    return address_space.map_populated


def one(size: int, way: str = "address_space", allocating: bool = False) -> tuple[float, float, float, float]:
    """(map: the gap, its seconds; drop: the gap, its seconds) for one fresh file."""
    path = handoff.SHM_DIR / f"populate-hold-{os.getpid()}-{time.monotonic_ns()}"
    mapper = _mapper(way)
    try:
        with open(path, "wb") as f:
            f.truncate(size)
        with open(path, "r+b") as f:
            first = address_space.map_populated(f.fileno(), size)
            first[:: mmap.PAGESIZE] = 1  # every page in memory, as a worker's write leaves them
            del first
            held: list[Any] = []
            with allocating_beside(allocating):
                gap_map, t_map = longest_gap_beside(lambda: held.append(mapper(f.fileno(), size)))
                if held[0].nbytes != size or int(held[0][mmap.PAGESIZE * 3]) != 1:
                    raise RuntimeError("the mapping does not hold the file's bytes")
                gap_drop, t_drop = longest_gap_beside(held.clear)  # the last view goes: unmapped
    finally:
        path.unlink(missing_ok=True)
    return gap_map, t_map, gap_drop, t_drop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB", help="bytes of a result (1.1 GiB at 2^22)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--beside-allocations", action="store_true", help="8 MiB blocks allocated beside")
    args = ap.parse_args()
    if not handoff.SHM_DIR.is_dir():
        raise SystemExit(f"no shared-memory file system at {handoff.SHM_DIR}")
    size = parse_size(args.size, "--size")
    beside = "an allocating thread beside" if args.beside_allocations else "nothing beside"
    head = f"way ({args.size}, {beside}, median of {args.repeats})"
    print(f"| {head} | map: ms | others held up: ms | drop: ms | held up: ms |")
    print("|---|---:|---:|---:|---:|")
    one(1 << 20)  # address_space's loops compiled before timing
    for way in WAYS:
        rows = [one(size, way, args.beside_allocations) for _ in range(args.repeats)]
        gm, tm, gd, td = (statistics.median(r[i] for r in rows) * 1e3 for i in range(4))
        print(f"| {way} | {tm:.0f} | {gm:.0f} | {td:.0f} | {gd:.0f} |")


if __name__ == "__main__":
    main()
