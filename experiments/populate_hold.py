"""Does mapping a received result hold up the driver's other threads?  (issue #19, item 4)

On the forty-fourth lease's H100 the driver's Python stood still for more than 10 ms
9-16 times a run, most often across a result's `mmap(..., MAP_POPULATE)` in
simgpu.prover.handoff.receive, while the device ran dry (experiments/landing_calls.py).
CPython's mmap module keeps the interpreter lock through that call up to 3.11 (3.12,
the card's, releases it: gh-44098), so there the gaps have another cause.  This times,
on this machine's CPython and no GPU, the longest stretch a spinning Python thread goes
without running while another thread maps (and populates) a file of shared memory the
size of a result, and then drops the mapping, both through the mmap module and through
libc (simgpu.prover.handoff.map_populated):

    python experiments/populate_hold.py --size 1GiB --repeats 3
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from simgpu.prover import handoff
from simgpu.units import parse_size


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


def one(size: int, through_libc: bool) -> tuple[float, float, float, float]:
    """(map: the gap, its seconds; drop: the gap, its seconds) for one fresh file."""
    path = handoff.SHM_DIR / f"populate-hold-{os.getpid()}-{time.monotonic_ns()}"
    real = handoff._libc
    if not through_libc:
        handoff._libc = lambda: None  # map_populated's fallback: the mmap module
    try:
        with open(path, "wb") as f:
            f.truncate(size)
        with open(path, "r+b") as f:
            first = handoff.map_populated(f.fileno(), size)
            first[:: mmap.PAGESIZE] = 1  # every page in memory, as a worker's write leaves them
            del first
            held: list[Any] = []
            gap_map, t_map = longest_gap_beside(lambda: held.append(handoff.map_populated(f.fileno(), size)))
        if held[0].nbytes != size or int(held[0][mmap.PAGESIZE * 3]) != 1:
            raise RuntimeError("the mapping does not hold the file's bytes")
        gap_drop, t_drop = longest_gap_beside(held.clear)  # the last view goes: unmapped
    finally:
        handoff._libc = real
        path.unlink(missing_ok=True)
    return gap_map, t_map, gap_drop, t_drop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB", help="bytes of a result (1.1 GiB at 2^22)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not handoff.SHM_DIR.is_dir():
        raise SystemExit(f"no shared-memory file system at {handoff.SHM_DIR}")
    size = parse_size(args.size, "--size")
    head = f"way ({args.size}, median of {args.repeats})"
    print(f"| {head} | map: ms | others held up: ms | drop: ms | held up: ms |")
    print("|---|---:|---:|---:|---:|")
    for label, through_libc in (("mmap module", False), ("libc (map_populated)", True)):
        rows = [one(size, through_libc) for _ in range(args.repeats)]
        gm, tm, gd, td = (statistics.median(r[i] for r in rows) * 1e3 for i in range(4))
        print(f"| {label} | {tm:.0f} | {gm:.0f} | {td:.0f} | {gd:.0f} |")


if __name__ == "__main__":
    main()
