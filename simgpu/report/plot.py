"""The plot: a Gantt chart of the run over VRAM and host RSS in time (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simgpu.errors import UserError
from simgpu.report.document import Meta
from simgpu.report.trace import pack_lanes, stage_spans

STAGE_COLOURS = {
    "synthesis": "#8da0cb",
    "prep": "#a6d854",
    "prestage": "#ffd92f",
    "kernels": "#fc8d62",
    "b_g2_msm": "#66c2a5",
    "epilogue": "#e78ac3",
}


def require_matplotlib() -> None:
    """--plot needs matplotlib, the `plot` extra: say how to get it, before any work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'simgpu[plot]'") from None


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
    for lane, a, b, s in pack_lanes([(s["start"], s["end"], s) for s in cpu]):
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
