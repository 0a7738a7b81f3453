"""Would the model run out of VRAM with the card's own timing?  (issue #19)

On the sixteenth lease the model failed the capped group (H-K, three GPU workers at
2176 MiB) in every run where the card completed I, J and K: the model's live bytes at
its failure are the card's peak, and what it had beyond them is its caching pool's free
chunks in blocks it could not give back.  That fragmentation follows the order in which
the workers' buffers come and go, so this asks which is wrong, the order or the pool:
it runs the model's design, memory plan and caching pool once more, with every stage of
every partition taking exactly as long as the card's did (its span in the real run),
and contention off (the card's spans hold their contention already).

    python experiments/oom_replay.py docs/data/h200-2026-12-02c/call3-grid.json \\
        --profile docs/data/h200-2026-12-02c/h200-cupy.toml --only I J K

For each configuration: the OOM events of the replay, and of the model's own prediction
(its timing), for one seed each.  A stage of a partition the real run never ran (a lost
proof) keeps the model's time.

Which stage's times decide it: ``--stages S...`` takes only those stages' spans from the
card (and takes them out of the sharing; the rest run as the model runs them);
``--model-stages S...`` the other way round, every stage's span from the card but those,
which keep the model's own time alone (contention off throughout).
"""

from __future__ import annotations

import argparse
import copy
import tomllib
from pathlib import Path
from typing import Any

from gpu_validation import config_of, read_runs  # beside this script

from simgpu.config import Workload
from simgpu.model import hostmem
from simgpu.model.sim import SimRuntime
from simgpu.profile import profile_from_dict
from simgpu.profile.resolve import COPY, STAGE, WORK
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design


def without_contention(doc: dict[str, Any], stages: set[str] | None = None) -> dict[str, Any]:
    """The profile with no stage (or none of `stages`) leaning on a shared resource: those
    stages' jobs at full speed, the others sharing as the model shares them."""
    doc = copy.deepcopy(doc)
    for name, st in doc["stages"].items():
        if stages is not None and name not in stages:
            continue
        st.pop("uses", None)
        for ph in st.get("phases", []):
            ph.pop("uses", None)
    if stages is None:
        doc.pop("contention", None)
    return doc


class ReplayRuntime(SimRuntime):
    """The model's runtime with each stage of a partition as long as the card's: its
    noise factor is the real span over the stage's unloaded time."""

    def __init__(
        self, *args: Any, real: dict[tuple[int, int, str], float], stages: set[str] | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self._real = real
        self._stages = stages
        self._part_of: dict[Any, Any] = {}
        self.replayed = 0

    def stage(self, name: str, part: Any, device: int | None, **inputs: Any) -> Any:
        p = super().stage(name, part, device, **inputs)
        self._part_of[p] = (part, inputs)
        return p

    def _unloaded(self, name: str, inputs: dict[str, Any]) -> float:
        handle = inputs.get("buffers")
        handed = frozenset(handle.allocs) if handle is not None and hasattr(handle, "allocs") else frozenset()
        plan = self._plans.get((name, handed)) or self.resolved.plan(name, handed=handed)
        total = 0.0
        for step in plan.steps:
            if step.op == WORK and step.phase is not None:
                total += step.phase.seconds
            elif step.op in (COPY, STAGE):
                gbps = self.resolved.pageable_gbps if step.op == COPY else self.resolved.h2d_gbps
                total += hostmem.link_upload(step.nbytes, gbps, 0)[0]
        return total

    def stage_noise(self, stage: str) -> float:
        got = self._part_of.get(self.env.active_process)
        if got is not None and (self._stages is None or stage in self._stages):
            part, inputs = got
            real = self._real.get((part.proof.id, part.index, stage))
            unloaded = self._unloaded(stage, inputs)
            if real is not None and unloaded > 0:
                self.replayed += 1
                return real / unloaded
        return super().stage_noise(stage)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="validation records (gpu_validation measure --json)")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument(
        "--stages",
        nargs="*",
        default=None,
        help="take only these stages' spans from the card; the others keep the model's timing and contention",
    )
    ap.add_argument(
        "--model-stages",
        nargs="*",
        default=None,
        help="the other way round: every stage from the card but these, which keep the model's unloaded time "
        "and noise (contention off for all)",
    )
    ap.add_argument("--proofs", type=int, default=6)
    ap.add_argument("--partition-workers", type=int, default=8)
    args = ap.parse_args()
    doc = tomllib.loads(Path(args.profile).read_text())
    stages = set(args.stages) if args.stages else None
    quiet = profile_from_dict(without_contention(doc, stages))
    if args.model_stages:
        stages = set(doc["stages"]) - set(args.model_stages)
    full = profile_from_dict(doc)
    print("| cfg | run | real: completed, OOM | replay, the card's timing: OOM | model: OOM |")
    print("|---|---:|---|---:|---:|")
    for r in (r for path in args.json for r in read_runs(path)):
        if args.only and r["label"] not in args.only:
            continue
        n = int(r["constraints"])
        base = full.workload(full.default_workload)
        wl = Workload(base.name, base.partitions, n)
        cfg = config_of(args, int(r["gpu_workers"]), int(r["concurrency"]), r["vram_cap"])
        real = {(p, i, st): t1 - t0 for p, i, st, _, t0, t1 in r["stage_spans"]}
        design = resolve_design(r["design"]).fn
        rt = ReplayRuntime(quiet, cfg, wl, seed=int(r["repeat"]), real=real, stages=stages)
        replay = summarize(rt.run(design))
        model = summarize(SimRuntime(full, cfg, wl, seed=int(r["repeat"])).run(design))
        m = r["measured"]
        print(
            f"| {r['label']} | {r['repeat']} | {m['proofs']['completed']} of {m['proofs']['submitted']}, "
            f"{bool(m['oom_events'])} | {len(replay.oom_events)} ({rt.replayed} stages replayed) | "
            f"{len(model.oom_events)} |"
        )


if __name__ == "__main__":
    main()
