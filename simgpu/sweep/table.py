"""The terminal view of a sweep: one line per point, then the answers a person asks first
(the fastest safe point, the smallest safe VRAM and host RAM)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from simgpu.errors import fmt_bytes
from simgpu.report.metrics import wilson_interval
from simgpu.sweep.results import SAFE_RISK, SweepResult

#: Column headers of the axes (narrow: a grid of six axes must fit a terminal).
HEADERS = {
    "design": "design",
    "gpu_workers": "GPU w",
    "partition_workers": "part w",
    "vram": "VRAM",
    "host_ram": "host RAM",
    "concurrency": "j",
}


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _point_text(sweep: SweepResult, axes: dict[str, Any]) -> str:
    return ", ".join(f"{name} {sweep.grid.axis(name).label(v)}" for name, v in axes.items())


def print_sweep(sweep: SweepResult, console: Console) -> None:
    """Print a sweep as one line per point (the fastest safe point in bold), then the fastest
    safe point and each design's smallest safe VRAM and host RAM."""
    varying = sweep.grid.varying()
    fixed = [a for a in sweep.grid.axes if not a.varies]
    wl = sweep.workload
    title = (
        f"simgpu sweep: {len(sweep.results)} points on {sweep.profile} - {wl.name} "
        f"({wl.partitions} x {wl.constraints:,} constraints), {sweep.runs} run(s) each"
    )
    caption = "fixed: " + ", ".join(f"{a.name} {a.label(a.values[0])}" for a in fixed) if fixed else None
    t = Table(title=title, caption=caption, header_style="bold")
    for name in varying:
        t.add_column(HEADERS[name], justify="left" if name == "design" else "right")
    for col in ("s/proof", "proofs/h"):
        t.add_column(col, justify="right")
    if sweep.price_per_hour is not None:
        t.add_column("$/proof", justify="right")
    for col in ("OOM (95% hi)", "peak VRAM", "peak RSS", "note"):
        t.add_column(col, justify="left" if col == "note" else "right")
    best = sweep.best()
    reasons: dict[str, int] = {}  # why points could not be built, numbered for the notes
    for i, r in enumerate(sweep.results):
        row = sweep.row(i)
        cells = [sweep.grid.axis(name).short(getattr(r.point, name)) for name in varying]
        cells += [_num(row["throughput_s_per_proof"], ".2f"), _num(row["proofs_per_hour"], ".1f")]
        if sweep.price_per_hour is not None:
            cells.append("-" if row["price_per_proof"] is None else f"${row['price_per_proof']:.4f}")
        if r.ok:
            style = "green" if row["oom_risk"] <= SAFE_RISK else "red"
            risk = f"[{style}]{100 * row['oom_risk']:.0f}%[/{style}] ({100 * row['oom_risk_ci95_hi']:.0f}%)"
        else:
            risk = "[red]-[/red]"
        cells += [
            risk,
            _gib(row["peak_vram_bytes"]),
            _gib(row["peak_rss_bytes"]),
            _note(row, reasons),
        ]
        t.add_row(*cells, style="bold" if i == best else None)
    console.print(t)
    for reason, k in reasons.items():
        console.print(f"({k}) cannot be built: {reason}", markup=False)
    if best is None:
        console.print("[red]no point is safe[/red] (OOM risk <= 1 %, proofs completed, no deadlock)")
    else:
        r = sweep.results[best]
        console.print(
            f"fastest safe point (bold): {_point_text(sweep, r.point.axes())}: "
            f"{r.proofs_per_hour:.1f} proofs/h ({r.throughput:.2f} s/proof)",
            markup=False,
        )
    upper = wilson_interval(0, sweep.runs)[1]
    measured = (
        f"{sweep.runs} run(s) per point: no OOM in any still leaves a 95% upper bound of {100 * upper:.0f} %"
    )
    console.print(f"safe: OOM risk <= {100 * SAFE_RISK:g} % of runs ({measured})", markup=False)
    for entry in sweep.safe_minima():
        for axis, what in (("vram", "VRAM"), ("host_ram", "host RAM")):
            m = entry[axis]
            if m is None:
                console.print(f"smallest safe {what} for {entry['design']}: none in the grid", markup=False)
                continue
            others = {k: v for k, v in m["point"].items() if k not in (axis, "design") and k in varying}
            at = f" (with {_point_text(sweep, others)})" if others else ""
            console.print(
                f"smallest safe {what} for {entry['design']}: {fmt_bytes(m['bytes'])}{at}",
                markup=False,
            )


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f}G"


def _note(row: dict[str, Any], reasons: dict[str, int]) -> str:
    if row["status"] != "ok":
        k = reasons.setdefault(row["error"] or "?", len(reasons) + 1)
        return f"cannot be built ({k})"
    notes = []
    if row["deadlocks"]:
        notes.append(f"{row['deadlocks']} deadlock(s)")
    if row["host_oom"]:
        notes.append("host RAM OOM")
    if row["proofs_failed"]:
        notes.append(f"{row['proofs_failed']} failed")
    return ", ".join(notes)
