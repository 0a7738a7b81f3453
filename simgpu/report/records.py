"""A run's event records as a file (`--records`), and reading one back.

Like a flight recorder's tape beside the accident report: the JSON document keeps what
a user reads, this keeps every record the runtime emitted, so `simgpu explain` (or any
script) can go back to the events themselves.  JSON Lines: a header object, then one
record per line.

    {"schema": "simgpu.records/1", "mode": "predict", "design": ..., "profile": ...,
     "seed": 0, "end_time": 412.7, "config": {PipelineConfig's fields},
     "saturation": {"membw": [[t0, t1], ...], ...} or null}
    {"t": 0.0, "event": "proof_submitted", "proof": 0, "partition": null, "device": null,
     "worker": null, "fields": {"partitions": 10}}
    ...
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig
from simgpu.errors import UserError
from simgpu.events import Record
from simgpu.report.document import Meta, json_safe

SCHEMA = "simgpu.records/1"


def write_records(path: str | Path, result: Any, meta: Meta) -> None:
    """The run's records, under a header saying what was run."""
    header = {
        "schema": SCHEMA,
        "mode": meta.mode,
        "design": meta.design,
        "profile": meta.profile,
        "seed": result.seed,
        "end_time": result.end_time,
        "config": asdict(result.config) if result.config is not None else None,
        "saturation": result.saturation,
    }
    with open(path, "w") as fh:
        fh.write(json.dumps(json_safe(header), allow_nan=False) + "\n")
        for r in result.records:
            fh.write(json.dumps(json_safe(r.as_dict()), allow_nan=False, default=str) + "\n")


def read_records(lines: list[str], name: str) -> tuple[dict[str, Any], list[Record], PipelineConfig | None]:
    """The header, the records and the configuration of a `--records` file's lines
    (after the header line was recognised); a malformed line is a UserError naming it."""
    header = json.loads(lines[0])
    records = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            rec = Record(float(d["t"]), str(d["event"]), d["proof"], d["partition"], d["device"], d["worker"])
            rec.fields = dict(d["fields"])
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{name}:{i}: not an event record ({type(e).__name__}: {e})") from None
        records.append(rec)
    cfg = header.get("config")
    config = None
    if isinstance(cfg, dict):
        known = {f.name for f in fields(PipelineConfig)}
        try:
            config = PipelineConfig(**{k: v for k, v in cfg.items() if k in known})
        except TypeError as e:
            raise UserError(f"{name}:1: the header's config is not a pipeline configuration ({e})") from None
    return header, records, config
