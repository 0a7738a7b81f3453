"""RealRuntime's own cost per partition: locks, queues, thread hand-offs, event records.

Runs the daemon with every shipped design on an executor whose stages do nothing, so
the wall time is the runtime's alone; divides by the partitions.  Target (issue: run):
under 2% of a 2^20 partition's GPU time (prestage + kernels; --gpu-ms, default the
0.3 s target of the prover issue, or pass the measured figure from docs/benchmarks.md).

    python benchmarks/bench_runtime.py [--proofs 50] [--gpu-ms 300]
"""

from __future__ import annotations

import argparse
import os
import platform

from simgpu.config import PipelineConfig, Workload
from simgpu.real.null_executor import NullExecutor
from simgpu.real.runtime import RealRuntime
from simgpu.sched.registry import builtin_designs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--proofs", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--gpu-ms", type=float, default=300.0, help="GPU time of one 2^20 partition")
    args = ap.parse_args()
    lines = [
        f"RealRuntime cost per partition ({platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}): {args.proofs} proofs x {args.partitions} partitions, 3 clients, "
        f"2 GPU workers, stages that do nothing; share of a {args.gpu_ms:.0f} ms GPU partition",
        "",
        "| design | partitions | wall (s) | per partition (ms) | records per partition | share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for d in builtin_designs():
        cfg = PipelineConfig(proofs=args.proofs, concurrency=3, gpu_workers_per_device=2, partition_workers=8)
        rt = RealRuntime(NullExecutor(), cfg, Workload("null", args.partitions, 1 << 20))
        result = rt.run(d.fn)
        parts = args.proofs * args.partitions
        per = result.wall_seconds / parts * 1e3
        lines.append(
            f"| {d.name} | {parts} | {result.wall_seconds:.2f} | {per:.3f} | "
            f"{len(result.records) / parts:.1f} | {100 * per / args.gpu_ms:.2f}% |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
