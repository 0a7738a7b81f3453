"""Which of CuPy's driver calls let another Python thread run meanwhile (issue #19).

The kernel traces found that while one driver thread is inside a copy to or from
pageable memory, the other nearly stops.  Either the copy keeps the interpreter lock
(CuPy not releasing it around that call), or something else does.  This asks the
interpreter directly: a counter thread spins a pure-Python loop and stamps its progress;
the main thread runs one call at a time, and the counter's pace inside each call,
against its pace with the main thread asleep, says whether that call held the lock.

    calls:  H2D and D2H copies of 256 MiB, from pageable and from pinned host memory;
            a 4-byte read-back queued behind ~50 ms of kernels (waiting inside the copy);
            a stream synchronize behind the same kernels; 2000 kernel launches.

    python experiments/gil_copy_probe.py [--json out/gil-copy-probe.json]

A pace near 1.0 means the call released the lock for its whole time; near 0 means it
kept it.  Each call is checked: the copies round-trip random data.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np


class Counter:
    """A thread spinning Python and stamping (perf_counter, iterations) every 256 steps."""

    def __init__(self) -> None:
        self.stamps: list[tuple[float, int]] = []
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n, clock, stamps = 0, time.perf_counter, self.stamps
        while not self._stop:
            for _ in range(256):
                n += 1
            stamps.append((clock(), n))

    def __enter__(self) -> Counter:
        self._t.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop = True
        self._t.join()

    def rate(self, t0: float, t1: float) -> float:
        """Iterations a second between t0 and t1 (nearest stamps)."""
        inside = [(t, n) for t, n in self.stamps if t0 <= t <= t1]
        if len(inside) < 2:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / max(1e-9, t1 - t0)


def probe() -> list[dict[str, Any]]:
    import cupy as cp
    import cupyx

    rng = np.random.default_rng()
    n = 64 << 20  # 256 MiB of uint32
    host = rng.integers(0, 2**32, n, dtype=np.uint32)
    pinned = cupyx.empty_pinned(n, dtype=np.uint32)
    pinned[...] = host
    dev = cp.empty(n, dtype=cp.uint32)
    back = np.empty(n, dtype=np.uint32)
    back_pinned = cupyx.empty_pinned(n, dtype=np.uint32)
    small = cp.zeros(1, dtype=cp.uint32)
    work = cp.asarray(rng.random(16 << 20, dtype=np.float32))
    stream = cp.cuda.get_current_stream()

    def queue_kernels() -> None:
        # about 50 ms of elementwise kernels on the stream, so the next call waits
        for _ in range(60):
            cp.sin(work, out=work)

    def kernels_ms() -> float:
        stream.synchronize()
        t = time.perf_counter()
        queue_kernels()
        stream.synchronize()
        return (time.perf_counter() - t) * 1e3

    def h2d_pageable() -> None:
        dev.set(host)

    def h2d_pinned() -> None:
        dev.set(pinned)

    def d2h_pageable() -> None:
        dev.get(out=back)

    def d2h_pinned() -> None:
        dev.get(out=back_pinned)

    def wait_in_copy() -> None:
        small.get()

    def wait_in_sync() -> None:
        stream.synchronize()

    def launches() -> None:
        for _ in range(2000):
            cp.add(small, 1, out=small)

    calls: list[tuple[str, Callable[[], None], bool]] = [
        ("h2d pageable 256 MiB", h2d_pageable, False),
        ("h2d pinned 256 MiB", h2d_pinned, False),
        ("d2h pageable 256 MiB", d2h_pageable, False),
        ("d2h pinned 256 MiB", d2h_pinned, False),
        ("4 B read-back behind kernels", wait_in_copy, True),
        ("stream sync behind kernels", wait_in_sync, True),
        ("2000 kernel launches", launches, False),
    ]
    print(f"kernels queued by queue_kernels: {kernels_ms():.1f} ms on the device")
    rows = []
    with Counter() as counter:
        for name, fn, behind in calls * 3:
            stream.synchronize()
            t0 = time.perf_counter()
            time.sleep(0.02)  # the counter's own pace, the main thread asleep
            t1 = time.perf_counter()
            if behind:
                queue_kernels()
            t2 = time.perf_counter()
            fn()
            t3 = time.perf_counter()
            stream.synchronize()
            rows.append(
                {
                    "call": name,
                    "ms": (t3 - t2) * 1e3,
                    "pace": counter.rate(t2, t3) / max(1.0, counter.rate(t0, t1)),
                }
            )
    # the data went and came back whole
    dev.set(host)
    dev.get(out=back)
    assert np.array_equal(back, host), "pageable round trip"
    dev.set(pinned)
    dev.get(out=back_pinned)
    assert np.array_equal(back_pinned, host), "pinned round trip"
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = probe()
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["call"], []).append(r)
    print(f"{'call':32s} {'ms':>14s} {'other thread pace':>20s}")
    for name, rs in by.items():
        ms = " ".join(f"{r['ms']:.1f}" for r in rs)
        pace = " ".join(f"{r['pace']:.2f}" for r in rs)
        print(f"{name:32s} {ms:>14s} {pace:>20s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
