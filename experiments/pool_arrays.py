"""The prover's arrays in each buffer, measured from CuPy's pool trace, for a profile.

calibrate records them itself (its last repeat at every size traces the device pool and
writes ``[buffer_arrays]``).  This script does the same for a profile calibrated before
that existed: allocation sizes are the prover's code at a size, not the machine's, so a
trace on any card gives them.

    # on the GPU machine: one lone partition per size, traced
    python experiments/pool_arrays.py measure --sizes 2^20 2^22 --json out/pool-arrays.json
    # here: the profile with [buffer_arrays] from the largest size (and the pool on)
    python experiments/pool_arrays.py apply --json docs/data/.../pool-arrays.json \\
        --profile simgpu/profile/profiles/h200-cupy.toml --out out/h200-cupy.toml --pool caching

`measure` prints, per size, each phase's arrays at its peak; `apply` writes them as the
profile's ``[buffer_arrays]`` points (the grain does not scale with the size: an MSM's
buckets take 192 MiB at every size).
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

from simgpu.calibrate.arrays import arrays_table, buffer_arrays
from simgpu.calibrate.refit import inline_laws
from simgpu.profile import load_profile
from simgpu.profile.tomlwrite import dumps
from simgpu.units import parse_count

MiB = 1 << 20


def measure(args: argparse.Namespace) -> None:
    from simgpu.calibrate.measure import measure_size
    from simgpu.prover import B_G2_THREADS
    from simgpu.real.executor import ProverSettings

    out = {}
    for size in args.sizes:
        n = parse_count(size, "--sizes", 16)
        settings = ProverSettings(
            backend=args.backend,
            partition_workers=2,
            b_g2_threads=args.b_g2_threads or B_G2_THREADS,
            b_g2_on=args.b_g2_on,
            circuit=args.circuit,
        ).check(n)
        run = measure_size(n, settings, 1, print)
        out[str(n)] = {"arrays": run.arrays, "buffers": run.buffers}
        for label, sizes in run.arrays.items():
            print(
                f"n={n:,} {label}: {len(sizes)} arrays, {sum(sizes) / MiB:.1f} MiB: "
                + ", ".join(f"{x / MiB:.1f}" for x in sizes[:16])
            )
    Path(args.json).write_text(json.dumps(out, indent=1))


def apply(args: argparse.Namespace) -> None:
    record = json.loads(Path(args.json).read_text())
    doc = tomllib.loads(Path(args.profile).read_text())
    tables = {int(n): buffer_arrays(doc["stages"], r["buffers"], r["arrays"]) for n, r in record.items()}
    for n, table in sorted(tables.items()):
        print(f"n={n:,}: " + ", ".join(f"{k} {len(v)} arrays" for k, v in table.items()))
    doc["buffer_arrays"] = arrays_table(
        doc["stages"], [(int(n), r["buffers"], r["arrays"]) for n, r in record.items()]
    )
    if args.pool:
        doc["hardware"]["vram_pool"] = args.pool
    old = Path(args.profile).read_text().split("\n\n", 1)[0]
    sizes = ", ".join(f"{n:,}" for n in sorted(tables))
    header = "\n".join(line.removeprefix("#").removeprefix(" ") for line in old.splitlines())
    header += (
        f"\n[buffer_arrays] from a traced lone partition at each of {sizes} (experiments/pool_arrays.py"
        f" on {args.json})" + (f"; [hardware] vram_pool = {args.pool!r}." if args.pool else ".")
    )
    Path(args.out).write_text(dumps(inline_laws(doc), header))
    load_profile(args.out)  # it loads
    print(f"wrote {args.out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--sizes", nargs="+", default=["2^20", "2^22"])
    m.add_argument("--json", required=True)
    m.add_argument("--b-g2-on", default="gpu")
    m.add_argument("--b-g2-threads", type=int, default=8)
    m.add_argument("--circuit", default="porep")
    m.add_argument("--backend", default="cupy", help="cpu: a dry run (its device has no pool: no arrays)")
    a = sub.add_parser("apply")
    a.add_argument("--json", required=True)
    a.add_argument("--profile", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--pool", choices=("caching", "exact"))
    args = ap.parse_args()
    (measure if args.step == "measure" else apply)(args)


if __name__ == "__main__":
    main()
