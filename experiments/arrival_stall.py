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

from simgpu.report.intervals import intersect, length, subtract, union

GPU_STAGES = ("kernels", "b_g2_msm")


def idle_near_arrivals(trace: dict[str, Any], window_us: float) -> dict[str, float]:
    """Microseconds with a GPU stage open (`open`) and of them with the device idle
    (`idle`), within `window_us` before a synthesis ended (`near_*`) and elsewhere
    (`far_*`), as sets of time (simgpu.report.intervals)."""
    spans = trace["spans"]  # [thread, stage, proof, partition, start_us, end_us]
    busy = union((o[2], o[2] + o[3]) for o in trace["ops"])  # any kernel or copy
    opened = union((s[4], s[5]) for s in spans if s[1] in GPU_STAGES)
    ends = [s[5] for s in spans if s[1] == "synthesis"]
    near = intersect(opened, union((e - window_us, e) for e in ends))
    far = subtract(opened, near)
    return {
        "near_open": length(near),
        "near_idle": length(subtract(near, busy)),
        "far_open": length(far),
        "far_idle": length(subtract(far, busy)),
        "syntheses": len(ends),
    }


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
            if got["near_idle"] + got["far_idle"] >= got["near_open"] + got["far_open"]:
                # no kernel inside any GPU stage: the spans are not on the trace's clock
                # (the earliest traces kept them on the host's)
                print(f"| {run} | spans off the trace's clock | | | |")
                continue
            rate = got["far_idle"] / max(1.0, got["far_open"])
            extra = (got["near_idle"] - rate * got["near_open"]) / 1e3 / max(1, got["syntheses"])
            print(
                f"| {run} | {got['near_idle'] / 1e3:.0f} of {got['near_open'] / 1e3:.0f} ms | "
                f"{got['far_idle'] / 1e3:.0f} of {got['far_open'] / 1e3:.0f} ms | {got['syntheses']} | "
                f"{extra:.1f} ms |"
            )


if __name__ == "__main__":
    main()
