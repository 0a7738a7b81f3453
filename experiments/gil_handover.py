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

import json
from pathlib import Path

from beside_prep import calibrated_executors, probe_args

from simgpu.calibrate.lock import measure_gil


def main() -> None:
    args = probe_args(__doc__)
    out = {}
    for n, ex in calibrated_executors(args.profile, args.sizes, args.backend, args.keys_dir):
        gil, waits = measure_gil(ex, n, lambda line: print(line, flush=True), repeats=args.repeats)
        out[str(n)] = {"gil": {s: list(v) for s, v in gil.items()}, "waits": list(waits)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
