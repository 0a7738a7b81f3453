"""The sweep's picture: proofs per hour over two axes, with the OOM-risk boundary drawn on it.

Like a contour map with a coastline: colour is throughput, and one line separates the
cells whose OOM risk is at most 1% from those above it (hatched).  Axes other than the
two drawn that vary in the grid become panels, one per combination of their values.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from simgpu.errors import UserError
from simgpu.sweep.grid import AXES, Grid
from simgpu.sweep.results import SAFE_RISK, SweepResult

#: More panels than this are unreadable on one page: narrow the grid or pick other axes.
MAX_PANELS = 24
#: Cells per panel up to which each cell is labelled with its value.
MAX_LABELLED_CELLS = 120


def require_matplotlib() -> None:
    """Say how to get matplotlib before a sweep runs, not after it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'simgpu[plot]'") from None


def heatmap_axes(grid: Grid, x: str | None, y: str | None) -> tuple[str, str]:
    """The two axes to draw: as asked, or VRAM across and GPU workers up when they vary,
    else the first axes that vary (then the first that do not)."""
    for name, flag in ((x, "--x"), (y, "--y")):
        if name is not None and name not in AXES:
            raise UserError(f"{flag} {name!r}: unknown axis (axes: {', '.join(AXES)})")
    varying = grid.varying()
    order = [a for a in ("vram", "gpu_workers") if a in varying]
    order += [a for a in varying if a not in order] + [a for a in AXES if a not in varying]
    if x is None:
        x = next(a for a in order if a != y)
    if y is None:
        y = next(a for a in order if a != x)
    if x == y:
        raise UserError(f"--x and --y are both {x!r}: pick two different axes")
    panels = math.prod(len(grid.axis(a).values) for a in varying if a not in (x, y))
    if panels > MAX_PANELS:
        raise UserError(
            f"the heatmap of {x} x {y} would need {panels} panels (one per combination of the other "
            f"varying axes; at most {MAX_PANELS}): pick --x/--y among {', '.join(varying)} or narrow the grid"
        )
    return x, y


def write_heatmap(path: str | Path, sweep: SweepResult, x: str | None = None, y: str | None = None) -> None:
    """A PNG: proofs per hour over axes x and y, one panel per combination of the other
    varying axes, the OOM-risk <= 1% boundary as a white line, riskier cells hatched."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    grid = sweep.grid
    x, y = heatmap_axes(grid, x, y)
    xs, ys = grid.axis(x).values, grid.axis(y).values
    others = [a for a in grid.varying() if a not in (x, y)]
    combos = list(itertools.product(*(grid.axis(a).values for a in others))) or [()]
    # Each panel's cells: proofs per hour (NaN where none completed) and OOM risk.
    cells: dict[tuple, dict[tuple[int, int], Any]] = {c: {} for c in combos}
    for r in sweep.results:
        axes = r.point.axes()
        combo = tuple(axes[a] for a in others)
        cells[combo][(ys.index(axes[y]), xs.index(axes[x]))] = r
    rates = [r.proofs_per_hour for r in sweep.results if r.proofs_per_hour]
    vmax = max(rates, default=1.0)
    ncols = math.ceil(math.sqrt(len(combos)))
    nrows = math.ceil(len(combos) / ncols)
    fig, axs = plt.subplots(
        nrows,
        ncols,
        figsize=(max(5.0, 0.55 * len(xs) + 2.5) * ncols, max(3.5, 0.45 * len(ys) + 2.0) * nrows),
        squeeze=False,
        layout="constrained",
    )
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
    image = None
    for k, combo in enumerate(combos):
        ax = axs[k // ncols][k % ncols]
        value = np.full((len(ys), len(xs)), np.nan)
        safe = np.zeros((len(ys), len(xs)), dtype=bool)
        for (j, i), r in cells[combo].items():
            value[j, i] = r.proofs_per_hour or np.nan
            safe[j, i] = r.oom_risk <= SAFE_RISK
        image = ax.imshow(
            np.ma.masked_invalid(value), origin="lower", aspect="auto", cmap=cmap, vmin=0.0, vmax=vmax
        )
        for (j, i), r in cells[combo].items():
            if not safe[j, i]:
                ax.add_patch(
                    Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#b2182b", lw=0)
                )
            if len(xs) * len(ys) <= MAX_LABELLED_CELLS and r.proofs_per_hour:
                # Dark text on the bright end of viridis, light text on the dark end.
                ink = "black" if r.proofs_per_hour > 0.6 * vmax else "white"
                ax.text(i, j, f"{r.proofs_per_hour:.0f}", ha="center", va="center", fontsize=7, color=ink)
        _boundary(ax, safe)
        ax.set_xticks(range(len(xs)), [grid.axis(x).short(v) for v in xs], rotation=45 if len(xs) > 6 else 0)
        ax.set_yticks(range(len(ys)), [grid.axis(y).short(v) for v in ys])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        if others:
            ax.set_title(
                ", ".join(f"{a} {grid.axis(a).short(v)}" for a, v in zip(others, combo, strict=True)),
                fontsize=9,
            )
    for k in range(len(combos), nrows * ncols):
        axs[k // ncols][k % ncols].set_visible(False)
    wl = sweep.workload
    fig.suptitle(
        f"proofs per hour: {sweep.profile}, {wl.name}, {sweep.runs} run(s) per cell\n"
        f"white line: OOM risk {100 * SAFE_RISK:g} % boundary; hatched: above it; grey: no proof completed",
        fontsize=10,
    )
    fig.colorbar(image, ax=axs.ravel().tolist(), label="proofs per hour")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _boundary(ax: Any, safe: Any) -> None:
    """The edges between a cell at OOM risk <= 1% and one above it, as line segments on the
    cells' shared sides (exact on a grid, where an interpolated contour would cut cells)."""
    ny, nx = safe.shape
    segments = []
    for j in range(ny):
        for i in range(nx):
            if i + 1 < nx and safe[j, i] != safe[j, i + 1]:
                segments.append(((i + 0.5, j - 0.5), (i + 0.5, j + 0.5)))
            if j + 1 < ny and safe[j, i] != safe[j + 1, i]:
                segments.append(((i - 0.5, j + 0.5), (i + 0.5, j + 0.5)))
    if segments:
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection(segments, colors="white", linewidths=2.5, capstyle="round"))
