"""The JSON document of a run: what was run and what came of it (schema in the README).

`predict` and `run` build the same document from the same records (report.metrics), so a
prediction and a measurement line up field by field.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig, Workload
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


def meta_of(
    mode: str, design: str, profile: str, vram: int, workload: Workload, config: PipelineConfig
) -> Meta:
    """The Meta of a run: its configuration as the document stores it (VRAM filled in from
    the profile or the device when the run did not override it)."""
    cfg = {k: v for k, v in asdict(config).items() if k not in ("workload", "partitions", "constraints")}
    if cfg.get("vram") is None:
        cfg["vram"] = vram
    if cfg.get("host_ram") is None:
        # only an override is shown (host.ram_bytes has the RAM used), so documents of runs
        # without one read as before
        cfg.pop("host_ram", None)
    wl = {"name": workload.name, "partitions": workload.partitions, "constraints": workload.constraints}
    return Meta(mode=mode, design=design, profile=profile, workload=wl, config=cfg)


def proofs_per_hour(throughput_s_per_proof: float | None) -> float | None:
    """Proofs per hour from seconds per proof (None when no proof completed)."""
    return 3600.0 / throughput_s_per_proof if throughput_s_per_proof else None


def price_fields(throughput_s_per_proof: float | None, price_per_hour: float) -> dict[str, Any]:
    """What a machine rented at `price_per_hour` gives: proofs per hour and the price of
    one proof, in the price's currency (None where no proof completed)."""
    rate = proofs_per_hour(throughput_s_per_proof)
    return {
        "price_per_hour": price_per_hour,
        "proofs_per_hour": rate,
        "price_per_proof": price_per_hour / rate if rate else None,
    }


def build_document(
    meta: Meta, agg: dict[str, Any], runs: list[RunSummary], price_per_hour: float | None = None
) -> dict[str, Any]:
    """The JSON document (schema documented in the README).  With `price_per_hour`, the
    price fields follow the throughput."""
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
        **_with_price(agg, price_per_hour),
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


def json_safe(obj: Any) -> Any:
    """The document with every non-finite number as null: JSON has no Infinity or NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def _with_price(agg: dict[str, Any], price_per_hour: float | None) -> dict[str, Any]:
    if price_per_hour is None:
        return agg
    out: dict[str, Any] = {}
    for key, value in agg.items():
        out[key] = value
        if key == "throughput_s_per_proof_max":
            out.update(price_fields(agg["throughput_s_per_proof"], price_per_hour))
    return out


def write_json(doc: dict[str, Any], path: str | Path | None) -> str:
    """The document as JSON text (and written to `path`, if given): strict JSON, so any
    parser reads it."""
    text = json.dumps(json_safe(doc), indent=2, sort_keys=False, default=float, allow_nan=False)
    if path:
        Path(path).write_text(text + "\n")
    return text
