"""Phase 10's two figures, and the held-back single proof, against the fallback's copy
rate (issue #14; docs/validation.md, "What the fallback's speed does").

A worker that finds no room to pre-stage copies a/b/c inside the compute lock, at the
seed profile's `[hardware] h2d_pageable_gbps`.  That rate decides whether the GPU finishes
a proof's burst before the next synthesis wave arrives, and so whether every proof's
first partitions meet an idle device and the race.  This runs the seed profile with only
that key changed, for each rate given:

    python experiments/phase10_fallback.py 4 6 7.5 8 10 50

Per rate: the share of Phase 10's proofs that failed with its 95% interval (the sheet:
1/3), the throughput of the runs that lost one proof (77.2 s/proof), and one proof alone
with three GPU workers (72.5 s, a figure the sheet holds back).
"""

from __future__ import annotations

import argparse
import copy
import tomllib

from published_figures import FIGURES, HELD_OUT, PROFILE, failed_share, simulate

from simgpu.profile import profile_from_dict
from simgpu.report.metrics import wilson_interval

#: The two Phase 10 figures share one setting; the failed share is read off it too.
COMPLETED = next(f for f in FIGURES if f.name == "Phase 10, completed throughput")
ALONE = next(f for f in HELD_OUT if f.name.startswith("Phase 10, one proof alone"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rates", nargs="+", type=float, help="fallback copy rates in GB/s")
    ap.add_argument("--runs", type=int, default=100, help="Monte Carlo runs of Phase 10 per rate")
    args = ap.parse_args()
    raw = tomllib.loads(PROFILE.read_text())
    print(
        f"| fallback copy GB/s | share of proofs failed [95%] | lost one: s/proof ({COMPLETED.published:g}) "
        f"| alone: s ({ALONE.published:g}) |"
    )
    print("|---:|---|---:|---:|")
    for rate in args.rates:
        data = copy.deepcopy(raw)
        data["hardware"]["h2d_pageable_gbps"] = rate
        prof = profile_from_dict(data)
        runs = simulate(prof, COMPLETED.setting, args.runs)
        lo, hi = wilson_interval(sum(r.failed for r in runs), sum(r.submitted for r in runs))
        losing = COMPLETED.measure(runs)
        alone = ALONE.measure(simulate(prof, ALONE.setting, ALONE.runs))
        print(
            f"| {rate:g} | {failed_share(runs):.2f} [{lo:.2f}, {hi:.2f}] "
            f"| {losing:.1f} ({losing / COMPLETED.published - 1:+.1%}) "
            f"| {alone:.1f} ({alone / ALONE.published - 1:+.1%}) |"
        )


if __name__ == "__main__":
    main()
