"""Spans of a run's records, and the Chrome/Perfetto trace drawn from them.

A trace is a run's timeline laid out like a subway map: one track per GPU worker, CPU
stages packed on a few lanes, a track per lock, and VRAM and host RSS as counters.  An
OOM is an instant event whose args are the OOM record's, holders included (who held
what, since when, doing what); in a prediction, the spans during which a shared resource
(host memory bandwidth above all) was oversubscribed have a host track each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simgpu.events import Record
from simgpu.report.document import Meta


def pack_lanes(intervals: list[tuple[float, float, Any]]) -> list[tuple[int, float, float, Any]]:
    """Assign intervals to the fewest lanes (first free lane) so CPU stages of many
    partitions fit on a few tracks."""
    ends: list[float] = []
    out = []
    for a, b, payload in sorted(intervals, key=lambda x: (x[0], x[1])):
        for i, end in enumerate(ends):
            if end <= a + 1e-12:
                ends[i] = b
                out.append((i, a, b, payload))
                break
        else:
            ends.append(b)
            out.append((len(ends) - 1, a, b, payload))
    return out


def stage_spans(records: list[Record]) -> list[dict[str, Any]]:
    """Pair stage_start/stage_end (and phases) into spans."""
    open_: dict[tuple, Record] = {}
    spans = []
    for r in records:
        if r.event not in ("stage_start", "phase_start", "stage_end", "phase_end"):
            continue
        key = (r.event[:5], r.proof, r.partition, r.worker, r.fields.get("stage"), r.fields.get("phase"))
        if r.event.endswith("_start"):
            open_[key] = r
        else:
            s = open_.pop(key, None)
            if s is not None:
                spans.append(
                    {
                        "kind": r.event[:5],
                        "stage": r.fields.get("stage"),
                        "phase": r.fields.get("phase"),
                        "start": s.t,
                        "end": r.t,
                        "proof": r.proof,
                        "partition": r.partition,
                        "worker": r.worker,
                        "device": s.device if s.device is not None else r.device,
                        "on": s.fields.get("on", "gpu" if r.worker else "cpu"),
                        "error": r.fields.get("error"),
                    }
                )
    return spans


def stage_rows(records: list[Record]) -> list[list[Any]]:
    """Every stage of every partition as [proof, partition, stage, worker, start, end]:
    what ran beside what, compactly (validation runs keep it)."""
    return [
        [sp["proof"], sp["partition"], sp["stage"], sp["worker"], sp["start"], sp["end"]]
        for sp in stage_spans(records)
        if sp["kind"] == "stage"
    ]


def lock_spans(records: list[Record]) -> list[dict[str, Any]]:
    """Pair lock_acquired/lock_released into spans: which lock was held, when, and by whom."""
    held: dict[str, Record] = {}
    out = []
    for r in records:
        if r.event == "lock_acquired":
            held[r.fields["lock"]] = r
        elif r.event == "lock_released":
            s = held.pop(r.fields["lock"], None)
            if s is not None:
                out.append(
                    {
                        "lock": r.fields["lock"],
                        "start": s.t,
                        "end": r.t,
                        "worker": s.worker,
                        "proof": s.proof,
                        "partition": s.partition,
                    }
                )
    return out


def write_trace(path: str | Path, result: Any, meta: Meta) -> None:
    """Chrome trace-event JSON (opens in Perfetto / chrome://tracing): a track per GPU
    worker, CPU stages packed on lanes, lock holds per lock, VRAM and RSS counters."""
    us = 1e6
    events: list[dict[str, Any]] = []
    pids = {"host": 1}

    def pid_of(name: str) -> int:
        if name not in pids:
            pids[name] = len(pids) + 1
        return pids[name]

    tids: dict[tuple[int, str], int] = {}

    def tid_of(pid: int, name: str) -> int:
        key = (pid, name)
        if key not in tids:
            tids[key] = len(tids) + 1
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": tids[key],
                    "args": {"name": name},
                }
            )
        return tids[key]

    spans = stage_spans(result.records)
    worker_spans = [s for s in spans if s["worker"]]
    cpu_spans = [s for s in spans if not s["worker"] and s["kind"] == "stage"]
    for s in worker_spans:
        dev = s["device"] if s["device"] is not None else 0
        pid = pid_of(f"gpu{dev}")
        name = s["stage"] if s["kind"] == "stage" else f"{s['stage']}.{s['phase']}"
        events.append(
            {
                "ph": "X",
                "name": name,
                "cat": s["kind"],
                "pid": pid,
                "tid": tid_of(pid, s["worker"]),
                "ts": s["start"] * us,
                "dur": max(0.0, s["end"] - s["start"]) * us,
                "args": {
                    "proof": s["proof"],
                    "partition": s["partition"],
                    **({"error": s["error"]} if s["error"] else {}),
                },
            }
        )
    for lane, a, b, s in pack_lanes([(s["start"], s["end"], s) for s in cpu_spans]):
        pid = pid_of("host")
        events.append(
            {
                "ph": "X",
                "name": s["stage"],
                "cat": "stage",
                "pid": pid,
                "tid": tid_of(pid, f"cpu lane {lane}"),
                "ts": a * us,
                "dur": (b - a) * us,
                "args": {"proof": s["proof"], "partition": s["partition"]},
            }
        )
    for s in lock_spans(result.records):
        pid = pid_of("locks")
        events.append(
            {
                "ph": "X",
                "name": f"held by {s['worker']}",
                "cat": "lock",
                "pid": pid,
                "tid": tid_of(pid, s["lock"]),
                "ts": s["start"] * us,
                "dur": (s["end"] - s["start"]) * us,
                "args": {"proof": s["proof"], "partition": s["partition"]},
            }
        )
    for led in result.vram:
        pid = pid_of(led.pool)
        for t, used in led.history:
            events.append(
                {
                    "ph": "C",
                    "name": "VRAM GiB",
                    "pid": pid,
                    "ts": t * us,
                    "args": {"used": used / 2**30},
                }
            )
    for t, used in result.host.history:
        events.append(
            {
                "ph": "C",
                "name": "host RSS GiB",
                "pid": pids["host"],
                "ts": t * us,
                "args": {"rss": used / 2**30},
            }
        )
    for res, intervals in sorted((getattr(result, "saturation", None) or {}).items()):
        for a, b in intervals:
            pid = pids["host"]
            events.append(
                {
                    "ph": "X",
                    "name": f"{res} oversubscribed",
                    "cat": "saturation",
                    "pid": pid,
                    "tid": tid_of(pid, f"{res} oversubscribed"),
                    "ts": a * us,
                    "dur": (b - a) * us,
                }
            )
    for r in result.records:
        if r.event == "oom":
            pid = pid_of(r.fields.get("pool", "host")) if r.fields.get("pool") != "host" else pids["host"]
            events.append(
                {
                    "ph": "i",
                    "name": "OOM",
                    "s": "p",
                    "pid": pid,
                    "ts": r.t * us,
                    "args": {k: v for k, v in r.fields.items()},
                }
            )
    for name, pid in pids.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"design": meta.design, "profile": meta.profile, "mode": meta.mode},
    }
    Path(path).write_text(json.dumps(doc))
