"""The driver's host stages beside another driver thread's prep, measured apart from
calibrate (simgpu.calibrate.measure.measure_beside_prep), at the sizes given:

    python experiments/beside_prep.py 2^20 --json out/beside-prep.json

Prints each stage's fastest time alone and beside, and their ratio.  The prover is set
up as `--profile` (default h200-cupy) was calibrated: the PoRep-shaped circuit, b_g2_msm
on the device over 8 cores, the MSMs sized by the key (ProverSettings.as_calibrated).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from simgpu.calibrate.measure import measure_beside_prep
from simgpu.profile import find_profile, load_profile
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.units import parse_count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="constraints, e.g. 2^20")
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument(
        "--profile", default="h200-cupy", help="the calibrated profile whose prover set-up is used"
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    prof = load_profile(find_profile(args.profile))
    out = {}
    for size in args.sizes:
        n = parse_count(size, "size", minimum=1)
        settings = ProverSettings.as_calibrated(
            prof, backend=args.backend, partition_workers=1, keys_dir=Path(args.keys_dir)
        )
        t = time.perf_counter()
        ex = ProverExecutor(settings.spec(n), settings)
        print(f"{size}: set up in {time.perf_counter() - t:.1f} s", flush=True)
        try:
            got = measure_beside_prep(ex, n, lambda line: print(line, flush=True), repeats=args.repeats)
        finally:
            ex.close()
        out[str(n)] = {s: list(v) for s, v in got.items()}
        print("| stage | alone ms | beside prep ms | ratio |\n|---|---:|---:|---:|")
        for s, (a, b) in got.items():
            print(f"| {s} | {a * 1e3:.1f} | {b * 1e3:.1f} | {b / a:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
