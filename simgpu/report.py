"""What a user reads: the rich table, the JSON document, the Perfetto trace, the plot.

`predict` and `run` produce the same things from the same records (metrics.py), so a
prediction and a measurement can be read side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from simgpu.errors import fmt_bytes
from simgpu.events import Record
from simgpu.metrics import RunSummary

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


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


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


def print_table(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    p = doc["proofs"]
    title = (
        f"simgpu {doc['mode']}: design [bold]{doc['design']}[/bold] on {doc['profile']} - "
        f"{doc['workload']['name']} ({doc['workload']['partitions']} x "
        f"{doc['workload']['constraints']:,} constraints)"
    )
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("metric")
    t.add_column("value", justify="right")
    cfg = doc["config"]
    t.add_row(
        "proofs x concurrency",
        f"{cfg['proofs']} x {cfg['concurrency'] if not cfg.get('arrival_rate') else 'open loop'}",
    )
    t.add_row(
        "GPU workers / device, partition workers",
        f"{cfg['gpu_workers_per_device']}, {cfg['partition_workers']}",
    )
    thr = doc["throughput_s_per_proof"]
    runs = doc["oom_risk"]["runs"]
    spread = ""
    if runs > 1 and doc.get("throughput_s_per_proof_min") is not None:
        spread = f" ({doc['throughput_s_per_proof_min']:.2f}-{doc['throughput_s_per_proof_max']:.2f})"
    t.add_row("throughput", ("-" if thr is None else f"{thr:.2f} s/proof") + spread)
    style = "red" if p["failed"] else "green"
    t.add_row("proofs completed / failed", f"[{style}]{p['completed']} / {p['failed']}[/{style}]")
    t.add_row("latency p50 / p95", f"{_secs(doc['latency_s']['p50'])} / {_secs(doc['latency_s']['p95'])}")
    for d in doc["devices"]:
        t.add_row(f"gpu{d['device']} busy", f"{100 * d['busy_frac']:.1f} %")
        t.add_row(
            f"gpu{d['device']} peak VRAM",
            f"{fmt_bytes(d['peak_vram_bytes'])} of {fmt_bytes(d['vram_bytes'])}",
        )
    for name, st in doc["locks"].items():
        t.add_row(f"lock {name} wait", f"{st['wait_s_total']:.2f} s total, {st['wait_s_mean']:.3f} s mean")
    h = doc["host"]
    t.add_row("peak host RSS", f"{fmt_bytes(h['peak_rss_bytes'])} of {fmt_bytes(h['ram_bytes'])}")
    risk = doc["oom_risk"]
    lo, hi = risk["ci95"]
    t.add_row(
        "OOM risk",
        f"{100 * risk['p']:.0f} % of {runs} run(s) (95% CI {100 * lo:.0f}-{100 * hi:.0f} %)",
    )
    for key, value in doc.get("verification", {}).items():
        t.add_row(f"verified {key}", str(value))
    console.print(t)
    ooms = doc["oom_events"]
    if ooms:
        console.print(f"[red]{len(ooms)} OOM event(s)[/red]; first:")
        for o in ooms[:3]:
            where = f"proof {o.get('proof')} partition {o.get('partition')}"
            console.print(
                f"  t={o['t']:.3f}s {o['kind']} on {o['pool']}: stage {o['stage']}, worker "
                f"{o.get('worker') or '?'}, {where}: requested {fmt_bytes(o['requested_bytes'])} "
                f"for {o.get('buffer') or '?'}, free {fmt_bytes(o['free_bytes'])}"
            )
    for f in doc["failures"][:5]:
        console.print(f"  proof {f['proof']} failed: {f['reason']}")
    if doc["deadlock"]:
        dl = doc["deadlock"]
        console.print(f"[red bold]DEADLOCK[/red bold] at t={dl['at']:.3f}s; stuck:")
        for who, what in sorted(dl["waiting"].items()):
            console.print(f"  {who} waits for {what}")
    for leak in doc["leaks"][:3]:
        console.print(f"[yellow]leak:[/yellow] {leak}")


def write_json(doc: dict[str, Any], path: str | Path | None) -> str:
    text = json.dumps(doc, indent=2, sort_keys=False, default=float)
    if path:
        Path(path).write_text(text + "\n")
    return text


# ------------------------------------------------------------------ trace


def _lanes(intervals: list[tuple[float, float, Any]]) -> list[tuple[int, float, float, Any]]:
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


def lock_spans(records: list[Record]) -> list[dict[str, Any]]:
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
    for lane, a, b, s in _lanes([(s["start"], s["end"], s) for s in cpu_spans]):
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


# ------------------------------------------------------------------ plot

STAGE_COLOURS = {
    "synthesis": "#8da0cb",
    "prep": "#a6d854",
    "prestage": "#ffd92f",
    "kernels": "#fc8d62",
    "b_g2_msm": "#66c2a5",
    "epilogue": "#e78ac3",
}


def write_plot(path: str | Path, result: Any, meta: Meta) -> None:
    """A Gantt chart (GPU workers, then CPU lanes) over VRAM and host RSS in time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spans = [s for s in stage_spans(result.records) if s["kind"] == "stage"]
    rows: list[str] = []
    bars: list[tuple[int, float, float, str, bool]] = []
    worker_names = sorted({s["worker"] for s in spans if s["worker"]})
    for w in worker_names:
        rows.append(w)
    for s in spans:
        if s["worker"]:
            bars.append((rows.index(s["worker"]), s["start"], s["end"], s["stage"], bool(s["error"])))
    cpu = [s for s in spans if not s["worker"]]
    nlanes = 0
    for lane, a, b, s in _lanes([(s["start"], s["end"], s) for s in cpu]):
        while nlanes <= lane:
            rows.append(f"cpu {nlanes}")
            nlanes += 1
        bars.append((len(worker_names) + lane, a, b, s["stage"], False))
    ndev = len(result.vram)
    fig, axes = plt.subplots(
        ndev + 2,
        1,
        figsize=(13, 3 + 0.28 * len(rows) + 2.2 * (ndev + 1)),
        sharex=True,
        gridspec_kw={"height_ratios": [max(2, 0.3 * len(rows))] + [1.2] * (ndev + 1)},
    )
    ax = axes[0]
    for row, a, b, stage, err in bars:
        ax.barh(
            row,
            b - a,
            left=a,
            color=STAGE_COLOURS.get(stage, "#bbbbbb"),
            edgecolor="red" if err else "none",
            linewidth=1.5 if err else 0,
            height=0.8,
        )
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.invert_yaxis()
    ax.set_title(f"{meta.mode}: {meta.design} on {meta.profile}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in STAGE_COLOURS.values()]
    ax.legend(handles, list(STAGE_COLOURS), ncol=6, fontsize=7, loc="upper right")
    ooms = [r for r in result.records if r.event == "oom"]
    for i, led in enumerate(result.vram):
        a = axes[1 + i]
        xs = [t for t, _ in led.history]
        ys = [u / 2**30 for _, u in led.history]
        a.step(xs, ys, where="post", color="#fc8d62")
        a.axhline(led.capacity / 2**30, color="black", linestyle="--", linewidth=0.8)
        for r in ooms:
            if r.fields.get("pool") == led.pool:
                a.plot([r.t], [led.capacity / 2**30], "rx", markersize=9)
        a.set_ylabel(f"{led.pool} GiB")
    a = axes[-1]
    xs = [t for t, _ in result.host.history]
    ys = [u / 2**30 for _, u in result.host.history]
    a.step(xs, ys, where="post", color="#8da0cb")
    a.axhline(result.host.capacity / 2**30, color="black", linestyle="--", linewidth=0.8)
    a.set_ylabel("host GiB")
    a.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
