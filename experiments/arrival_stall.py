"""Does the device stand idle while synthesis results come back?  (issue #19, item 4)

On the forty-first lease's fast, steady H100 the model was still 4-10% fast, and its
GPU stages' spans on the card carried spikes of 100-350 ms that the model has none of:
3-4 a run, each where one proof's four syntheses ended together.  This reads runs kept
with ``--kernel-trace`` (experiments/kernel_trace.py) and asks, over every millisecond
in which some GPU stage (kernels, b_g2_msm) was open, how much of it the device spent
idle, split by whether a synthesis ended within the next `--window` ms (its result then
on its way back into the driver) or not.  The idle time beyond the rest of the run's
rate, per synthesis, is what each result's arrival cost the GPU:

    python experiments/arrival_stall.py docs/data/h100-2026-12-06o/call2/traced-B.json.gz

The split is by time only: it says where the device idled, not what held it (the
interpreter lock, or the driver), which a trace with ``--py-sample`` can say.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpu_validation import read_runs  # beside this script

GPU_STAGES = ("kernels", "b_g2_msm")


def busy_intervals(ops: list[list[Any]]) -> list[tuple[float, float]]:
    """The device's busy time (any kernel or copy), merged, in microseconds."""
    merged: list[list[float]] = []
    for start, end in sorted((o[2], o[2] + o[3]) for o in ops):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def idle_near_arrivals(trace: dict[str, Any], window_us: float, step_us: float = 1000.0) -> dict[str, float]:
    """Over every step with a GPU stage open: idle microseconds and steps within
    `window_us` before a synthesis ended, and elsewhere."""
    busy = busy_intervals(trace["ops"])
    spans = trace["spans"]  # [thread, stage, proof, partition, start_us, end_us]
    gpu = [(s[4], s[5]) for s in spans if s[1] in GPU_STAGES]
    ends = sorted(s[5] for s in spans if s[1] == "synthesis")
    out = {"near_idle": 0.0, "near_steps": 0, "far_idle": 0.0, "far_steps": 0, "syntheses": len(ends)}
    k = 0  # first busy interval that may overlap the step
    t, stop = min(a for a, _ in gpu), max(b for _, b in gpu)
    while t < stop:
        u = t + step_us
        if any(a <= t < b for a, b in gpu):
            while k < len(busy) and busy[k][1] <= t:
                k += 1
            on = sum(min(b, u) - max(a, t) for a, b in busy[k:] if a < u)
            near = any(0 <= e - t <= window_us for e in ends)
            key = "near" if near else "far"
            out[f"{key}_idle"] += step_us - on
            out[f"{key}_steps"] += 1
        t = u
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", help="validation records kept with --kernel-trace")
    ap.add_argument("--window", type=float, default=150.0, help="ms before a synthesis ends")
    args = ap.parse_args()
    print(
        f"| run | idle within {args.window:.0f} ms before a synthesis ends | idle elsewhere | "
        "syntheses | idle beyond the elsewhere rate, per synthesis |"
    )
    print("|---|---:|---:|---:|---:|")
    for path in args.records:
        for r in read_runs(path):
            trace = r.get("kernel_trace")
            if not trace:
                continue
            got = idle_near_arrivals(trace, args.window * 1e3)
            run = f"{r['label']}{r['repeat']} ({Path(path).name})"
            steps = got["near_steps"] + got["far_steps"]
            if got["near_idle"] + got["far_idle"] >= steps * 1e3:
                # no kernel inside any GPU stage: the spans are not on the trace's clock
                # (the earliest traces kept them on the host's)
                print(f"| {run} | spans off the trace's clock | | | |")
                continue
            near_ms, far_ms = got["near_idle"] / 1e3, got["far_idle"] / 1e3
            rate = got["far_idle"] / max(1, got["far_steps"])
            extra = (got["near_idle"] - rate * got["near_steps"]) / 1e3 / max(1, got["syntheses"])
            print(
                f"| {run} | {near_ms:.0f} of {got['near_steps']} ms | {far_ms:.0f} of "
                f"{got['far_steps']} ms | {got['syntheses']} | {extra:.1f} ms |"
            )


if __name__ == "__main__":
    main()
