"""A finished sweep: one flat row per point, the safe minima, the best point, and the
files they are written to (Parquet, CSV, JSON).

Like a spreadsheet of the grid: every point is a row with its axis values and its
answers (throughput, proofs per hour, OOM risk with its interval, peaks), so a reader can
filter and pivot it in any tool; the document adds what a person asks first: which
VRAM and which host RAM are safe.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import UserError
from simgpu.report.document import price_fields
from simgpu.sweep.grid import AXES, Grid
from simgpu.sweep.point import PointResult

#: Version of the sweep document; bump when a field changes meaning or disappears.
SCHEMA = "simgpu.sweep/1"
#: A point is safe when its OOM risk is at most this (the issue's 1%), it completes
#: proofs and never deadlocks.
SAFE_RISK = 0.01
#: The file kinds `--out` writes, by suffix.
FORMATS = (".parquet", ".csv", ".json")


@dataclass
class SweepResult:
    """The grid, each point's result (in grid order), and what they were run with."""

    grid: Grid
    results: list[PointResult]
    profile: str
    workload: Workload
    base: PipelineConfig
    runs: int
    price_per_hour: float | None = None

    def row(self, i: int) -> dict[str, Any]:
        """Point i as one flat row (the columns of the Parquet and CSV files)."""
        r = self.results[i]
        agg = r.aggregate
        row: dict[str, Any] = {"index": i, **r.point.axes(), "runs": self.runs}
        row["status"] = "ok" if r.ok else "invalid"
        row["error"] = r.error
        row["safe"] = r.safe(SAFE_RISK)
        row["throughput_s_per_proof"] = agg["throughput_s_per_proof"] if agg else None
        row["throughput_s_per_proof_min"] = agg["throughput_s_per_proof_min"] if agg else None
        row["throughput_s_per_proof_max"] = agg["throughput_s_per_proof_max"] if agg else None
        row["proofs_per_hour"] = r.proofs_per_hour
        if self.price_per_hour is not None:
            row["price_per_proof"] = price_fields(r.throughput, self.price_per_hour)["price_per_proof"]
        row["proofs_completed"] = agg["proofs"]["completed"] if agg else 0
        row["proofs_failed"] = agg["proofs"]["failed"] if agg else 0
        row["oom_risk"] = agg["oom_risk"]["p"] if agg else None
        row["oom_risk_ci95_lo"] = agg["oom_risk"]["ci95"][0] if agg else None
        row["oom_risk_ci95_hi"] = agg["oom_risk"]["ci95"][1] if agg else None
        row["peak_vram_bytes"] = max(d["peak_vram_bytes"] for d in agg["devices"]) if agg else None
        row["busy_frac"] = sum(d["busy_frac"] for d in agg["devices"]) / len(agg["devices"]) if agg else None
        row["peak_rss_bytes"] = agg["host"]["peak_rss_bytes"] if agg else None
        row["host_oom"] = agg["host"]["oom"] if agg else None
        row["latency_p50_s"] = agg["latency_s"]["p50"] if agg else None
        row["latency_p95_s"] = agg["latency_s"]["p95"] if agg else None
        row["deadlocks"] = r.deadlocks
        return row

    def rows(self) -> list[dict[str, Any]]:
        return [self.row(i) for i in range(len(self.results))]

    def best(self) -> int | None:
        """The safe point with the most proofs per hour (the first of equals)."""
        safe = [i for i, r in enumerate(self.results) if r.safe(SAFE_RISK)]
        return max(safe, key=lambda i: (self.results[i].proofs_per_hour or 0.0, -i), default=None)

    def safe_minima(self) -> list[dict[str, Any]]:
        """Per design: the smallest VRAM and the smallest host RAM at which some point of
        the grid is safe, each with that point (the fastest safe one at that size)."""
        out = []
        for design in self.grid.axis("design").values:
            entry: dict[str, Any] = {"design": design, "max_oom_risk": SAFE_RISK}
            for axis in ("vram", "host_ram"):
                safe = [
                    i for i, r in enumerate(self.results) if r.point.design == design and r.safe(SAFE_RISK)
                ]
                if not safe:
                    entry[axis] = None
                    continue
                smallest = min(getattr(self.results[i].point, axis) for i in safe)
                at = [i for i in safe if getattr(self.results[i].point, axis) == smallest]
                i = max(at, key=lambda k: (self.results[k].proofs_per_hour or 0.0, -k))
                entry[axis] = {"bytes": smallest, "index": i, "point": self.results[i].point.axes()}
            out.append(entry)
        return out

    def document(self) -> dict[str, Any]:
        """The sweep's JSON document (schema in the README)."""
        config = {
            k: v for k, v in asdict(self.base).items() if k not in ("workload", "partitions", "constraints")
        }
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "mode": "sweep",
            "profile": self.profile,
            "workload": {
                "name": self.workload.name,
                "partitions": self.workload.partitions,
                "constraints": self.workload.constraints,
            },
            "config": config,
            "runs": self.runs,
            "seeds": [self.base.seed, self.base.seed + self.runs - 1],
            "axes": {a.name: list(a.values) for a in self.grid.axes},
        }
        if self.price_per_hour is not None:
            doc["price_per_hour"] = self.price_per_hour
        doc["best"] = self.best()
        doc["safe_minimum"] = self.safe_minima()
        doc["points"] = self.rows()
        return doc


def check_out_path(path: Path) -> None:
    """Refuse an output file simgpu cannot write before any point runs."""
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"--out {path}: write .parquet, .csv or .json (by the file's suffix)")
    if not path.parent.is_dir():
        raise UserError(f"--out {path}: no such directory {path.parent}")


def write_results(path: Path, sweep: SweepResult) -> None:
    """The rows as Parquet or CSV, or the whole document as JSON, by `path`'s suffix."""
    check_out_path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        path.write_text(json.dumps(sweep.document(), indent=2) + "\n")
        return
    rows = sweep.rows()
    if suffix == ".csv":
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(rows)), path)


def _schema(rows: list[dict[str, Any]]) -> Any:
    """Explicit column types: a column that is None on every row (no point failed, say)
    would otherwise have no type, and a reader's filter on it would break."""
    import pyarrow as pa

    types: dict[str, Any] = {
        "index": pa.int64(),
        "design": pa.string(),
        **{a: pa.int64() for a in AXES if a != "design"},
        "runs": pa.int64(),
        "status": pa.string(),
        "error": pa.string(),
        "safe": pa.bool_(),
        "proofs_completed": pa.int64(),
        "proofs_failed": pa.int64(),
        "peak_vram_bytes": pa.int64(),
        "peak_rss_bytes": pa.int64(),
        "host_oom": pa.bool_(),
        "deadlocks": pa.int64(),
    }
    return pa.schema([(name, types.get(name, pa.float64())) for name in rows[0]])
