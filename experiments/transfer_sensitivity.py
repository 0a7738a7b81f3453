"""How much of the 2^20 sweep's error the driver's result channel could explain.

The shipped h200-cupy profile was calibrated before `simgpu calibrate` told a
synthesis's computation apart from its result's trip back to the driver (pickled,
piped, unpickled by the one thread that receives every worker's results).  This script
splits the profile's synthesis time into compute and transfer for a few assumed
transfer fractions at 2^20 (scaled down linearly below 2^20, as the result's bytes
are), gives the transfer the `driver_rx` channel, and predicts the stored real runs
again.  It is a sensitivity analysis, not a validation: the fraction is assumed here;
the next calibration measures it.

    python experiments/transfer_sensitivity.py [--fractions 0 0.05 0.1 0.15 0.25]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import statistics
import tomllib
from pathlib import Path

from simgpu.config import PipelineConfig, Workload
from simgpu.profile import Law, profile_from_dict

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("repredict", ROOT / "experiments" / "repredict.py")
repredict = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(repredict)
N = 1 << 20


def split_synthesis(doc: dict, fraction: float) -> dict:
    """The profile with synthesis as compute + transfer (`fraction` of it at 2^20)."""
    d = copy.deepcopy(doc)
    st = d["stages"]["synthesis"]
    law = Law.parse(st.pop("time"), "synthesis.time")
    sizes = sorted(r["constraints"] for r in d["calibration"]["measurements"].values())
    share = {n: fraction * min(1.0, n / N) for n in sizes}
    st["phases"] = [
        {"name": "compute", "time": {"points": [[n, law(n) * (1 - share[n])] for n in sizes]}},
        {
            "name": "transfer",
            "time": {"points": [[n, law(n) * share[n]] for n in sizes]},
            "uses": {"driver_rx": {"demand": 1.0, "bound": 1.0}},
        },
    ]
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default=str(ROOT / "calibration" / "h200-cupy.toml"))
    ap.add_argument("--sweep", default=str(repredict.DATA / "validation.json"))
    ap.add_argument("--fractions", type=float, nargs="*", default=[0.0, 0.05, 0.10, 0.15, 0.25])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    doc = tomllib.loads(Path(args.profile).read_text())
    rows = json.loads(Path(args.sweep).read_text())
    print("| transfer share of synthesis at 2^20 | median throughput error | per configuration (%) |")
    print("|---:|---:|---|")
    for f in args.fractions:
        prof = profile_from_dict(split_synthesis(doc, f))
        errs = []
        for r in rows:
            cfg = PipelineConfig(
                proofs=3,
                concurrency=r["concurrency"],
                gpu_workers_per_device=r["gpu_workers"],
                partition_workers=8,
                vram=r["vram_cap"],
            )
            pred = repredict.sweep.predicted_doc(prof, cfg, Workload("sweep", 4, N), r["design"], args.runs)
            measured = r["comparison"]["throughput (s/proof)"]["measured"]
            errs.append((pred["throughput_s_per_proof"] - measured) / measured)
        med = statistics.median(abs(e) for e in errs)
        print(f"| {f:.2f} | {100 * med:.1f}% | {', '.join(f'{100 * e:+.0f}' for e in errs)} |")


if __name__ == "__main__":
    main()
