"""How fast the model simulates: partitions per wall-second for big single-lock runs.

Target (issue: predict): a 200-proof single-lock run on the shipped profile, 2,000
partitions, in under 2 s on one core of a CI-like machine.

    python benchmarks/bench_model.py [--repeats 3] [--out table.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from simgpu.config import PipelineConfig
from simgpu.model.sim import SimRuntime
from simgpu.profile import load_profile
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("single-lock", 200, 3),
    ("single-lock", 200, 10),
    ("two-lock-reserve", 200, 3),
    ("split-finalizer", 200, 3),
]


def bench(design: str, proofs: int, concurrency: int, repeats: int) -> dict:
    prof = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "seed-rtx5070ti.toml")
    cfg = PipelineConfig(proofs=proofs, concurrency=concurrency)
    walls = []
    for seed in range(repeats):
        t0 = time.perf_counter()
        rt = SimRuntime(prof, cfg, prof.workload(), seed=seed, record_phases=False)
        result = rt.run(resolve_design(design).fn)
        s = summarize(result)
        walls.append(time.perf_counter() - t0)
        assert s.completed + s.failed == proofs
    parts = proofs * prof.workload().partitions
    wall = statistics.median(walls)
    return {
        "design": design,
        "proofs": proofs,
        "j": concurrency,
        "partitions": parts,
        "wall_s": wall,
        "parts_per_s": parts / wall,
        "events": len(result.records),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = [bench(*case, args.repeats) for case in CASES]
    lines = [
        f"Model speed on {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"one core, median of {args.repeats} (target: 2,000 single-lock partitions < 2 s)",
        "",
        "| design | proofs | j | partitions | wall (s) | partitions / s | event records |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['design']} | {r['proofs']} | {r['j']} | {r['partitions']} | {r['wall_s']:.3f} | "
            f"{r['parts_per_s']:.0f} | {r['events']} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
