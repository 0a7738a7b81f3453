"""One grid point's Monte Carlo as a pure function: what a Dask worker runs.

Like a build step with declared inputs: everything a point's answer depends on travels
with it as plain data (the profile's TOML table, the base configuration, the workload,
the point, the number of runs), nothing with state, so any worker on any machine
computes the same numbers as a loop of `predict()` calls here.  The seeds are the
configuration's, seed .. seed + runs - 1, the same for every point (so points differ by
their configuration, not by their luck).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig, Workload, load_toml
from simgpu.errors import UserError
from simgpu.model.montecarlo import predict
from simgpu.profile import Profile, profile_from_dict
from simgpu.report.document import proofs_per_hour
from simgpu.sched.registry import Design, resolve_design
from simgpu.sweep.grid import Point


@dataclass(frozen=True, eq=False)
class ProfileSpec:
    """A profile as data: its TOML table, the path it was read from (for its name and
    messages) and a digest of the table (a worker parses each profile once)."""

    data: dict[str, Any]
    path: str
    digest: str

    @classmethod
    def read(cls, path: str | Path) -> ProfileSpec:
        data = load_toml(path, "profile")
        text = json.dumps(data, sort_keys=True, default=str)
        return cls(data, str(path), hashlib.sha256(text.encode()).hexdigest())

    def load(self) -> Profile:
        prof = _PROFILES.get(self.digest)
        if prof is None:
            prof = _PROFILES[self.digest] = profile_from_dict(self.data, self.path)
        return prof


# Per worker process: parsed profiles and resolved designs.  Both are read-only after
# they are built (a Profile is frozen; a design is a generator function), so reusing them
# across points cannot carry state from one point to the next.
_PROFILES: dict[str, Profile] = {}
_DESIGNS: dict[str, Design] = {}


def _design(ref: str) -> Design:
    d = _DESIGNS.get(ref)
    if d is None:
        d = _DESIGNS[ref] = resolve_design(ref)
    return d


@dataclass
class PointResult:
    """A point's Monte Carlo: the aggregate of its runs (report.metrics.aggregate, as in
    predict's JSON), one row per run, or why the point could not be built."""

    point: Point
    aggregate: dict[str, Any] | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.aggregate is not None

    @property
    def deadlocks(self) -> int:
        return sum(1 for r in self.runs if r["deadlock"])

    @property
    def throughput(self) -> float | None:
        return self.aggregate["throughput_s_per_proof"] if self.aggregate else None

    @property
    def proofs_per_hour(self) -> float | None:
        return proofs_per_hour(self.throughput)

    @property
    def oom_risk(self) -> float:
        """The share of runs with an OOM; a point that cannot be built counts as certain OOM
        (its VRAM or host RAM cannot hold even one partition)."""
        return self.aggregate["oom_risk"]["p"] if self.aggregate else 1.0

    @property
    def oom_upper(self) -> float:
        """The upper end of the OOM risk's Wilson 95% interval."""
        return self.aggregate["oom_risk"]["ci95"][1] if self.aggregate else 1.0

    @property
    def peak_rss(self) -> int | None:
        return self.aggregate["host"]["peak_rss_bytes"] if self.aggregate else None

    def safe(self, max_risk: float = 0.01) -> bool:
        """Completes proofs, never deadlocks, and its OOM risk is at most `max_risk`."""
        return self.ok and self.throughput is not None and self.deadlocks == 0 and self.oom_risk <= max_risk


def run_rows(summaries: list[Any]) -> list[dict[str, Any]]:
    """One row per run, as in predict's JSON `runs[]`."""
    return [
        {
            "seed": s.seed,
            "throughput_s_per_proof": s.throughput,
            "makespan_s": s.makespan,
            "completed": s.completed,
            "failed": s.failed,
            "oom": s.any_oom,
            "deadlock": s.deadlock is not None,
        }
        for s in summaries
    ]


def evaluate(
    spec: ProfileSpec, base: PipelineConfig, workload: Workload, runs: int, point: Point
) -> PointResult:
    """The Monte Carlo of one point: `predict` with the point's configuration and design.

    A point whose configuration the model refuses to build (a VRAM that cannot hold one
    partition, a host RAM below the resident set) is a result, not a failure of the sweep:
    it comes back with its reason.  A design that breaks raises, as in predict."""
    profile = spec.load()
    design = _design(point.design)
    cfg = point.config(base)
    try:
        prediction = predict(profile, cfg, workload, design, runs=runs)
    except UserError as e:
        return PointResult(point, None, [], str(e))
    return PointResult(point, prediction.aggregate(), run_rows(prediction.summaries))
