"""The interpreter lock as calibrate reads it (simgpu.calibrate.lock.measure_gil),
measured apart from calibrate at the sizes given:

    python experiments/gil_handover.py 2^20 2^22 --json out/gil-handover.json

Per size, every driver stage alone, beside a thread of pure Python, beside a bursty
one, and the wait a probe's request for the lock met beside it, with the two threads'
own waits.  `experiments/refit_uses.py --gil-readings` puts them in a calibrated
profile's record in place of its own, so that `--gil` fits the lock from them (a what-if
where they come from another machine than the profile's).  The prover is set up as
`--profile` was calibrated, like experiments/beside_prep.py.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from simgpu.calibrate.lock import measure_gil
from simgpu.profile import find_profile, load_profile
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.units import parse_count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="constraints, e.g. 2^20")
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument("--profile", default="h200-cupy", help="the profile whose prover set-up is used")
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
            gil, waits = measure_gil(ex, n, lambda line: print(line, flush=True), repeats=args.repeats)
        finally:
            ex.close()
        out[str(n)] = {"gil": {s: list(v) for s, v in gil.items()}, "waits": list(waits)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
