"""b_g2_msm on the GPU beside the other workers' device work: the card against the model.

Each b_g2_msm of a validation run is classed by what the other partitions' stages were
doing while it ran: nothing, a prestage, another worker's kernels, or both.
Runs measured since this script keep every stage's span (``stage_spans``) and are
classed from those, as the model's stages are.  Older runs traced with
``--alloc-trace`` are classed from the pool's trace (simgpu.prover.device.AllocTrace):
each b_g2_msm is an episode of its thread's rows, and what the other threads allocated
meanwhile says what ran beside it (a prestage allocates only its few arrays, so one is
seen only where one of its rows falls inside; a copy begun before the episode is
missed).  From a trace also: the longest gap in an episode's rows (its thread waiting on
the device), and how long its staging upload took (the rows before its fourth array, the
first of its MSM's temporaries).

The same configuration is predicted (``--runs`` seeds) and the model's b_g2_msm stages
are classed the same way, by the other partitions' prestage and kernels stages that
overlap them.  The table sets the two side by side:

    python experiments/stream_share.py docs/data/h200-2026-12-01h/reserve-2650.json.gz
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.model.sim import SimRuntime
from simgpu.profile import find_profile, load_profile
from simgpu.report.trace import stage_rows
from simgpu.sched.registry import resolve_design

CLASSES = ("alone", "beside a prestage", "beside kernels", "beside kernels and a prestage")
STAGING_ARRAYS = 3  # b_g2_msm's bases batch, tail bases and scalars come before its MSM's


@dataclass
class Episode:
    seconds: float
    kind: str
    staging: float | None = None  # seconds until its MSM's first temporary
    longest_wait: float | None = None


def kind_of(beside: set[str]) -> str:
    """The class of an episode from the other workers' stages seen during it."""
    return CLASSES[("prestage" in beside) + 2 * ("kernels" in beside)]


def real_episodes(rows: list[list[Any]]) -> list[Episode]:
    """b_g2_msm episodes of a trace: a thread's unbroken run of b_g2_msm rows."""
    runs: list[list[list[Any]]] = []
    open_run: dict[str, list[list[Any]]] = {}
    for row in rows:
        thread, stage = row[1], row[2]
        if stage == "b_g2_msm":
            if thread not in open_run:
                open_run[thread] = []
                runs.append(open_run[thread])
            open_run[thread].append(row)
        else:
            open_run.pop(thread, None)
    out = []
    for run in runs:
        t0, t1, thread = run[0][0], run[-1][0], run[0][1]
        beside = {r[2].split(".")[0] for r in rows if t0 <= r[0] <= t1 and r[1] != thread}
        mallocs = [r[0] for r in run if r[3] == "malloc"]
        staging = mallocs[STAGING_ARRAYS] - t0 if len(mallocs) > STAGING_ARRAYS else None
        wait = max((b[0] - a[0] for a, b in zip(run, run[1:], strict=False)), default=None)
        out.append(Episode(t1 - t0, kind_of(beside), staging, wait))
    return out


def span_episodes(spans: list[list[Any]]) -> list[Episode]:
    """b_g2_msm stages of a run, from its stage spans ([proof, partition, stage, worker,
    start, end]), classed by the other partitions' prestage and kernels overlapping them."""
    device = [sp for sp in spans if sp[2] in ("prestage", "kernels")]
    out = []
    for proof, part, stage, _, t0, t1 in spans:
        if stage != "b_g2_msm":
            continue
        beside = {s for p2, q2, s, _, a, b in device if (p2, q2) != (proof, part) and a < t1 and b > t0}
        out.append(Episode(t1 - t0, kind_of(beside)))
    return out


def predicted(run: dict[str, Any], profile: str, runs: int, partitions: int, workers: int) -> list[Episode]:
    prof = load_profile(find_profile(profile))
    cfg = PipelineConfig(
        gpu_workers_per_device=run["gpu_workers"],
        partition_workers=workers,
        proofs=run["measured"]["proofs"]["submitted"],
        concurrency=run["concurrency"],
        vram=run["vram_cap"],
    )
    wl = Workload("traced", partitions, run["constraints"])
    design = resolve_design(run["design"])
    out: list[Episode] = []
    for seed in range(runs):
        result = SimRuntime(prof, cfg, wl, seed=seed).run(design.fn)
        out += span_episodes(stage_rows(result.records))
    return out


def stats(eps: list[Episode]) -> str:
    if not eps:
        return "0 | | |"
    ms = sorted(1e3 * e.seconds for e in eps)
    return f"{len(ms)} | {statistics.mean(ms):.0f} | {ms[int(0.9 * (len(ms) - 1))]:.0f} | {ms[-1]:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) with alloc_trace")
    ap.add_argument("--profile", default="h200-cupy")
    ap.add_argument("--runs", type=int, default=10, help="seeds of the model per traced run")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--partition-workers", type=int, default=8)
    args = ap.parse_args()
    print(
        "| run | beside | card: n | mean ms | p90 | max | staging ms | longest wait ms "
        "| model: n | mean ms | p90 | max |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    from gpu_validation import read_runs  # beside this script

    for path in map(Path, args.records):
        for run in read_runs(path):
            rows = run.get("alloc_trace")
            traced = real_episodes(rows) if rows else []
            real = span_episodes(run["stage_spans"]) if run.get("stage_spans") else traced
            if not real:
                continue
            model = predicted(run, args.profile, args.runs, args.partitions, args.partition_workers)
            for kind in CLASSES:
                mine = [e for e in real if e.kind == kind]
                # the staging and the waits are the trace's (classed by its allocations)
                staging = [1e3 * e.staging for e in traced if e.kind == kind and e.staging is not None]
                waits = [1e3 * e.longest_wait for e in traced if e.kind == kind and e.longest_wait]
                med = (f"{statistics.median(staging):.0f}" if staging else "") + " | "
                med += f"{statistics.median(waits):.0f}" if waits else ""
                cap = f" at {run['vram_cap'] >> 20} MiB" if run["vram_cap"] else ""
                print(
                    f"| {run['label']}{cap} | {kind} | {stats(mine)} | {med} | "
                    f"{stats([e for e in model if e.kind == kind])} |"
                )


if __name__ == "__main__":
    main()
