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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simgpu.calibrate.measure import measure_beside_prep
from simgpu.profile import find_profile, load_profile
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.units import parse_count


def calibrated_executors(
    profile: str, sizes: list[str], backend: str, keys_dir: str
) -> Iterator[tuple[int, Any]]:
    """(constraints, a prover set up as `profile` was calibrated) for each size in turn,
    each closed when the caller moves on."""
    prof = load_profile(find_profile(profile))
    for size in sizes:
        n = parse_count(size, "size", minimum=1)
        settings = ProverSettings.as_calibrated(
            prof, backend=backend, partition_workers=1, keys_dir=Path(keys_dir)
        )
        t = time.perf_counter()
        ex = ProverExecutor(settings.spec(n), settings)
        print(f"{size}: set up in {time.perf_counter() - t:.1f} s", flush=True)
        try:
            yield n, ex
        finally:
            ex.close()


def probe_parser(doc: str, repeats: int = 6) -> argparse.ArgumentParser:
    """The command line of a probe of the calibrated prover's driver stages (this one,
    gil_handover.py, host_sensitivity.py): sizes, backend, repeats, keys, profile and
    where the JSON goes; a probe adds its own options to it."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="constraints, e.g. 2^20")
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run")
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument(
        "--profile", default="h200-cupy", help="the calibrated profile whose prover set-up is used"
    )
    ap.add_argument("--json")
    return ap


def probe_args(doc: str) -> argparse.Namespace:
    """probe_parser's options, parsed."""
    return probe_parser(doc).parse_args()


def main() -> None:
    args = probe_args(__doc__)
    out = {}
    for n, ex in calibrated_executors(args.profile, args.sizes, args.backend, args.keys_dir):
        got = measure_beside_prep(ex, n, lambda line: print(line, flush=True), repeats=args.repeats)
        out[str(n)] = {s: list(v) for s, v in got.items()}
        print("| stage | alone ms | beside prep ms | ratio |\n|---|---:|---:|---:|")
        for s, (a, b) in got.items():
            print(f"| {s} | {a * 1e3:.1f} | {b * 1e3:.1f} | {b / a:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
