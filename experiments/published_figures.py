"""Every figure of the cuzk data sheet beside what the seed profile predicts for it.

The sheet (docs/data/cuzk-rtx5070ti.md) publishes throughputs, a peak host RSS, stage
times alone and under load, and the Phase 10 outcome.  This script runs each figure's
setting on the model, prints published vs predicted and the error, and says whether the
figure meets its target (10% for throughputs and peak RSS, 15% for the Phase 10
throughput and for stage times; for the Phase 10 failures, that the 95% interval of the
predicted share of failed proofs contains the published 1/3).  Figures the profile does
not keep, because the sheet's figures disagree, are printed with the reason and no
target.  tests/test_published_figures.py holds every kept figure to its target.

    python experiments/published_figures.py            # the table
    python experiments/published_figures.py --write    # ... and into docs/validation.md
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgpu.config import PipelineConfig
from simgpu.model.sim import SimRuntime
from simgpu.profile import Profile, load_profile
from simgpu.report.metrics import RunSummary, summarize, wilson_interval
from simgpu.sched.registry import resolve_design

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "simgpu" / "profile" / "profiles" / "seed-rtx5070ti.toml"
VALIDATION = ROOT / "docs" / "validation.md"
GiB = 1 << 30

#: Monte Carlo runs per setting: noise moves sustained runs by well under 1%; the Phase
#: 10 failures are a proportion, so it gets enough runs for a useful interval.
RUNS = 3
PHASE10_RUNS = 40


@dataclass(frozen=True)
class Setting:
    """One run of the daemon: a design and its configuration."""

    design: str
    config: dict[str, Any]

    def label(self) -> str:
        c = self.config
        parts = [self.design, f"c={c['proofs']} j={c['concurrency']}"]
        parts.append(f"gw={c.get('gpu_workers_per_device', 2)}")
        parts.append(f"pw={c.get('partition_workers', 10)}")
        if "vram" in c:
            parts.append(f"{c['vram'] // GiB} GiB")
        return ", ".join(parts)


@dataclass(frozen=True)
class Figure:
    """A published figure: what was measured, in which setting, and how it is read off a
    prediction (`measure` turns the runs' summaries into the predicted value)."""

    name: str
    setting: Setting
    published: float
    unit: str
    measure: Callable[[list[RunSummary]], float]
    target: float | None = 0.10  # relative; None: not kept (see `note`)
    note: str = ""
    #: For a kept figure the model misses: the band its prediction is documented in, so a
    #: drift still fails the test (docs/validation.md says why it misses).
    documented: tuple[float, float] | None = None
    runs: int = RUNS
    kind: str = "throughput"
    #: where the design log publishes it, for the figures the sheet holds back
    source: str = ""


def throughput(runs: list[RunSummary]) -> float:
    thr = [r.throughput for r in runs if r.throughput is not None]
    return statistics.mean(thr) if thr else float("nan")


def peak_rss_gib(runs: list[RunSummary]) -> float:
    return max(r.peak_host for r in runs) / GiB


def stage_mean(*stages: str) -> Callable[[list[RunSummary]], float]:
    """Mean duration of the named stages summed per partition (e.g. the GPU part under
    the lock is prestage + kernels)."""

    def measure(runs: list[RunSummary]) -> float:
        return sum(statistics.mean(x for r in runs for x in r.stage_seconds[s]) for s in stages)

    return measure


#: cuzk's Phase 10 run lost one of its three proofs.
PHASE10_LOST = 1


def throughput_losing(lost: int) -> Callable[[list[RunSummary]], float]:
    """Throughput of the runs that lost exactly `lost` proofs.  The published Phase 10
    figure is one run's, a run that lost one proof, so it is read off the runs like it:
    the mean over every run would mix in the runs that lost none, which end sooner, and
    match the figure on average while the runs that look like cuzk's miss it."""

    def measure(runs: list[RunSummary]) -> float:
        return throughput([r for r in runs if r.failed == lost])

    return measure


def failed_share(runs: list[RunSummary]) -> float:
    return sum(r.failed for r in runs) / sum(r.submitted for r in runs)


def losing_runs(runs: list[RunSummary]) -> tuple[float, tuple[float, float]]:
    """The share of runs that lose at least one proof, with its 95% interval."""
    k = sum(1 for r in runs if r.failed)
    return k / len(runs), wilson_interval(k, len(runs))


# The settings the sheet gives.  cuzk's defaults: 2 GPU workers, 10 partition workers;
# the log gives j only for the c=20 run, so for c = 5..15 j = c, as the sheet says.
ISOLATION = Setting("single-lock", dict(proofs=3, concurrency=1, gpu_workers_per_device=1))
ALONE = Setting("single-lock", dict(proofs=1, concurrency=1))
PHASE9 = {c: Setting("single-lock", dict(proofs=c, concurrency=min(c, 15))) for c in (5, 10, 15, 20)}
# Phase 8 held the GPU lock through b_g2_msm: the `serial` design.
PHASE8 = {
    pw: Setting("serial", dict(proofs=5, concurrency=3, partition_workers=pw))
    for pw in (10, 12, 15, 18, 20, 30)
}
PHASE10 = Setting("two-lock", dict(proofs=3, concurrency=3, gpu_workers_per_device=3, vram=16 * GiB))

ISOLATION_NOTE = (
    "not kept: one proof at a time takes at least its synthesis (35.5 s, sheet) plus its GPU "
    "tail, so 32.1 s/proof contradicts the stage table; the profile keeps the stage times "
    "and the sustained runs"
)
TWENTY_NOTE = (
    "not kept: if 20 syntheses took only 1.3x as long as 10, 20 partition workers would "
    "have run Phase 8 ~1.5x faster; it ran as fast as 10 (the profile keeps the sweep)"
)

FIGURES: list[Figure] = [
    Figure("Phase 9 isolation, one GPU worker", ISOLATION, 32.1, "s/proof", throughput, None, ISOLATION_NOTE),
    *(
        Figure(f"Phase 9 sustained, c={c}", PHASE9[c], pub, "s/proof", throughput)
        for c, pub in ((5, 41.4), (10, 38.7), (15, 38.2), (20, 38.0))
    ),
    *(
        Figure(f"Phase 8 sweep, partition_workers={pw}", PHASE8[pw], pub, "s/proof", throughput)
        for pw, pub in ((10, 43.5), (12, 43.5), (15, 44.8), (18, 43.8), (20, 44.9), (30, 60.4))
    ),
    Figure("one proof alone, peak host RSS", ALONE, 203.0, "GiB", peak_rss_gib, kind="host RSS"),
    Figure(
        "Phase 10, completed throughput",
        PHASE10,
        77.2,
        "s/proof",
        throughput_losing(PHASE10_LOST),
        0.15,
        runs=PHASE10_RUNS,
        kind="Phase 10",
    ),
    Figure(
        "Phase 10, share of proofs failed",
        PHASE10,
        1 / 3,
        "",
        failed_share,
        target=0.0,
        runs=PHASE10_RUNS,
        kind="Phase 10",
        note=(
            "missed: the model's race needs a third worker to pre-stage in the last 1.5 s of "
            "another's kernels while a second waits; once the slow fallbacks keep the GPU busy "
            "that happens only at the first burst of a proof that arrives at an idle device "
            "(see 'The miss' in docs/validation.md)"
        ),
        documented=(0.08, 0.26),
    ),
    # stage times: alone (the isolation run, where nothing else runs beside them) and
    # under load (the c=10 sustained run)
    Figure("synthesis, 10 at once alone", ISOLATION, 35.5, "s", stage_mean("synthesis"), 0.15, kind="stage"),
    Figure(
        "synthesis, 20 at once",
        PHASE8[20],
        47.5,
        "s",
        stage_mean("synthesis"),
        None,
        TWENTY_NOTE,
        kind="stage",
    ),
    Figure("prep alone", ISOLATION, 1.7, "s", stage_mean("prep"), 0.15, kind="stage"),
    Figure("prep under load", PHASE9[10], 1.9, "s", stage_mean("prep"), 0.15, kind="stage"),
    Figure(
        "GPU part under the lock", ISOLATION, 1.82, "s", stage_mean("prestage", "kernels"), 0.15, kind="stage"
    ),
    Figure("b_g2_msm alone", ISOLATION, 0.38, "s", stage_mean("b_g2_msm"), 0.15, kind="stage"),
    Figure("b_g2_msm under load", PHASE9[10], 0.48, "s", stage_mean("b_g2_msm"), 0.15, kind="stage"),
]


#: Figures cuzk's design log publishes that the sheet holds back, to test whether the
#: mechanisms generalize.  Looked up (2026-12-05) after the profile was fixed, from the
#: public repository (filecoin-project/curio: extern/cuzk/cuzk-project.md and the
#: Phase 8-11 proposals in its history); none of them moved a parameter, and none has a
#: target: the table says how far each is, nothing more.  The log's Phase 8 TIMELINE
#: figure (37.4 s/proof, pw=10, 5 sectors) is left out: it gives no j, and it contradicts
#: the sweep's 43.5 at the same pw; Phase 11-12 ran other code (split API, pinned pool).
HELD_OUT: list[Figure] = [
    *(
        Figure(
            f"Phase 9, one GPU worker, c={c} j={j}",
            Setting("single-lock", dict(proofs=c, concurrency=j, gpu_workers_per_device=1)),
            pub,
            "s/proof",
            throughput,
            None,
            kind="held out",
            source="cuzk-project.md, Phase 9 results",
        )
        for c, j, pub in ((15, 10, 42.9), (15, 15, 41.3), (20, 15, 41.6))
    ),
    Figure(
        "Phase 9, two GPU workers, c=5 j=3",
        Setting("single-lock", dict(proofs=5, concurrency=3)),
        41.0,
        "s/proof",
        throughput,
        None,
        kind="held out",
        source="cuzk-project.md, Phase 9 results",
    ),
    Figure(
        "Phase 10, one proof alone (completed runs)",
        Setting("two-lock", dict(proofs=1, concurrency=1, gpu_workers_per_device=3, vram=16 * GiB)),
        72.5,
        "s/proof",
        throughput,
        None,
        runs=PHASE10_RUNS,
        kind="held out",
        source="c2-optimization-proposal-11.md: 'proof verified with gw=3, single proof: 72.5s'",
    ),
]


def simulate(profile: Profile, setting: Setting, runs: int) -> list[RunSummary]:
    """`runs` seeded runs of one setting (seeds 0..runs-1)."""
    cfg = PipelineConfig().with_overrides(**setting.config)
    design = resolve_design(setting.design).fn
    out = []
    for seed in range(runs):
        rt = SimRuntime(profile, cfg, profile.workload(), seed=seed, record_phases=False)
        out.append(summarize(rt.run(design)))
    return out


@dataclass
class Row:
    figure: Figure
    predicted: float
    runs: list[RunSummary] = field(repr=False)
    interval: tuple[float, float] | None = None

    @property
    def error(self) -> float:
        return self.predicted / self.figure.published - 1

    @property
    def met(self) -> bool | None:
        t = self.figure.target
        if t is None:
            return None
        if self.interval is not None:
            return self.interval[0] <= self.figure.published <= self.interval[1]
        return abs(self.error) <= t

    @property
    def gpu_busy(self) -> float:
        return statistics.mean(r.busy_frac[0] for r in self.runs)

    @property
    def host_oom(self) -> bool:
        return any(r.host_oom for r in self.runs)


def table(profile: Profile | None = None, runs: int | None = None) -> list[Row]:
    """Every figure's prediction.  `runs` overrides the Monte Carlo size of each setting
    (the Phase 10 ones keep at least theirs' share of it)."""
    profile = profile or load_profile(PROFILE)
    cache: dict[tuple[Setting, int], list[RunSummary]] = {}
    rows = []
    for fig in [*FIGURES, *HELD_OUT]:
        n = fig.runs if runs is None else max(runs, fig.runs if fig.kind == "Phase 10" else runs)
        key = (fig.setting.design, tuple(sorted(fig.setting.config.items())), n)
        if key not in cache:
            cache[key] = simulate(profile, fig.setting, n)
        result = cache[key]
        row = Row(fig, fig.measure(result), result)
        if fig.measure is failed_share:
            failed = sum(r.failed for r in result)
            row.interval = wilson_interval(failed, sum(r.submitted for r in result))
        rows.append(row)
    return rows


def _value(row: Row) -> str:
    f = row.figure
    if row.interval is not None:
        lo, hi = row.interval
        return f"{row.predicted:.2f} [{lo:.2f}, {hi:.2f}]"
    return f"{row.predicted:.2f}" if f.unit == "s" else f"{row.predicted:.1f}"


def _published(row: Row) -> str:
    f = row.figure
    if f.measure is failed_share:
        return "1/3"
    if f.name.startswith("synthesis, 20"):
        return "46-49"
    return f"{f.published:g}"


def markdown(rows: list[Row]) -> str:
    head = (
        "| figure | setting | published | predicted | error | target | met | GPU busy |\n"
        "|---|---|---:|---:|---:|---|---|---:|\n"
    )
    held = [r for r in rows if r.figure.kind == "held out"]
    rows = [r for r in rows if r.figure.kind != "held out"]
    lines = []
    for r in rows:
        f = r.figure
        unit = f" {f.unit}" if f.unit else ""
        if f.target is None:
            target, met = "not kept", "-"
        elif r.interval is not None:
            target, met = "interval contains 1/3", "yes" if r.met else "**no**"
        else:
            target, met = f"{f.target:.0%}", "yes" if r.met else "**no**"
        err = "-" if r.interval is not None else f"{r.error:+.1%}"
        lines.append(
            f"| {f.name} | {f.setting.label()} | {_published(r)}{unit} | {_value(r)}{unit} | {err} "
            f"| {target} | {met} | {r.gpu_busy:.0%} |"
        )
    kept = [r for r in rows if r.figure.target is not None]
    missed = [r.figure.name for r in kept if not r.met]
    thr = [abs(r.error) for r in rows if r.figure.kind == "throughput" and r.figure.target is not None]
    oom = [r.figure.name for r in rows if r.figure.kind == "throughput" and r.host_oom]
    notes = [f"- {r.figure.name}: {r.figure.note}" for r in rows if r.figure.note]
    for r in rows:
        if r.figure.measure is failed_share:
            p, (lo, hi) = losing_runs(r.runs)
            notes.append(
                f"- Phase 10, runs that lose at least one proof: {p:.2f} [{lo:.2f}, {hi:.2f}] "
                f"of {len(r.runs)} runs (the seed's one run lost one)"
            )
            by_lost = {k: [x for x in r.runs if x.failed == k] for k in sorted({x.failed for x in r.runs})}
            notes.append(
                "- Phase 10, completed throughput by proofs lost (the figure is read on the runs "
                "that lost one, as cuzk's did): "
                + "; ".join(
                    f"{k} lost: {len(v)} runs"
                    + (f", {throughput(v):.1f} s/proof" if any(x.throughput for x in v) else "")
                    for k, v in by_lost.items()
                )
                + f"; every run together {throughput(r.runs):.1f} s/proof"
            )
    summary = (
        f"\n{len(kept) - len(missed)} of {len(kept)} kept figures meet their targets"
        + (f" (missed: {'; '.join(missed)})" if missed else "")
        + f"; median throughput error {statistics.median(thr):.1%} over the {len(thr)} kept throughputs; "
        + ("no host OOM in any throughput run." if not oom else f"host OOM in: {', '.join(oom)}.")
        + "\n\n"
        + "\n".join(notes)
        + "\n"
    )
    return head + "\n".join(lines) + "\n" + summary + held_out_markdown(held)


def held_out_markdown(rows: list[Row]) -> str:
    """The figures the sheet holds back, predicted and never fitted (HELD_OUT)."""
    if not rows:
        return ""
    lines = [
        "\nFigures the sheet holds back (HELD_OUT: looked up after the profile was fixed; no target,",
        "none fitted):\n",
        "| figure | setting | published | predicted | error | GPU busy | where |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        f = r.figure
        lost = sum(x.failed for x in r.runs)
        pred = f"{r.predicted:.1f} {f.unit}" + (f" ({lost} of {len(r.runs)} runs failed)" if lost else "")
        lines.append(
            f"| {f.name} | {f.setting.label()} | {f.published:g} {f.unit} | {pred} | {r.error:+.1%} "
            f"| {r.gpu_busy:.0%} | {f.source} |"
        )
    errs = [abs(r.error) for r in rows]
    lines.append(
        f"\nMedian error {statistics.median(errs):.1%} over the {len(rows)} held-back figures "
        f"(largest {max(errs):.1%}).\n"
    )
    return "\n".join(lines)


MARK_BEGIN, MARK_END = "<!-- published-figures -->", "<!-- /published-figures -->"


def write_validation(text: str, path: Path = VALIDATION) -> None:
    """Replace the marked section of docs/validation.md with `text`."""
    doc = path.read_text()
    if MARK_BEGIN not in doc:
        raise SystemExit(f"{path}: no {MARK_BEGIN} section to write")
    before, rest = doc.split(MARK_BEGIN, 1)
    _, after = rest.split(MARK_END, 1)
    path.write_text(f"{before}{MARK_BEGIN}\n{text}{MARK_END}{after}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=str(PROFILE))
    ap.add_argument("--write", action="store_true", help="write the table into docs/validation.md")
    args = ap.parse_args()
    rows = table(load_profile(args.profile))
    text = markdown(rows)
    print(text)
    if args.write:
        write_validation(text)
        print(f"wrote {VALIDATION.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
