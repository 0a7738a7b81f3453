"""The prestage's upload of a, b and c two ways, on the device: packed through the
page-locked staging (as before), and queued from where they lie once page-locked there
(simgpu.gpu.transfer.pin_pages, what a pipeline now does as a result comes back).

For each size, `--repeats` times, on fresh random a, b, c in a page-aligned mapping (as
a received result's): the time to page-lock them, the prestage's host time each way (the
time its thread spends before it can hand the lock on), the time until the copies have
landed, the time to unlock; and every copy checked against the host.  The GPU is idle:
this is the stage alone, not under load.

    python experiments/pinned_abc.py 2^20 2^22 --repeats 5 --out out/pinned-abc.json
"""

from __future__ import annotations

import argparse
import json
import mmap
import statistics
import time

import numpy as np

from simgpu.gpu import transfer
from simgpu.gpu.cuda import get_cupy
from simgpu.units import parse_count


def _abc(n: int, rng: np.random.Generator) -> tuple[mmap.mmap, np.ndarray]:
    raw = mmap.mmap(-1, 3 * n * 32)
    region = np.frombuffer(raw, dtype=np.uint32).reshape(3, n, 8)
    region[...] = rng.integers(0, 2**32, region.shape, dtype=np.uint32)
    return raw, region


def _prestage(cp: object, region: np.ndarray) -> tuple[object, object]:
    d_a = cp.empty(region.shape[1:], dtype=cp.uint32)
    d_bc = cp.empty((2, *region.shape[1:]), dtype=cp.uint32)
    transfer.to_device(d_a, region[0])
    transfer.to_device(d_bc[0], region[1])
    transfer.to_device(d_bc[1], region[2])
    return d_a, d_bc


def one(n: int, pinned: bool, rng: np.random.Generator) -> dict[str, float]:
    cp = get_cupy()
    raw, region = _abc(n, rng)
    want = region.copy()
    t0 = time.perf_counter()
    pin = transfer.pin_pages(region) if pinned else None
    t1 = time.perf_counter()
    if pinned and pin is None:
        raise SystemExit("CUDA refused to page-lock the mapping")
    d_a, d_bc = _prestage(cp, region)
    t2 = time.perf_counter()
    cp.cuda.get_current_stream().synchronize()
    t3 = time.perf_counter()
    if pin is not None:
        pin.close()
    t4 = time.perf_counter()
    ok = np.array_equal(cp.asnumpy(d_a), want[0]) and np.array_equal(cp.asnumpy(d_bc), want[1:])
    if not ok:
        raise SystemExit(f"n={n} pinned={pinned}: the device's a, b, c differ from the host's")
    del d_a, d_bc, region
    raw.close()
    return {"lock_ms": (t1 - t0) * 1e3, "prestage_ms": (t2 - t1) * 1e3, "landed_ms": (t3 - t1) * 1e3,
            "unlock_ms": (t4 - t3) * 1e3}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="domain sizes, e.g. 2^20 2^22")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write every repeat's times here (JSON)")
    args = ap.parse_args()
    rng = np.random.default_rng()
    rows, table = {}, []
    for size in args.sizes:
        n = parse_count(size, "size", 1)
        for pinned in (False, True):
            one(n, pinned, rng)  # warm: the staging's pool, the crew, the first lock
            runs = [one(n, pinned, rng) for _ in range(args.repeats)]
            way = "pinned where it lies" if pinned else "staged"
            rows[f"{size} {way}"] = runs
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            table.append(f"| {size} | {way} | {med['lock_ms']:.1f} | {med['prestage_ms']:.1f} | "
                         f"{med['landed_ms']:.1f} | {med['unlock_ms']:.1f} |")  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"medians of {args.repeats}, ms; every copy checked against the host")
    print("| n | a, b, c | lock | prestage (host) | landed | unlock |\n|---|---|---:|---:|---:|---:|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
