"""The plot: a Gantt chart of the run over VRAM and host RSS in time (matplotlib).

Each GPU worker's lane carries its stages and, in a strip beneath them, its locks: a
hold as a solid bar, a wait as a hatched one in the lock's colour, so a wait behind
another worker's hold reads straight across the lanes.  Each OOM is marked where it
happened and annotated with who held the rest: on every holder's lane a red frame spans
the time its buffers were live up to the OOM, and a panel below zooms in on the first
OOM, so the overlap that caused it shows without reading any text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simgpu.errors import UserError, fmt_bytes
from simgpu.report.document import Meta
from simgpu.report.trace import lock_spans, pack_lanes, stage_spans

STAGE_COLOURS = {
    "synthesis": "#8da0cb",
    "prep": "#a6d854",
    "prestage": "#ffd92f",
    "kernels": "#fc8d62",
    "b_g2_msm": "#66c2a5",
    "epilogue": "#e78ac3",
}
#: Colours of the locks, in the order they first appear in a run.
LOCK_COLOURS = ("#1f4e99", "#7b3294", "#333333", "#b35806", "#1b7837")
OOM_COLOUR = "#d7191c"
#: Holders annotated per OOM (the largest first).
HOLDERS_SHOWN = 3


def require_matplotlib() -> None:
    """--plot needs matplotlib, the `plot` extra: say how to get it, before any work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'simgpu[plot]'") from None


def lock_waits(records: list[Any]) -> list[dict[str, Any]]:
    """Each lock wait that ended in an acquisition: who waited for which lock, from when
    to when (a wait still open when the run stopped is not drawn)."""
    out = []
    for r in records:
        if r.event == "lock_acquired" and (r.fields.get("waited") or 0) > 0:
            out.append(
                {"lock": r.fields["lock"], "start": r.t - r.fields["waited"], "end": r.t, "worker": r.worker}
            )
    return out


def _holders_text(o: dict[str, Any]) -> str:
    """An OOM's label: what was asked, and the largest holders of other partitions."""
    head = f"OOM: {o.get('worker') or '?'} asked {fmt_bytes(o['requested_bytes'])} ({o['buffer']}), "
    head += f"{fmt_bytes(o['free_bytes'])} free"
    lines = [head]
    others = [
        h
        for h in o.get("holders") or []
        if h.get("proof") is not None and (h["proof"], h["partition"]) != (o.get("proof"), o.get("partition"))
    ]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for h in others:
        groups.setdefault((h.get("worker"), h["proof"], h["partition"]), []).append(h)
    ranked = sorted(groups.items(), key=lambda kv: -sum(h["bytes"] for h in kv[1]))
    for (worker, _, _), hs in ranked[:HOLDERS_SHOWN]:
        bufs = "/".join(sorted({h["buffer"] for h in hs}))
        since = min((h["t"] for h in hs if h.get("t") is not None), default=None)
        when = f" since {since:.2f} s" if since is not None else ""
        doing = hs[0].get("doing") or ""
        lines.append(f"live: {worker or '?'} {bufs} {fmt_bytes(sum(h['bytes'] for h in hs))}{when}; {doing}")
    return "\n".join(lines)


def live_spans(o: dict[str, Any]) -> list[tuple[str, float, float, int]]:
    """(worker, since, until the OOM, bytes) of each other partition's live buffers."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for h in o.get("holders") or []:
        if h.get("proof") is None or h.get("t") is None or not h.get("worker"):
            continue
        if (h["proof"], h["partition"]) == (o.get("proof"), o.get("partition")):
            continue
        groups.setdefault(h["worker"], []).append(h)
    return [(w, min(h["t"] for h in hs), o["t"], sum(h["bytes"] for h in hs)) for w, hs in groups.items()]


def _draw_lanes(
    ax: Any, rows: list[str], bars: list, holds: list, waits: list, colours: dict[str, str]
) -> None:
    for row, a, b, stage, err in bars:
        ax.barh(
            row - 0.12,
            b - a,
            left=a,
            color=STAGE_COLOURS.get(stage, "#bbbbbb"),
            edgecolor=OOM_COLOUR if err else "none",
            linewidth=1.5 if err else 0,
            height=0.56,
        )
    for row, a, b, lock in holds:
        ax.barh(row + 0.3, b - a, left=a, color=colours[lock], height=0.2, linewidth=0)
    for row, a, b, lock in waits:
        ax.barh(
            row + 0.3,
            b - a,
            left=a,
            color="white",
            edgecolor=colours[lock],
            hatch="////",
            height=0.2,
            linewidth=0.6,
        )
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_ylim(len(rows) - 0.4, -0.6)


def _draw_ooms(ax: Any, ooms: list[dict[str, Any]], row_of: dict[str, int], label: bool) -> None:
    for o in ooms:
        row = row_of.get(o.get("worker") or "")
        if row is None:
            continue
        ax.plot([o["t"]], [row - 0.12], "x", color=OOM_COLOUR, markersize=10, markeredgewidth=2)
        for worker, since, until, nbytes in live_spans(o):
            r = row_of.get(worker)
            if r is None:
                continue
            ax.add_patch(
                _frame(since, r - 0.45, until - since, 0.9, OOM_COLOUR),
            )
            if label:
                # inside the frame, on the stage row the waiting holder leaves empty
                ax.annotate(
                    f"{fmt_bytes(nbytes)} live",
                    (until, r - 0.12),
                    xytext=(-4, 0),
                    textcoords="offset points",
                    fontsize=7,
                    color=OOM_COLOUR,
                    ha="right",
                    va="center",
                )
        if label:
            ax.annotate(
                _holders_text(o),
                (o["t"], row - 0.12),
                xytext=(12, -6),
                textcoords="offset points",
                fontsize=7,
                color=OOM_COLOUR,
                va="top",
                bbox={"boxstyle": "round", "fc": "white", "ec": OOM_COLOUR, "alpha": 0.9},
            )


def _frame(x: float, y: float, w: float, h: float, colour: str) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, fill=False, edgecolor=colour, linewidth=1.6, linestyle="--", zorder=5)


def write_plot(path: str | Path, result: Any, meta: Meta) -> None:
    """A Gantt chart (GPU workers with their locks, then CPU lanes), a zoom on the first
    OOM if there is one, over VRAM and host RSS in time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from simgpu.report.oom import oom_events

    records = result.records
    spans = [s for s in stage_spans(records) if s["kind"] == "stage"]
    rows: list[str] = sorted({s["worker"] for s in spans if s["worker"]})
    row_of = {w: i for i, w in enumerate(rows)}
    bars: list[tuple[int, float, float, str, bool]] = []
    for s in spans:
        if s["worker"]:
            bars.append((row_of[s["worker"]], s["start"], s["end"], s["stage"], bool(s["error"])))
    n_workers = len(rows)
    cpu = [s for s in spans if not s["worker"]]
    for lane, a, b, s in pack_lanes([(s["start"], s["end"], s) for s in cpu]):
        while len(rows) <= n_workers + lane:
            rows.append(f"cpu {len(rows) - n_workers}")
        bars.append((n_workers + lane, a, b, s["stage"], False))
    held = lock_spans(records)
    waited = lock_waits(records)
    names = list(dict.fromkeys([s["lock"] for s in held] + [w["lock"] for w in waited]))
    colours = {name: LOCK_COLOURS[i % len(LOCK_COLOURS)] for i, name in enumerate(names)}
    holds = [(row_of[s["worker"]], s["start"], s["end"], s["lock"]) for s in held if s["worker"] in row_of]
    waits = [(row_of[w["worker"]], w["start"], w["end"], w["lock"]) for w in waited if w["worker"] in row_of]
    ooms = oom_events(records) if any(r.event == "oom" for r in records) else []
    first = next((o for o in ooms if (o.get("worker") or "") in row_of), None)

    ndev = len(result.vram)
    heights = (
        [max(2.0, 0.3 * len(rows))] + ([max(1.6, 0.42 * n_workers)] if first else []) + [1.2] * (ndev + 1)
    )
    fig = plt.figure(figsize=(13, 3 + sum(heights) * 0.9))
    grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    ax = fig.add_subplot(grid[0])
    _draw_lanes(ax, rows, bars, holds, waits, colours)
    _draw_ooms(ax, ooms, row_of, label=first is None)
    fig.suptitle(f"{meta.mode}: {meta.design} on {meta.profile}")
    handles = [Patch(color=c, label=s) for s, c in STAGE_COLOURS.items()]
    for name, c in colours.items():
        handles.append(Patch(color=c, label=f"holds {name}"))
        handles.append(Patch(facecolor="white", edgecolor=c, hatch="////", label=f"waits {name}"))
    ax.legend(
        handles=handles, ncol=8, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False
    )
    axes = [ax]
    if first is not None:
        zoom = fig.add_subplot(grid[1])
        live = live_spans(first)
        lo = min([first["t"], *(since for _, since, _, _ in live)])
        # room around the overlap, in proportion to it and to the run (seconds or days)
        run = max((b[2] for b in bars), default=first["t"]) - min((b[1] for b in bars), default=0.0)
        pad = max(0.3 * (first["t"] - lo), 0.005 * run, 1e-6)
        _draw_lanes(zoom, rows[:n_workers], [b for b in bars if b[0] < n_workers], holds, waits, colours)
        _draw_ooms(zoom, [first], row_of, label=True)
        zoom.set_xlim(lo - pad, first["t"] + 3 * pad)
        zoom.set_title(
            f"the first OOM, t = {first['t']:.3f} s: what was live, who held and waited", fontsize=9
        )
        zoom.set_xlabel("time (s)", fontsize=8)
        # where the zoom is, on the whole run (without widening the run's axis)
        xlim = ax.get_xlim()
        ax.axvspan(lo - pad, first["t"] + 3 * pad, color=OOM_COLOUR, alpha=0.08, linewidth=0)
        ax.set_xlim(xlim)
    base = 1 + (first is not None)
    for i, led in enumerate(result.vram):
        a = fig.add_subplot(grid[base + i], sharex=ax)
        xs = [t for t, _ in led.history]
        ys = [u / 2**30 for _, u in led.history]
        a.step(xs, ys, where="post", color="#fc8d62")
        a.axhline(led.capacity / 2**30, color="black", linestyle="--", linewidth=0.8)
        for o in ooms:
            if o.get("pool") == led.pool:
                a.plot([o["t"]], [led.capacity / 2**30], "x", color=OOM_COLOUR, markersize=9)
        a.set_ylabel(f"{led.pool} GiB")
        axes.append(a)
    a = fig.add_subplot(grid[-1], sharex=ax)
    xs = [t for t, _ in result.host.history]
    ys = [u / 2**30 for _, u in result.host.history]
    a.step(xs, ys, where="post", color="#8da0cb")
    a.axhline(result.host.capacity / 2**30, color="black", linestyle="--", linewidth=0.8)
    for o in ooms:
        if o.get("pool") == "host":
            a.plot([o["t"]], [result.host.capacity / 2**30], "x", color=OOM_COLOUR, markersize=9)
    a.set_ylabel("host GiB")
    a.set_xlabel("time (s)")
    for x in axes:
        x.tick_params(labelbottom=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
