"""How fast a sweep runs: a 200-point grid of the seed profile at --runs 5 on a LocalCluster.

Target (issue 16): under 2 minutes on a 2-core LocalCluster, start to finish (the
cluster's start and stop included).  With --serial it also runs the same points one by
one in this process, says how much faster the cluster was, and checks that every point's
numbers are the same.

    python benchmarks/bench_sweep.py [--workers 2] [--runs 5] [--serial] [--out table.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from simgpu.config import PipelineConfig
from simgpu.errors import UserError
from simgpu.model.montecarlo import predict
from simgpu.profile import find_profile
from simgpu.sched.registry import resolve_design
from simgpu.sweep.cluster import PointRunner, dask_client
from simgpu.sweep.grid import build_grid
from simgpu.sweep.point import ProfileSpec, run_rows

#: 2 designs x 5 GPU-worker counts x 5 VRAM sizes x 2 host RAM sizes x 2 concurrencies.
GRID = {
    "design": "single-lock,two-lock",
    "gpu_workers": "1..5",
    "vram": "16G..48G:8G",
    "host_ram": "384G,755G",
    "concurrency": "1,3",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--serial", action="store_true", help="also run the points one by one and compare")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    t0 = time.perf_counter()
    spec = ProfileSpec.read(find_profile("seed-rtx5070ti"))
    prof = spec.load()
    base = PipelineConfig()
    wl = prof.workload()
    grid = build_grid(GRID, base, prof.hardware.vram, prof.hardware.host_ram, "single-lock")
    points = list(grid.points())
    load_before = os.getloadavg()[0]
    with dask_client(None, args.workers) as client:
        t_up = time.perf_counter()
        # CPU seconds of the worker processes: on a shared machine the wall time says how
        # busy the others were too, the CPU time what the points cost.
        cpu0 = sum(client.run(time.process_time).values())
        results = PointRunner(client, spec, base, wl, args.runs).run(points)
        t_done = time.perf_counter()
        worker_cpu = sum(client.run(time.process_time).values()) - cpu0
    t_end = time.perf_counter()
    load_after = os.getloadavg()[0]
    total = t_end - t0
    sims = len(points) * args.runs
    invalid = sum(1 for r in results if not r.ok)
    oom = sum(1 for r in results if r.ok and r.oom_risk > 0)

    rows = [
        ("points x runs", f"{len(points)} x {args.runs} = {sims} simulations"),
        ("cluster start", f"{t_up - t0:.1f} s ({args.workers} worker processes, 1 thread each)"),
        ("points on the cluster", f"{t_done - t_up:.1f} s"),
        ("CPU time of the workers", f"{worker_cpu:.1f} s ({1000 * worker_cpu / sims:.1f} ms per simulation)"),
        ("cluster stop", f"{t_end - t_done:.1f} s"),
        ("**total**", f"**{total:.1f} s** (target < 120 s: {'met' if total < 120 else 'MISSED'})"),
        ("points that cannot be built / with an OOM", f"{invalid} / {oom}"),
    ]
    if args.serial:
        s0, c0 = time.perf_counter(), time.process_time()
        same = 0
        for p, r in zip(points, results, strict=True):
            try:
                pred = predict(prof, p.config(base), wl, resolve_design(p.design), runs=args.runs)
            except UserError as e:
                same += r.error == str(e)
                continue
            same += r.aggregate == pred.aggregate() and r.runs == run_rows(pred.summaries)
        serial, serial_cpu = time.perf_counter() - s0, time.process_time() - c0
        rows.append(
            (
                "the same points one by one, here",
                f"{serial:.1f} s wall, {serial_cpu:.1f} s CPU "
                f"({1000 * serial_cpu / sims:.1f} ms per simulation)",
            )
        )
        rows.append(("points identical to the serial run", f"{same} of {len(points)}"))
    lines = [
        f"Sweep speed on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}: "
        f"seed-rtx5070ti, {wl.name}, {base.proofs} proofs per run; load average {load_before:.1f} before, "
        f"{load_after:.1f} after",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":  # the cluster's worker processes re-import this file: no work at import
    main()
