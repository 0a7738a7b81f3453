"""What a new crew of staging copiers costs a new thread (simgpu.gpu.transfer).

A finalizer is a new thread every partition.  Before crews were handed on, its first
large upload started four copier threads, and each had to win the interpreter lock before
it copied a byte.  This times one pack of `--mib` MiB into a host block, from a new
thread, with a crew that has packed before and with a new one, beside `--busy` threads
that run Python (the other driver threads' launch loops), and prints a table:

    python experiments/crew_start.py --busy 0 2 4 --repeats 15

No GPU: the pack is the host memcpy simgpu.gpu.transfer._pack does, with the same
number of copiers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from simgpu.gpu.transfer import COPIERS


def pack(crew: ThreadPoolExecutor, block: np.ndarray, src: np.ndarray) -> None:
    step = -(-src.nbytes // COPIERS)
    parts = range(0, src.nbytes, step)
    futures = [crew.submit(np.copyto, block[i : i + step], src[i : i + step]) for i in parts]
    for f in futures:
        f.result()


def one_pack_ms(fresh: bool, warm: ThreadPoolExecutor, block: np.ndarray, src: np.ndarray) -> float:
    """One pack from a new thread, timed from the thread's start of work to its end."""
    out: list[float] = []

    def run() -> None:
        t0 = time.perf_counter()
        crew = ThreadPoolExecutor(COPIERS) if fresh else warm
        pack(crew, block, src)
        out.append(1e3 * (time.perf_counter() - t0))
        if fresh:
            crew.shutdown(wait=False)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def busy_loop(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):  # pure Python: holds the interpreter lock between switches
            x += i


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="Python threads running beside")
    ap.add_argument("--mib", type=int, default=192, help="the pack's size (b_g2_msm's bases at 2^22: 192)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    src = np.random.default_rng(1).integers(0, 256, args.mib << 20, dtype=np.uint8)
    block = np.empty_like(src)
    print(f"switch interval {sys.getswitchinterval() * 1e3:g} ms, {COPIERS} copiers, {args.mib} MiB a pack\n")
    print("| busy Python threads | warm crew, ms (median) | new crew, ms (median) | new - warm |")
    print("|---:|---:|---:|---:|")
    for n in args.busy:
        stop = threading.Event()
        loops = [threading.Thread(target=busy_loop, args=(stop,), daemon=True) for _ in range(n)]
        for t in loops:
            t.start()
        warm = ThreadPoolExecutor(COPIERS)
        pack(warm, block, src)
        times = {fresh: [] for fresh in (False, True)}
        for _ in range(args.repeats):  # interleaved, so a drift of the host hits both
            for fresh in (False, True):
                times[fresh].append(one_pack_ms(fresh, warm, block, src))
        stop.set()
        for t in loops:
            t.join()
        warm.shutdown()
        assert np.array_equal(block, src)
        w, f = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {n} | {w:.1f} | {f:.1f} | {f - w:+.1f} |")


if __name__ == "__main__":
    main()
