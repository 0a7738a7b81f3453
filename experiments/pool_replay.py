"""CuPy's pool on the card against the model's caching pool, row by row.

A validation run with ``--alloc-trace`` keeps every allocation, free, growth and flush of
the device pool (simgpu.prover.device.AllocTrace).  This replays each such run through
simgpu.devicepool.CachingPool under the run's cap and prints, per run: the allocations
the card refused, the rows whose outcome the model gets otherwise, and the share of
rows at which the model's reserved bytes are within 1 MiB of the card pool's.  (Rows of
different threads are noted after their operation, so a row's byte counts can already
hold another thread's next one: the two then differ for a row or two.)

    python experiments/pool_replay.py docs/data/h200-2026-12-01h/reserve-2500.json.gz ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simgpu.devicepool import held_before, replay

MiB = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) with alloc_trace")
    args = ap.parse_args()
    print("| run | cap MiB | rows | card refused | model otherwise | rows within 1 MiB | pool peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    from gpu_validation import read_runs  # beside this script

    for path in map(Path, args.records):
        for r in read_runs(path):
            rows = r.get("alloc_trace")
            if not rows or not r["vram_cap"]:
                continue
            base = held_before(rows)
            model = replay(rows, r["vram_cap"] - base)
            at = [i for i, row in enumerate(rows) if row[3] != "grow"]  # a grow precedes its malloc
            near = sum(abs(model.reserved[i] + base - rows[i][7]) <= MiB for i in at) / len(at)
            peak = max(row[7] for row in rows)
            refused = sum(1 for row in rows if row[3] == "malloc" and not row[5])
            print(
                f"| {r['label']}{r['repeat']} ({path.name}) | {r['vram_cap'] // MiB} | {len(rows)} | "
                f"{refused} | {len(model.disagree)} | {100 * near:.1f}% | {peak / MiB:.1f} |"
            )


if __name__ == "__main__":
    main()
