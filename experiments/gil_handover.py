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
from pathlib import Path

from beside_prep import calibrated_executors

from simgpu.calibrate.lock import measure_gil


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="constraints, e.g. 2^20")
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument("--profile", default="h200-cupy", help="the profile whose prover set-up is used")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {}
    for n, ex in calibrated_executors(args.profile, args.sizes, args.backend, args.keys_dir):
        gil, waits = measure_gil(ex, n, lambda line: print(line, flush=True), repeats=args.repeats)
        out[str(n)] = {"gil": {s: list(v) for s, v in gil.items()}, "waits": list(waits)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
