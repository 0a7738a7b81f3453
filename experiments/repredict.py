"""Predict again, with a (re)fitted profile, the real runs a sweep already measured.

The real runs do not change: their measured metrics are read back (out/validation.json
from validation_sweep.py, and `simgpu run --json` documents such as the two-lock
headline runs); only the predictions are recomputed, from the profile given.  Writes
the same table as validation_sweep.py.

    python experiments/repredict.py      # the H200 runs of docs/data/h200-2026-11-30d
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
from pathlib import Path

from simgpu.config import PipelineConfig, Workload
from simgpu.profile import load_profile
from simgpu.report.compare import compare

ROOT = Path(__file__).resolve().parent.parent
#: The measured runs of 2026-11-30 on the H200 (validation_sweep.py and
#: device_headline.sh), on the machine that measured the shipped profile.
DATA = ROOT / "docs" / "data" / "h200-2026-11-30d"
_spec = importlib.util.spec_from_file_location(
    "validation_sweep", ROOT / "experiments" / "validation_sweep.py"
)
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)


def measured_doc(comparison: dict) -> dict:
    """A minimal report document holding the measured values of a comparison."""
    m = {k: v["measured"] for k, v in comparison.items()}
    return {
        "throughput_s_per_proof": m["throughput (s/proof)"],
        "latency_s": {"p50": m["latency p50 (s)"], "p95": m["latency p95 (s)"]},
        "devices": [{"busy_frac": m["GPU busy"], "peak_vram_bytes": m["peak VRAM (MiB)"] * 2**20}],
        "proofs": {"failed": m["proofs failed"]},
        "oom_events": [{}] if m["OOM"] else [],
        "stages": {
            k.removesuffix(" mean (s)"): {"mean_s": v} for k, v in m.items() if k.endswith(" mean (s)")
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--profile", default=str(DATA / "h200-cupy.toml")
    )  # the profile these runs were measured with
    ap.add_argument("--sweep", default=str(DATA / "validation.json"))
    ap.add_argument("--sweep-constraints", type=int, default=1 << 20)
    ap.add_argument("--sweep-partitions", type=int, default=4)
    ap.add_argument("--sweep-proofs", type=int, default=3)
    ap.add_argument("--sweep-partition-workers", type=int, default=8)
    ap.add_argument("--run-docs", nargs="*", default=sorted(glob.glob(str(DATA / "run-*.json"))))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "out" / "repredict.md"))
    args = ap.parse_args()
    prof = load_profile(args.profile)
    rows = []
    n, parts = args.sweep_constraints, args.sweep_partitions
    for r in json.loads(Path(args.sweep).read_text()):
        cfg = PipelineConfig(
            proofs=args.sweep_proofs,
            concurrency=r["concurrency"],
            gpu_workers_per_device=r["gpu_workers"],
            partition_workers=args.sweep_partition_workers,
            vram=r["vram_cap"],
        )
        wl = Workload(f"groth16-n{n}", parts, n)
        pred = sweep.predicted_doc(prof, cfg, wl, r["design"], args.runs)
        cmp = {c["metric"]: c for c in compare(pred, measured_doc(r["comparison"]))}
        rows.append(dict(r, comparison=cmp, constraints=n))
    for path in args.run_docs:
        real = json.loads(Path(path).read_text())
        c, w = real["config"], real["workload"]
        cfg = PipelineConfig(
            proofs=c["proofs"],
            concurrency=c["concurrency"],
            gpu_workers_per_device=c["gpu_workers_per_device"],
            partition_workers=c["partition_workers"],
            vram=c["vram"],
        )
        wl = Workload(w["name"], w["partitions"], w["constraints"])
        pred = sweep.predicted_doc(prof, cfg, wl, real["design"], args.runs)
        cmp = {x["metric"]: x for x in compare(pred, real)}
        rows.append(
            {
                "design": real["design"],
                "gpu_workers": c["gpu_workers_per_device"],
                "concurrency": c["concurrency"],
                "vram_cap": c["vram"],
                "comparison": cmp,
                "verified": real["verification"],
                "constraints": w["constraints"],
            }
        )
    for r in rows:
        thr = r["comparison"]["throughput (s/proof)"]
        print(
            f"{r['design']:17s} n=2^{r['constraints'].bit_length() - 1} gw={r['gpu_workers']} "
            f"j={r['concurrency']}: {thr['predicted']} vs {thr['measured']} "
            f"OOM {r['comparison']['OOM']['predicted']} / {r['comparison']['OOM']['measured']}"
        )
    wl = Workload(f"groth16-n{n}", parts, n)
    a = argparse.Namespace(
        proofs=args.sweep_proofs, partition_workers=args.sweep_partition_workers, runs=args.runs
    )
    sweep.write_markdown(Path(args.out), rows, prof, wl, None, a, cap_searched=False)


if __name__ == "__main__":
    main()
