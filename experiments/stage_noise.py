"""Each stage's spread under load, on the card and in the model, beside the profile's.

A stage's `noise_cv` is what calibrate saw of its calls' spread with one partition alone
on an idle host, six repeats; the model draws each call's time from a lognormal of that
spread.  Under load the calls also spread by contention, which the model makes itself
(the GPU stages' share of the device, the host stages' of the cores).  Where the card's
spread under load is wider than the model's, something the model does not have spreads
it: on the VMs lent so far the host's cores flip between speeds every 0.1-0.4 s
(experiments/host_modes.py), which a six-call reading alone averages away.

The spread matters where an outcome is a race.  A capped pool refuses a request only when
two workers' stages overlap at one point of a cycle (experiments/pool_replay.py
--holders), and how often they do follows how widely the stages before them spread.

This reads a lease's completed runs (their `stage_spans`: every call of every stage),
pools each stage's calls over them, and prints the coefficient of variation on the card
beside the model's calls in the same configurations and the profile's `noise_cv`:

    python experiments/stage_noise.py --profile docs/data/h100-2026-12-07/call3/h100-cupy-key.toml \\
        docs/data/h100-2026-12-07b/call1/traced-2176-*.json.gz

Where calibrate kept every call of its k syntheses at once (profiles calibrated since
2026-12-07), their spread follows: the reading the model could take the host's spread
from, set beside the pipeline's.

With `--as-card synthesis prep --out p.toml` it also writes the profile with those
stages' `noise_cv` set to the card's spread under load, for a what-if with
gpu_validation.py predict --profile p.toml (the rest of the file as it was).  With
`--as-card-means kernels b_g2_msm prep` it scales those stages' times alone instead, each
by the card's mean under load over the model's (the median over the configurations read),
contention as calibrated: the what-if for a race that turns on where two workers' stages
meet rather than on how widely they spread (docs/validation-log.md, "The fifty-third
lease").
"""

from __future__ import annotations

import argparse
import re
import statistics
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpu_validation import config_of, read_runs  # beside this script

from simgpu.calibrate.measure import spread
from simgpu.calibrate.refit import contention_of
from simgpu.config import Workload
from simgpu.model.montecarlo import predict
from simgpu.profile import load_profile
from simgpu.profile.tomlwrite import Inline, dumps
from simgpu.sched.registry import resolve_design

#: Calls of one stage, by configuration: a spread is read within a configuration, since
#: a grid's sizes and designs differ in their means far more than calls spread.
Calls = dict[tuple, list[float]]


def configuration(r: dict[str, Any]) -> tuple:
    return (r["constraints"], r["design"], r["gpu_workers"], r["concurrency"], r["vram_cap"])


def card_calls(runs: list[dict[str, Any]]) -> dict[str, Calls]:
    """Every call's seconds, by stage and configuration, over the runs that completed
    without running out of memory (a refused call ends early and says nothing of the
    stage's time)."""
    calls: dict[str, Calls] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r["measured"]["oom_events"]:
            continue
        for _proof, _part, stage, _device, t0, t1 in r["stage_spans"]:
            calls[stage][configuration(r)].append(t1 - t0)
    return {stage: dict(by) for stage, by in calls.items()}


def within(calls: Calls) -> tuple[float, int]:
    """The spread of a stage's calls within their configurations: each call over its
    configuration's mean, pooled; and how many calls."""
    ratios = [x / m for xs in calls.values() if (m := statistics.fmean(xs)) for x in xs]
    return spread(ratios), len(ratios)


def _cell(calls: Calls) -> str:
    cv, n = within(calls)
    return f"{cv:.3f} ({n})"


def model_calls(profile: Any, runs: list[dict[str, Any]], n_runs: int) -> dict[str, Calls]:
    """The model's calls, by stage and configuration, in the configurations of `runs`
    (one prediction of `n_runs` Monte Carlo runs each), over its runs that completed
    without running out of memory."""
    ns = argparse.Namespace(proofs=6, partition_workers=8, retries=0)
    calls: dict[str, Calls] = defaultdict(lambda: defaultdict(list))
    seen = set()
    for r in runs:
        key = configuration(r)
        if key in seen or r["measured"]["oom_events"]:
            continue
        seen.add(key)
        proofs = r["measured"]["proofs"]
        ns.proofs = proofs["submitted"] + proofs["not_started"]  # what the run was asked for
        cfg = config_of(ns, r["gpu_workers"], r["concurrency"], r["vram_cap"])
        wl = Workload(f"groth16-n{r['constraints']}", 4, r["constraints"])
        p = predict(profile, cfg, wl, resolve_design(r["design"]), runs=n_runs)
        for s in p.summaries:
            if not s.oom_events:
                for stage, xs in s.stage_seconds.items():
                    calls[stage][key].extend(xs)
    return {stage: dict(by) for stage, by in calls.items()}


def at_once_spread(profile: Path) -> list[str]:
    """Calibrate's k syntheses at once, the spread of their calls beside each other
    ([calibration.contention.synthesis_at_once_calls]; profiles calibrated before it was
    kept have none), as a line to set beside the card's synthesis under load."""
    with open(profile, "rb") as fh:
        doc = tomllib.load(fh)
    if "contention" not in doc.get("calibration", {}):
        return []
    calls = contention_of(doc).synthesis_calls
    if not calls:
        return []
    return [
        "calibrate's syntheses at once, spread of their calls: "
        + ", ".join(f"{k} at once {spread(xs):.3f} ({len(xs)})" for k, xs in sorted(calls.items()))
    ]


def with_noise(text: str, noise: dict[str, float]) -> str:
    """A profile's TOML `text` with each named stage's `noise_cv` set (added to its
    [stages.NAME] table where it had none), every other line as it was."""
    out, stage, done = [], None, set()
    for line in text.splitlines(keepends=True):
        head = re.match(r"\s*\[([^\]]+)\]", line)
        if head:
            if stage in noise and stage not in done:
                out.append(f"noise_cv = {noise[stage]:.4f}\n")
                done.add(stage)
            table = head.group(1).strip()
            stage = table.split(".", 1)[1] if table.startswith("stages.") and table.count(".") == 1 else None
        elif stage in noise and re.match(r"\s*noise_cv\s*=", line):
            line = f"noise_cv = {noise[stage]:.4f}\n"
            done.add(stage)
        out.append(line)
    if stage in noise and stage not in done:
        out.append(f"noise_cv = {noise[stage]:.4f}\n")
        done.add(stage)
    missing = set(noise) - done
    if missing:
        raise SystemExit(f"error: the profile has no [stages.{sorted(missing)[0]}] table")
    return "".join(out)


def mean_ratios(card: dict[str, Calls], model: dict[str, Calls], stages: list[str]) -> dict[str, float]:
    """Each stage's card mean under load over the model's, the median over the
    configurations both ran."""
    out = {}
    for st in stages:
        both = [k for k in card.get(st, {}) if model.get(st, {}).get(k)]
        if not both:
            raise SystemExit(f"error: no configuration where both the card and the model ran {st}")
        ratios = [statistics.fmean(card[st][k]) / statistics.fmean(model[st][k]) for k in both]
        out[st] = statistics.median(ratios)
    return out


def scaled_time(law: float | dict[str, Any], f: float) -> float | Inline:
    """A time law `f` times as long: a constant, every law simgpu writes (each is linear
    in its coefficients: simgpu.profile.laws), and a table of points point by point."""
    if not isinstance(law, dict):
        return law * f
    out = Inline()
    for k, v in law.items():
        if k == "points":
            out[k] = [[n, y * f] for n, y in v]
        elif k == "beyond":
            out[k] = scaled_time(v, f)
        else:
            out[k] = v if k == "law" else v * f
    return out


def with_times(text: str, factors: dict[str, float]) -> str:
    """A profile's TOML `text` with every `time` law of each named stage (its own, or its
    phases') scaled by that stage's factor, every other line as it was."""
    out, stage, done = [], None, set()
    for line in text.splitlines(keepends=True):
        head = re.match(r"\s*\[\[?\s*stages\.([A-Za-z0-9_]+)(?:\.phases)?\s*\]", line)
        if head or re.match(r"\s*\[", line):
            stage = head.group(1) if head else None
        elif stage in factors and re.match(r"\s*time\s*=", line):
            law = tomllib.loads(line)["time"]
            line = dumps({"time": scaled_time(law, factors[stage])})
            done.add(stage)
        out.append(line)
    missing = set(factors) - done
    if missing:
        raise SystemExit(f"error: the profile has no time law for stage {sorted(missing)[0]}")
    return "".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) of one lease")
    ap.add_argument("--profile", required=True, help="the profile the runs were planned with")
    ap.add_argument("--runs", type=int, default=20, help="Monte Carlo runs a configuration")
    ap.add_argument("--as-card", nargs="*", default=[], help="stages whose noise_cv --out sets to the card's")
    ap.add_argument(
        "--as-card-means", nargs="*", default=[], help="stages whose times --out scales to the card's means"
    )
    ap.add_argument("--out", default="", help="with --as-card or --as-card-means: where to write the profile")
    args = ap.parse_args()
    runs = [r for path in args.records for r in read_runs(path)]
    profile = load_profile(args.profile)
    card = card_calls(runs)
    model = model_calls(profile, runs, args.runs)
    resolved = profile.resolve(runs[0]["constraints"])
    print(f"{sum(1 for r in runs if not r['measured']['oom_events'])} completed runs of {len(runs)}")
    print(
        f"{len({k for by in card.values() for k in by})} configurations; each stage's calls "
        "over their configuration's mean, their spread (coefficient of variation) and count:"
    )
    print("| stage | card | model | profile noise_cv |")
    print("|---|---|---|---:|")
    for stage, by in card.items():
        noise = resolved.stages[stage].noise_cv if stage in resolved.stages else float("nan")
        print(f"| {stage} | {_cell(by)} | {_cell(model[stage]) if stage in model else '-'} | {noise:.4f} |")
    for line in at_once_spread(Path(args.profile)):
        print(line)
    if args.as_card or args.as_card_means:
        if not args.out:
            raise SystemExit("error: --as-card and --as-card-means need --out")
        text, said = Path(args.profile).read_text(), []
        if args.as_card:
            noise = {st: within(card[st])[0] for st in args.as_card}
            text = with_noise(text, noise)
            said += [f"{st} noise_cv {v:.4f}" for st, v in noise.items()]
        if args.as_card_means:
            factors = mean_ratios(card, model, args.as_card_means)
            text = with_times(text, factors)
            said += [f"{st} times x{f:.3f}" for st, f in factors.items()]
        Path(args.out).write_text(text)
        print(f"wrote {args.out}: " + ", ".join(said))


if __name__ == "__main__":
    main()
