"""How much a capped card loses to CuPy's pool, by the grain at which the model allocates.

Under a cap, CuPy's pool counts the free rest of every split block against the limit
(simgpu.devicepool).  How much a model loses that way depends on the grain of its
allocations: the same bytes cut in fewer, larger buffers fragment otherwise.  This
script predicts the capped configurations of a validation record three ways, from one
profile:

* exact: live bytes against the cap, no pool (``vram_pool = "exact"``);
* caching, buffers: the caching pool, each buffer one array (an MSM's staging, then its
  temporaries);
* caching, arrays: the caching pool, each buffer cut into the arrays the prover
  allocates (the profile's ``[buffer_arrays]``, measured from a pool trace:
  experiments/pool_arrays.py, or calibrate).

    python experiments/pool_granularity.py --json docs/data/h200-2026-12-01h/gpu-validation.json \
        --profile simgpu/profile/profiles/h200-cupy.toml [--arrays-from PROFILE]

It prints, per capped configuration, the real outcome (proofs completed of submitted,
over its runs) beside each variant's (mean over Monte Carlo runs).  `--arrays-from`
takes the [buffer_arrays] of another profile (the arrays are the prover's code at a
size, not the machine's).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import tomllib
from pathlib import Path

from simgpu.calibrate.refit import inline_laws
from simgpu.config import PipelineConfig, Workload
from simgpu.model.montecarlo import predict
from simgpu.profile import load_profile
from simgpu.profile.tomlwrite import dumps
from simgpu.sched.registry import resolve_design

ROOT = Path(__file__).resolve().parent.parent


def variants(profile: Path, out: Path, arrays_from: Path | None = None) -> dict[str, Path]:
    doc = tomllib.loads(profile.read_text())
    arrays = tomllib.loads((arrays_from or profile).read_text()).get("buffer_arrays")
    doc.pop("buffer_arrays", None)
    doc["hardware"]["vram_pool"] = "exact"
    paths = {"exact": out / "exact.toml"}
    paths["exact"].write_text(dumps(inline_laws(doc), "pool_granularity: exact"))
    doc["hardware"]["vram_pool"] = "caching"
    paths["caching, buffers"] = out / "caching.toml"
    paths["caching, buffers"].write_text(dumps(inline_laws(doc), "pool_granularity: caching"))
    if arrays:
        doc["buffer_arrays"] = arrays
        paths["caching, arrays"] = out / "arrays.toml"
        paths["caching, arrays"].write_text(dumps(inline_laws(doc), "pool_granularity: arrays"))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=str(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"))
    ap.add_argument("--json", required=True, help="a validation record (experiments/gpu_validation.py)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--arrays-from", help="a profile whose [buffer_arrays] to use")
    args = ap.parse_args()
    rows = [r for r in json.loads(Path(args.json).read_text()) if r["vram_cap"]]
    configs: dict[tuple, list] = {}
    for r in rows:
        key = (r["label"], r["constraints"], r["design"], r["gpu_workers"], r["concurrency"], r["vram_cap"])
        configs.setdefault(key, []).append(r["measured"]["proofs"])
    with tempfile.TemporaryDirectory() as tmp:
        paths = variants(Path(args.profile), Path(tmp), Path(args.arrays_from) if args.arrays_from else None)
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
