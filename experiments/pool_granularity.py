"""How much a capped card loses to CuPy's pool, by the grain at which the model allocates.

Under a cap, CuPy's pool counts the free rest of every split block against the limit
(simgpu.devicepool); the ninth lease's shortfall records measured 533-597 MiB so
held at two-lock-reserve's failures at 2500 MiB, beside 1856 MiB of arrays.  How much a
model loses that way depends on the grain of its allocations: the same bytes cut in
fewer, larger buffers fragment more.  This script predicts the measured capped
configurations of a validation record three ways, from one profile:

* exact: the profile as it is (no pool: live bytes against the cap);
* caching: ``[hardware] vram_pool = "caching"``, the MSM footprints as the profile has
  them (staging, then temporaries: one buffer each);
* caching, arrays: the same pool, each MSM's staging cut into the plan's arrays (bases
  batch, gathered tails, scalars) and its temporaries into the MSM's own parts (digits,
  buckets, reduction temporaries; simgpu.gpu.footprint.msm_device_bytes), in proportion.

    python experiments/pool_granularity.py --json docs/data/h200-2026-12-01f/gpu-validation.json

It prints, per capped configuration, the real outcome (proofs completed of submitted,
over its runs) beside each variant's (mean over Monte Carlo runs).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from simgpu.calibrate.refit import inline_laws
from simgpu.config import PipelineConfig, Workload
from simgpu.gpu.footprint import msm_device_bytes, msm_transient_bytes
from simgpu.model.montecarlo import predict
from simgpu.profile import load_profile
from simgpu.profile.tomlwrite import dumps
from simgpu.prover.circuits import circuit_spec
from simgpu.prover.memory_plan import ProverShape, prover_plan
from simgpu.sched.registry import resolve_design

ROOT = Path(__file__).resolve().parent.parent
MSM_PARTS = ("digits", "buckets", "temporaries")


def _points_for(k_bytes: int, group: str) -> int:
    """The point count whose MSM temporaries take `k_bytes` (msm_transient_bytes inverted)."""
    lo, hi = 1, 1 << 28
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if msm_transient_bytes(mid, group) < k_bytes else (lo, mid)
    return lo


def as_arrays(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with every staged MSM phase's two buffers cut into the prover's arrays."""
    cal = doc["calibration"]
    for st in doc["stages"].values():
        for ph in st.get("phases", []):
            name = ph["name"]
            if not ph.get("staging") or ph["transient"] != [name]:
                continue
            group = "g2" if name == "b_g2_msm" else "g1"
            staged: dict[str, list] = {}
            parts: dict[str, list] = {}
            for (n, temps), (_, stage) in zip(
                doc["buffers"][name]["points"], doc["buffers"][f"{name}_staging"]["points"], strict=True
            ):
                plan = prover_plan(
                    ProverShape.estimate(circuit_spec(cal["circuit"], int(n))),
                    stream_batch=1 << 22,
                    b_g2_on=cal.get("b_g2_on", "cpu"),
                )
                detail = {k: v for k, v in plan["detail"][name].items() if not k.endswith("_temporaries")}
                whole = sum(detail.values()) or 1
                for k, v in detail.items():
                    staged.setdefault(k, []).append([n, int(stage * v / whole)])
                d = msm_device_bytes(_points_for(int(temps), group), group=group)
                total = sum(d[p] for p in MSM_PARTS)
                cut = [int(temps * d[p] / total) for p in MSM_PARTS[:-1]]
                for p, v in zip(MSM_PARTS, [*cut, int(temps) - sum(cut)], strict=True):
                    parts.setdefault(f"{name}_{p}", []).append([n, v])
            del doc["buffers"][name], doc["buffers"][f"{name}_staging"]
            doc["buffers"].update({k: {"points": v} for k, v in {**staged, **parts}.items()})
            ph["staging"], ph["transient"] = list(staged), list(parts)
    return doc


def variants(profile: Path, out: Path) -> dict[str, Path]:
    doc = tomllib.loads(profile.read_text())
    paths = {"exact": profile}
    doc["hardware"]["vram_pool"] = "caching"
    paths["caching"] = out / "caching.toml"
    paths["caching"].write_text(dumps(inline_laws(doc), "pool_granularity: caching"))
    paths["caching, arrays"] = out / "arrays.toml"
    paths["caching, arrays"].write_text(dumps(inline_laws(as_arrays(doc)), "pool_granularity: arrays"))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=str(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"))
    ap.add_argument("--json", required=True, help="a validation record (experiments/gpu_validation.py)")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    rows = [r for r in json.loads(Path(args.json).read_text()) if r["vram_cap"]]
    configs: dict[tuple, list] = {}
    for r in rows:
        key = (r["label"], r["constraints"], r["design"], r["gpu_workers"], r["concurrency"], r["vram_cap"])
        configs.setdefault(key, []).append(r["measured"]["proofs"])
    with tempfile.TemporaryDirectory() as tmp:
        paths = variants(Path(args.profile), Path(tmp))
        profiles = {k: load_profile(p) for k, p in paths.items()}
        print(f"| cfg | cap MiB | real completed | {' | '.join(profiles)} |")
        print("|---|---:|---|" + "---|" * len(profiles))
        for (label, n, design, gw, j, cap), proofs in configs.items():
            real = ", ".join(f"{p['completed']}/{p['submitted']}" for p in proofs)
            cells = []
            for prof in profiles.values():
                cfg = PipelineConfig().with_overrides(
                    gpu_workers_per_device=gw,
                    concurrency=j,
                    proofs=proofs[0]["submitted"],
                    vram=cap,
                    partition_workers=8,
                )
                wl = Workload(f"groth16-n{n}", 4, n)
                p = predict(prof, cfg, wl, resolve_design(design), runs=args.runs)
                done = [s.completed for s in p.summaries]
                cells.append(f"{sum(done) / len(done):.1f}/{proofs[0]['submitted']}")
            print(f"| {label} | {cap >> 20} | {real} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
