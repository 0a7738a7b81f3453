"""Tuning: the configuration of the grid's space with the most proofs per hour that is
safe, found by Optuna instead of by trying every point.

Like a search with a budget: a seeded TPE sampler proposes points of the same axes a
sweep takes, in batches that run on the cluster, and learns from each batch's answers.
A point is feasible when the upper end of its OOM risk's Wilson 95% interval is at most
`max_oom_risk`, its peak host RSS at most `max_host_ram`, and it completes proofs
without deadlock; a point the model cannot build (its VRAM cannot hold one partition)
is an OOM, so infeasible, not an error.  The same seed, batch size and trial count give
the same trials, whatever the cluster.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simgpu.errors import GiB, UserError
from simgpu.report.metrics import wilson_interval
from simgpu.sweep.cluster import PointRunner
from simgpu.sweep.grid import Grid, Point
from simgpu.sweep.point import PointResult

#: Trials proposed at once and run side by side (fixed, not the cluster's size, so a tune
#: gives the same answer on any cluster).
DEFAULT_BATCH = 8


def min_runs(max_risk: float) -> int:
    """The fewest runs whose Wilson 95% upper bound, with no OOM in any run, is at most
    `max_risk`: below that no configuration can be shown safe enough."""
    if not 0 < max_risk < 1:
        raise UserError(f"--max-oom-risk: must be between 0 and 1 (exclusive), got {max_risk}")
    n = 1
    while wilson_interval(0, n)[1] > max_risk:
        n *= 2
    lo = n // 2
    while lo + 1 < n:  # the smallest n in (lo, n] that passes
        mid = (lo + n) // 2
        if wilson_interval(0, mid)[1] <= max_risk:
            n = mid
        else:
            lo = mid
    return n


@dataclass
class Trial:
    """One Optuna trial: the point it proposed, that point's result, and whether it meets
    the constraints (if not, the first it violates)."""

    number: int
    point: Point
    result: PointResult
    feasible: bool
    why: str

    @property
    def proofs_per_hour(self) -> float:
        return self.result.proofs_per_hour or 0.0


@dataclass
class TuneResult:
    """A tune's answer: every trial in order, the best feasible one (most proofs per hour;
    None when no trial was feasible), and the constraints, runs and sampler it ran under."""

    trials: list[Trial]
    best: int | None  # index into trials
    evaluated: int  # distinct points run (a trial may propose a point already run)
    max_oom_risk: float
    max_host_ram: int | None
    runs: int
    sampler_seed: int
    batch: int

    @property
    def best_trial(self) -> Trial | None:
        return None if self.best is None else self.trials[self.best]


def constraints(
    result: PointResult, max_oom_risk: float, max_host_ram: int | None
) -> tuple[dict[str, float], str]:
    """Optuna's constraint values (feasible when all are <= 0) and, when one is violated,
    a line saying which."""
    if not result.ok:
        values = {"oom_risk_upper95": 1.0 - max_oom_risk, "peak_host_rss_gib": 0.0, "broken": 1.0}
        return values, f"cannot be built: {result.error}"
    upper = result.oom_upper
    peak = result.peak_rss or 0
    limit = max_host_ram if max_host_ram is not None else result.point.host_ram
    broken = result.throughput is None or result.deadlocks > 0
    values = {
        "oom_risk_upper95": upper - max_oom_risk,
        "peak_host_rss_gib": (peak - limit) / GiB,
        "broken": 1.0 if broken else 0.0,  # no proof completed, or a deadlock
    }
    why = ""
    if values["oom_risk_upper95"] > 0:
        why = f"OOM risk up to {100 * upper:.1f} % (95% bound) > {100 * max_oom_risk:g} %"
    elif values["peak_host_rss_gib"] > 0:
        why = f"peak host RSS {peak / GiB:.1f} GiB > {limit / GiB:.1f} GiB"
    elif broken:
        why = "deadlock" if result.deadlocks else "no proof completed"
    return values, why


def suggest(trial: Any, grid: Grid) -> Point:
    """The point an Optuna trial proposes: a stepped range as an ordered integer space,
    a list as choices, a single value fixed."""
    values: dict[str, Any] = {}
    for axis in grid.axes:
        if not axis.varies:
            values[axis.name] = axis.values[0]
        elif axis.span is not None:
            low, high, step = axis.span
            values[axis.name] = trial.suggest_int(axis.name, low, high, step=step)
        else:
            values[axis.name] = trial.suggest_categorical(axis.name, list(axis.values))
    return Point(**values)


#: The most trials one tune runs: each is a Monte Carlo of its own.
MAX_TRIALS = 100_000


def check_search(grid: Grid, trials: int, batch: int) -> None:
    """Refuse a search that cannot run, before a cluster is started for it."""
    if not 1 <= trials <= MAX_TRIALS:
        raise UserError(f"--trials: must be in 1..{MAX_TRIALS:,}, got {trials:,}")
    if not 1 <= batch <= MAX_TRIALS:
        raise UserError(f"--batch: must be in 1..{MAX_TRIALS:,}, got {batch:,}")
    if not grid.varying():
        raise UserError("nothing to tune: give at least one axis a range or a list (e.g. --gpu-workers 1..4)")


def tune(
    runner: PointRunner,
    grid: Grid,
    trials: int,
    *,
    max_oom_risk: float,
    max_host_ram: int | None = None,
    sampler_seed: int = 0,
    batch: int = DEFAULT_BATCH,
    on_trial: Callable[..., None] | None = None,
) -> TuneResult:
    """Search `grid` for the feasible point with the most proofs per hour in `trials`
    trials (fewer when every point of the space has been run)."""
    import optuna

    check_search(grid, trials, batch)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        # constant_liar is marked experimental; its use here is the documented one.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            seed=sampler_seed,
            n_startup_trials=min(10, trials),
            constant_liar=True,  # a batch's pending trials steer the others apart
        )
        study = optuna.create_study(direction="maximize", sampler=sampler)
        done: dict[Point, PointResult] = {}
        out: list[Trial] = []
        while len(out) < trials and len(done) < grid.size:
            asked = [study.ask() for _ in range(min(batch, trials - len(out)))]
            points = [suggest(t, grid) for t in asked]
            todo = list(dict.fromkeys(p for p in points if p not in done))
            for r in runner.run(todo):
                done[r.point] = r
            for t, p in zip(asked, points, strict=True):
                r = done[p]
                values, why = constraints(r, max_oom_risk, max_host_ram)
                for key, value in values.items():
                    t.set_constraint(key, value)
                study.tell(t, r.proofs_per_hour or 0.0)
                out.append(Trial(t.number, p, r, not why, why))
                if on_trial is not None:
                    on_trial(out[-1])
    feasible = [i for i, t in enumerate(out) if t.feasible]
    best = max(feasible, key=lambda i: (out[i].proofs_per_hour, -i), default=None)
    return TuneResult(out, best, len(done), max_oom_risk, max_host_ram, runner.runs, sampler_seed, batch)
