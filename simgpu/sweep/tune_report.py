"""What a finished tune shows and writes: the best configuration (table, JSON) and its
cuzk-style TOML, whose header says how `simgpu predict` reproduces the same numbers."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import fmt_bytes
from simgpu.report.document import price_fields
from simgpu.sweep.cuzk_toml import config_toml
from simgpu.sweep.grid import Grid
from simgpu.sweep.tune import Trial, TuneResult

#: Version of the tune document; bump when a field changes meaning or disappears.
SCHEMA = "simgpu.tune/1"


def reproduce_command(path: Path, profile: str, trial: Trial, runs: int) -> str:
    """The predict command that gives the same numbers as the trial."""
    args = ["simgpu", "predict", "--config", str(path), "--profile", profile]
    args += ["--design", trial.point.design, "--runs", str(runs)]
    return shlex.join(args)


def write_best(path: Path, trial: Trial, base: PipelineConfig, profile: str, result: TuneResult) -> None:
    """The best trial's configuration as cuzk-style TOML, with how it was found on top."""
    r = trial.result
    header = "\n".join(
        [
            f"simgpu tune: the best of {len(result.trials)} trials ({result.evaluated} configurations run; "
            f"sampler seed {result.sampler_seed}, batch {result.batch})",
            f"profile {profile}; design {trial.point.design}; {result.runs} runs per configuration, "
            f"seeds {base.seed}..{base.seed + result.runs - 1}",
            f"{r.proofs_per_hour:.2f} proofs/hour ({r.throughput:.3f} s/proof); "
            f"OOM risk {100 * r.oom_risk:.1f} % "
            f"(95% upper bound {100 * r.oom_upper:.1f} % <= {100 * result.max_oom_risk:g} %); "
            f"peak host RSS {fmt_bytes(r.peak_rss or 0)}",
            "The design and the run count are not TOML keys; the same numbers again:",
            f"  {reproduce_command(path, profile, trial, result.runs)}",
        ]
    )
    path.write_text(config_toml(trial.point.config(base), header=header))


def _trial_doc(t: Trial) -> dict[str, Any]:
    r = t.result
    return {
        "number": t.number,
        **t.point.axes(),
        "feasible": t.feasible,
        "infeasible_because": t.why or None,
        "throughput_s_per_proof": r.throughput,
        "proofs_per_hour": r.proofs_per_hour,
        "oom_risk": r.aggregate["oom_risk"] if r.aggregate else None,
        "peak_rss_bytes": r.peak_rss,
        "error": r.error,
    }


def tune_document(
    result: TuneResult,
    profile: str,
    workload: Workload,
    base: PipelineConfig,
    price_per_hour: float | None,
    toml_path: Path | None,
) -> dict[str, Any]:
    """The tune's JSON document (schema in the README)."""
    best = result.best_trial
    best_doc = None
    if best is not None:
        best_doc = _trial_doc(best)
        if price_per_hour is not None:
            best_doc.update(price_fields(best.result.throughput, price_per_hour))
        best_doc["toml"] = str(toml_path) if toml_path else None
        best_doc["reproduce"] = reproduce_command(toml_path or Path("best.toml"), profile, best, result.runs)
    return {
        "schema": SCHEMA,
        "mode": "tune",
        "profile": profile,
        "workload": {
            "name": workload.name,
            "partitions": workload.partitions,
            "constraints": workload.constraints,
        },
        "runs": result.runs,
        "seeds": [base.seed, base.seed + result.runs - 1],
        "sampler": {"name": "TPESampler", "seed": result.sampler_seed, "batch": result.batch},
        "constraints": {"max_oom_risk_upper95": result.max_oom_risk, "max_host_ram": result.max_host_ram},
        "trials_run": len(result.trials),
        "configurations_run": result.evaluated,
        "best": best_doc,
        "trials": [_trial_doc(t) for t in result.trials],
    }


def print_tune(
    result: TuneResult,
    grid: Grid,
    profile: str,
    price_per_hour: float | None,
    toml_path: Path | None,
    console: Console,
) -> None:
    """Print a tune's outcome: how many trials were feasible, then the best configuration as
    a table and how to reproduce it (or, with none feasible, the commonest reasons)."""
    feasible = sum(1 for t in result.trials if t.feasible)
    console.print(
        f"simgpu tune on {profile}: {len(result.trials)} trials, {result.evaluated} configurations run "
        f"({result.runs} runs each), {feasible} trial(s) feasible",
        markup=False,
    )
    best = result.best_trial
    if best is None:
        reasons: dict[str, int] = {}
        for t in result.trials:
            reasons[t.why] = reasons.get(t.why, 0) + 1
        for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
            console.print(f"  {n} x infeasible: {why}", markup=False)
        return
    r = best.result
    t = Table(title=f"best configuration (trial {best.number})", header_style="bold")
    t.add_column("key")
    t.add_column("value", justify="right")
    for axis in grid.axes:
        t.add_row(axis.name + ("" if axis.varies else " (fixed)"), axis.label(getattr(best.point, axis.name)))
    t.add_row("throughput", f"{r.throughput:.2f} s/proof")
    t.add_row("proofs per hour", f"{r.proofs_per_hour:.1f}")
    if price_per_hour is not None:
        each = price_fields(r.throughput, price_per_hour)["price_per_proof"]
        t.add_row(f"$ per proof (at ${price_per_hour:g}/h)", "-" if each is None else f"${each:.4f}")
    lo, hi = r.aggregate["oom_risk"]["ci95"] if r.aggregate else (1.0, 1.0)
    t.add_row(
        "OOM risk",
        f"{100 * r.oom_risk:.0f} % (95% CI {100 * lo:.1f}-{100 * hi:.1f} %, "
        f"limit {100 * result.max_oom_risk:g} %)",
    )
    limit = "" if result.max_host_ram is None else f" (limit {fmt_bytes(result.max_host_ram)})"
    t.add_row("peak host RSS", fmt_bytes(r.peak_rss or 0) + limit)
    console.print(t)
    if toml_path is not None:
        console.print(f"wrote {toml_path}; the same numbers again:", markup=False)
        console.print(f"  {reproduce_command(toml_path, profile, best, result.runs)}", markup=False)
