"""Calibrate's device pairings at one size, outside calibrate (issue #19, item 4).

`simgpu calibrate` times the device stages beside another worker's kind of device work
at its contention size only (2^20 for h200-cupy; simgpu.calibrate.measure.
measure_device_queue).  In the 2^22 pipelines b_g2_msm beside the next worker's kernels
runs 15-17% longer than the model's exclusive reading gives, while the two stages'
overlaps line up (docs/validation-log.md, the twenty-sixth lease).  This times the same
pairings at any size, with the prover set up as the profile was calibrated, and prints
each side of each pairing and the two paces' sum (1/s_stage + 1/s_load: 1 where the
two split a device they both fill, below 1 where device time is lost, above where
each fills the other's host gaps).

    python experiments/device_queue_at.py --size 2^22 --json out/queue-22.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from simgpu.calibrate.measure import measure_device_queue
from simgpu.profile import find_profile, load_profile
from simgpu.units import parse_count


def paces(queue: dict[str, tuple[float, float]]) -> list[tuple[str, float, float | None]]:
    """(pairing, the stage's stretch, 1/s_stage + 1/s_load where the load's side was
    read) for each "<stage> beside <load>" of a measured queue (or of a profile's
    [calibration.device_queue], whose keys join the words with underscores)."""
    queue = {k.replace("_beside_", " beside "): v for k, v in queue.items()}
    out = []
    for key, (alone, beside) in queue.items():
        if " beside " not in key:
            continue
        stage, load = key.split(" beside ")
        s = beside / alone
        other = queue.get(f"{load} beside {stage}")
        both = 1 / s + other[0] / other[1] if other and other[1] > 0 else None
        out.append((key, s, both))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="h200-cupy", help="the prover set up as this profile was calibrated")
    ap.add_argument("--size", default="2^22", help="constraints")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the pairings here")
    args = ap.parse_args()
    from simgpu.real.executor import ProverExecutor, ProverSettings

    n = parse_count(args.size, "--size", minimum=1)
    settings = ProverSettings.as_calibrated(load_profile(find_profile(args.profile)), backend="cupy")
    t = time.perf_counter()
    ex = ProverExecutor(settings.spec(n), settings)
    print(f"set up at {n:,} in {time.perf_counter() - t:.0f} s", flush=True)
    try:
        t = time.perf_counter()
        queue = measure_device_queue(ex, n, lambda line: print(line, flush=True), args.repeats)
        print(f"pairings in {time.perf_counter() - t:.0f} s")
    finally:
        ex.close()
    if args.json:
        args.json.write_text(json.dumps({"constraints": n, "device_queue": queue}, indent=1))
    print("| pairing | stretch | 1/s_stage + 1/s_load |")
    print("|---|---:|---:|")
    for key, s, both in paces(queue):
        print(f"| {key} | {s:.2f} | {'-' if both is None else f'{both:.2f}'} |")


if __name__ == "__main__":
    main()
