"""Calibrate's scene of a prestage started with another worker's b_g2_msm, played in the
model, beside what calibrate timed on the card (issue #19, item 4).

In a single-lock pipeline with two GPU workers every prestage starts as the other worker
leaves the lock for its b_g2_msm, so the two run together.  calibrate times exactly that
scene (`[calibration.device_queue]`'s `one_prestage_beside_b_g2_msm`, beside
`one_prestage` alone) but fits the device's uses from other scenes (a prestage beside a
continuous kernel load).  This plays the scene in the model's runtime, the mean of SEEDS
runs, and prints it beside calibrate's reading, so that a law that stretches the
prestage more than the card did shows here before it shows in a grid.

    python experiments/prestage_scene.py docs/data/h100-2026-12-06q/call2/h100-cupy-key.toml
"""

from __future__ import annotations

import argparse
import statistics
import tomllib
from typing import Any

from copier_ab import SEEDS, scene  # beside this script: the model's scenes of two workers

from simgpu.profile import load_profile


def predicted(profile: Any, n: int) -> dict[str, float]:
    """The model's means over SEEDS runs: prestage alone, prestage and b_g2_msm together."""
    # copier_ab's scene: the next worker's prestage, with or without b_g2_msm started with it
    alone = [scene(profile, n, s, with_g2=False, beside=False)["prestage"] for s in range(SEEDS)]
    both = [scene(profile, n, s, with_g2=True, beside=False) for s in range(SEEDS)]
    return {
        "prestage alone": statistics.mean(alone),
        "prestage beside b_g2_msm": statistics.mean(r["prestage"] for r in both),
        "b_g2_msm beside prestage": statistics.mean(r["b_g2_msm"] for r in both),
    }


def measured(path: str) -> dict[str, float]:
    """calibrate's readings of the same scene ([calibration.device_queue]), where it kept them."""
    with open(path, "rb") as f:
        queue = tomllib.load(f).get("calibration", {}).get("device_queue", {})
    out = {}
    if "one_prestage_beside_b_g2_msm" in queue:
        alone, beside = queue["one_prestage_beside_b_g2_msm"]
        out["prestage alone"], out["prestage beside b_g2_msm"] = alone, beside
    if "b_g2_msm_beside_one_prestage" in queue:
        out["b_g2_msm beside prestage"] = queue["b_g2_msm_beside_one_prestage"][1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="a calibrated profile (its [calibration.device_queue] read too)")
    ap.add_argument(
        "--size", type=int, default=0, help="constraints (default: the profile's contention size)"
    )
    args = ap.parse_args()
    profile = load_profile(args.profile)
    with open(args.profile, "rb") as f:
        contention = tomllib.load(f).get("calibration", {}).get("contention", {})
    n = args.size or int(contention.get("constraints", 1 << 22))
    model, card = predicted(profile, n), measured(args.profile)
    print(f"| at n = {n:,} | model: ms | calibrate on the card: ms |")
    print("|---|---:|---:|")
    for what, seconds in model.items():
        real = f"{card[what] * 1e3:.2f}" if what in card else "-"
        print(f"| {what} | {seconds * 1e3:.2f} | {real} |")


if __name__ == "__main__":
    main()
