"""The capped races with the model's allocations at the card's instants (issue #19, item 5).

The model books a stage's device buffers at the moments its plan reaches them: a phase's
staging, then its upload, then its temporaries, then its work, in device time.  The
card's pool traces say the host gets there sooner (docs/validation-log.md, "The
forty-first lease"): a kernels stage asks for its h_msm arrays 2.1-2.5 ms in, at 2^20 as
at 2^22, because the NTTs are queued and the MSM's staging upload is queued too; and a
b_g2_msm asks for its temporaries 15-18% of the way through its span, after host work
the model does not split out.  Which worker asks first decides which block a freed
hole goes to, and so the capped races.

This predicts P and H-K (and B, G, L as controls) with the model as it is ("as is"),
with the kernels' phase buffers booked at their launch ("launch"), and with b_g2_msm's
temporaries also booked `--b-g2-share` of its work in ("launch+b_g2"), printing each
configuration's share of runs out of memory and its lost proofs, beside the card's
outcome where a lease's records are given:

    python experiments/alloc_instants.py --profile docs/data/h100-2026-12-06o/call3/h100-cupy-key.toml

It changes the plans in memory only (simgpu.profile.resolve.Resolved.plan, wrapped);
nothing of the model is changed for other callers.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from gpu_validation import config_of  # beside this script

from simgpu.config import Workload
from simgpu.model.sim import SimRuntime
from simgpu.profile import load_profile
from simgpu.profile import resolve as R
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

MiB = 1 << 20
#: (label, log2 constraints, design, GPU workers, cap MiB or None) as gpu_validation's grid
CASES = [
    ("P", 20, "two-lock", 3, 1087),
    ("H", 22, "two-lock", 3, 2176),
    ("I", 22, "single-lock", 3, 2176),
    ("J", 22, "two-lock-reserve", 3, 2176),
    ("K", 22, "split-finalizer", 3, 2176),
    ("B", 22, "single-lock", 2, None),
    ("G", 22, "two-lock", 2, None),
    ("L", 20, "single-lock", 2, None),
]


def at_launch(steps: list[R.Step]) -> list[R.Step]:
    """A kernels plan with its phases' buffers booked when the host queues them: each
    MSM phase's temporaries right after its staging (the upload still takes its time
    before the work), and the NTT's work after the h_msm phase's bookings."""
    out: list[R.Step] = []
    i = 0
    while i < len(steps):
        s = steps[i]
        if s.op == R.STAGE:
            j = i + 1
            while j < len(steps) and steps[j].op == R.ALLOC:
                j += 1
            out += steps[i + 1 : j] + [s]
            i = j
            continue
        out.append(s)
        i += 1
    k = next(n for n, s in enumerate(out) if s.op == R.WORK and s.phase and s.phase.name == "ntt")
    j = k + 1
    while j < len(out) and out[j].op not in (R.STAGE, R.WORK):
        j += 1
    return out[:k] + out[k + 1 : j] + [out[k]] + out[j:]


def b_g2_later(steps: list[R.Step], share: float) -> list[R.Step]:
    """A b_g2_msm plan whose temporaries come `share` of its work in."""
    k = next(n for n, s in enumerate(steps) if s.op == R.STAGE)
    w = next(n for n, s in enumerate(steps) if s.op == R.WORK)
    work = steps[w]
    pre = replace(work, phase=replace(work.phase, seconds=work.phase.seconds * share))
    post = replace(work, phase=replace(work.phase, seconds=work.phase.seconds * (1 - share)))
    return steps[: k + 1] + [pre] + steps[k + 1 : w] + [post] + steps[w + 1 :]


@contextlib.contextmanager
def instants(mode: str, share: float) -> Iterator[None]:
    """Resolved.plan wrapped for `mode` ("as is", "launch", "launch+b_g2")."""
    plain = R.Resolved.plan

    def plan(self: Any, name: str, handed: Any = ()) -> R.StagePlan:
        p = plain(self, name, handed)
        if mode == "as is":
            return p
        steps = list(p.steps)
        if name == "kernels" and any(s.op == R.STAGE for s in steps):
            steps = at_launch(steps)
        elif name == "b_g2_msm" and mode == "launch+b_g2" and any(s.op == R.STAGE for s in steps):
            steps = b_g2_later(steps, share)
        return replace(p, steps=tuple(steps))

    R.Resolved.plan = plan
    try:
        yield
    finally:
        R.Resolved.plan = plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--b-g2-share", type=float, default=0.16, help="the card's: 0.15-0.18")
    ap.add_argument("--proofs", type=int, default=6)
    ap.add_argument("--partition-workers", type=int, default=8)
    args = ap.parse_args()
    prof = load_profile(args.profile)
    print("| cfg | instants | share of runs out of memory | proofs lost |")
    print("|---|---|---:|---:|")
    for mode in ("as is", "launch", "launch+b_g2"):
        with instants(mode, args.b_g2_share):
            for label, log_n, design, gw, cap in CASES:
                wl = Workload("validation", 4, 1 << log_n)
                cfg = config_of(args, gw, 3, cap * MiB if cap else None)
                runs = [
                    summarize(SimRuntime(prof, cfg, wl, seed=s).run(resolve_design(design).fn))
                    for s in range(args.runs)
                ]
                oom = sum(bool(r.oom_events) for r in runs) / len(runs)
                lost = sum(r.failed for r in runs)
                print(f"| {label} | {mode} | {oom:.2f} | {lost} of {args.proofs * len(runs)} |", flush=True)


if __name__ == "__main__":
    main()
