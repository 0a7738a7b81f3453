"""What a stage meets in the pipeline, and how its time follows it: each span of one
stage in real runs, read against the spans of every other stage that overlapped it.

A stage that runs 30% over its calibrated time in the pipeline may be losing to the
syntheses (other processes), to other driver threads (prep, the epilogue), or to the
device (another worker's kernels).  For every span of STAGE in the runs of one size
this measures, per other stage, how much of the span it overlapped (the overlapped
seconds of all its spans over the span's length: 2.0 is two of them throughout), and
fits the span's stretch over its time alone as a sum of those overlaps, by least
squares with no intercept:

    stretch - 1 = sum over stages s of c_s * overlap_s

c_s reads as "a whole span beside one s adds c_s of the stage's time".  It is a
correlation over the runs' own mix, not an experiment: stages that run together in
every design (b_g2_msm and the next worker's kernels) share their credit.  Use it to
choose what calibrate should time a stage beside, not as a profile's parameter: on
four leases it credited each synthesis result on its way back with 2-21% of a driver
stage's time, and calibrate, timing the stages beside results coming back and nothing
else, read 0 (docs/validation-log.md, the thirty-first lease).

    python experiments/stage_overlap.py --profile P.toml --stage prep --size 2^22 RUNS.json...

It also prints the spans that ran with nothing beside them, against the calibrated time:
the fit's premise, that the stage alone in the pipeline takes what calibrate timed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from simgpu.profile import load_profile
from simgpu.units import parse_count

STAGES = ("synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue")
#: A stage that overlapped the spans less than this on average is fitted but not shown.
RARE = 0.05
#: A span whose overlaps add up to less than this ran with nothing beside it.
LONE = 0.01


def overlaps(
    spans: list[list], stage: str, stages: tuple[str, ...] = STAGES
) -> list[tuple[str, float, list[float]]]:
    """(configuration, seconds, overlap per `stages`) of every span of `stage` in `spans`
    (a run's `stage_spans`: proof, partition, stage, worker, start, end)."""
    out = []
    for p, i, st, _, a, b in spans:
        if st != stage or b <= a:
            continue
        seen = dict.fromkeys(stages, 0.0)
        for p2, i2, st2, _, a2, b2 in spans:
            if st2 in seen and not (p2 == p and i2 == i and st2 == st):
                seen[st2] += max(0.0, min(b, b2) - max(a, a2))
        out.append((stage, b - a, [seen[s] / (b - a) for s in stages]))
    return out


def split_synthesis(spans: list[list], transfer_share: float) -> list[list]:
    """`spans` with each synthesis span cut in two, `synthesis.compute` then
    `synthesis.transfer` (its last `transfer_share` of the span: the result's way back to
    the driver process ends the span).  The runs record the whole span only, so the cut
    is the calibrated phases' proportion, not a measured instant."""
    out = []
    for p, i, st, w, a, b in spans:
        if st != "synthesis":
            out.append([p, i, st, w, a, b])
            continue
        cut = b - transfer_share * (b - a)
        out += [[p, i, "synthesis.compute", w, a, cut], [p, i, "synthesis.transfer", w, cut, b]]
    return out


def fit(rows: list[tuple[str, float, list[float]]], alone: float) -> tuple[np.ndarray, float]:
    """The coefficients c_s (in STAGES' order) of stretch - 1 = sum c_s * overlap_s over
    `rows` (from `overlaps`), by least squares with no intercept, and the fit's R^2."""
    x = np.array([o for _, _, o in rows])
    y = np.array([s / alone - 1 for _, s, _ in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    spread = float(((y - y.mean()) ** 2).sum())
    return coef, (1 - float(resid @ resid) / spread) if spread > 0 else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="gpu_validation.py measure --json files")
    ap.add_argument("--profile", required=True, help="the lease's calibration: the stage's time alone")
    ap.add_argument("--stage", required=True, choices=STAGES)
    ap.add_argument("--size", required=True, help="constraints, e.g. 2^22")
    ap.add_argument("--capped", action="store_true", help="read the runs under a VRAM cap too")
    ap.add_argument(
        "--split-synthesis",
        action="store_true",
        help="read a synthesis beside as its compute and its result's way back, cut in the "
        "calibrated phases' proportion",
    )
    ap.add_argument(
        "--alone",
        choices=("calibrated", "lone"),
        default="calibrated",
        help="the time alone the stretches are read from: the profile's, or the median of "
        "the spans that ran with nothing beside them",
    )
    args = ap.parse_args()
    from gpu_validation import read_runs  # beside this script

    n = parse_count(args.size, "--size", minimum=1)
    resolved = load_profile(args.profile).resolve(n)
    st = resolved.stages[args.stage]
    alone = sum(ph.seconds for ph in st.phases)
    stages = STAGES
    if args.split_synthesis:
        phases = {ph.name: ph.seconds for ph in resolved.stages["synthesis"].phases}
        share = phases.get("transfer", 0.0) / sum(phases.values())
        stages = ("synthesis.compute", "synthesis.transfer", *STAGES[1:])
        print(f"synthesis cut: its last {share:.0%} the result's way back")
    rows, by_cfg = [], {}
    for f in args.runs:
        runs = read_runs(f)
        if not isinstance(runs, list):  # a lease's other JSON (calibrate's pairings, say)
            print(f"{f}: not a file of runs, skipped")
            continue
        for run in runs:
            if run["constraints"] != n or (run.get("vram_cap") and not args.capped):
                continue
            spans = run["stage_spans"]
            if args.split_synthesis:
                spans = split_synthesis(spans, share)
            got = overlaps(spans, args.stage, stages)
            rows += got
            by_cfg.setdefault(run["label"], []).extend(s for _, s, _ in got)
    if not rows:
        raise SystemExit(f"no spans of {args.stage} at {n:,} constraints in those runs")
    lone = [sec for _, sec, o in rows if sum(o) < LONE]
    base = float(np.median(lone)) if args.alone == "lone" and lone else alone
    coef, r2 = fit(rows, base)
    x = np.array([o for _, _, o in rows])
    mean = float(np.mean([s for _, s, _ in rows]))
    print(
        f"{args.stage} at {n:,}: {len(rows)} spans, mean {mean * 1e3:.1f} ms against "
        f"{alone * 1e3:.1f} alone ({mean / alone - 1:+.0%}); R^2 of the fit {r2:.2f}, read from "
        f"{base * 1e3:.1f} ms alone ({args.alone})"
    )
    if lone:  # the fit's premise: does the stage take its calibrated time with nothing beside it?
        print(
            f"with nothing beside (overlap under {LONE}): {len(lone)} spans, median "
            f"{np.median(lone) * 1e3:.1f} ms, mean {np.mean(lone) * 1e3:.1f} ms, against the "
            f"calibrated {alone * 1e3:.1f} ({np.median(lone) / alone - 1:+.0%} at the median)"
        )
    print("| beside | mean overlap | adds, per whole span beside one |")
    print("|---|---:|---:|")
    rare = []
    for s, m, c in zip(stages, x.mean(axis=0), coef, strict=True):
        if m >= RARE:
            print(f"| {s} | {m:.2f} | {c:+.0%} |")
        elif m > 0:
            rare.append(s)
    if rare:  # a coefficient over a few overlaps is any number the noise makes it
        print(f"overlapped too rarely to read (mean under {RARE}): {', '.join(rare)}")
    print(
        "by configuration (ms): "
        + ", ".join(f"{k} {np.mean(v) * 1e3:.0f}" for k, v in sorted(by_cfg.items()))
    )


if __name__ == "__main__":
    main()
