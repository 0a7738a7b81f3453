"""The JSON document of a run: what was run and what came of it (schema in the README).

`predict` and `run` build the same document from the same records (report.metrics), so a
prediction and a measurement line up field by field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgpu.report.metrics import RunSummary

#: Version of the JSON document; bump when a field changes meaning or disappears.
SCHEMA = "simgpu.report/1"


@dataclass
class Meta:
    """What was run: shown in the table header and stored in the JSON."""

    mode: str  # "predict" or "run"
    design: str
    profile: str
    workload: dict[str, Any]
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)


def build_document(meta: Meta, agg: dict[str, Any], runs: list[RunSummary]) -> dict[str, Any]:
    """The JSON document (schema documented in the README)."""
    first = runs[0]
    locks: dict[str, dict[str, float]] = {}
    for r in runs:
        for name, st in r.locks.items():
            acc = locks.setdefault(name, {"acquisitions": 0, "wait_s_total": 0.0, "wait_s_max": 0.0})
            acc["acquisitions"] += st["acquisitions"]
            acc["wait_s_total"] += st["wait_s_total"]
            acc["wait_s_max"] = max(acc["wait_s_max"], st["wait_s_max"])
    for acc in locks.values():
        acc["wait_s_mean"] = acc["wait_s_total"] / acc["acquisitions"] if acc["acquisitions"] else 0.0
    return {
        "schema": SCHEMA,
        "mode": meta.mode,
        "design": meta.design,
        "profile": meta.profile,
        "workload": meta.workload,
        "config": meta.config,
        **agg,
        "locks": locks,
        "oom_events": [dict(o, run_seed=r.seed) for r in runs for o in r.oom_events],
        "failures": [dict(f, run_seed=r.seed) for r in runs for f in r.failures],
        "deadlock": first.deadlock
        if first.deadlock
        else next((r.deadlock for r in runs if r.deadlock), None),
        "leaks": [x for r in runs for x in r.leaks],
        "runs": [
            {
                "seed": r.seed,
                "throughput_s_per_proof": r.throughput,
                "makespan_s": r.makespan,
                "completed": r.completed,
                "failed": r.failed,
                "oom": r.any_oom,
                "deadlock": r.deadlock is not None,
            }
            for r in runs
        ],
        **meta.extra,
    }


def write_json(doc: dict[str, Any], path: str | Path | None) -> str:
    text = json.dumps(doc, indent=2, sort_keys=False, default=float)
    if path:
        Path(path).write_text(text + "\n")
    return text
