"""CuPy's pool on the card against the model's caching pool, row by row.

A validation run with ``--alloc-trace`` keeps every allocation, free, growth and flush of
the device pool (simgpu.prover.device.AllocTrace).  This replays each such run through
simgpu.devicepool.CachingPool under the run's cap and prints, per run: the allocations
the card refused, the rows whose outcome the model gets otherwise, and the share of
rows at which the model's reserved bytes are within 1 MiB of the card pool's.  (Rows of
different threads are noted after their operation, so a row's byte counts can already
hold another thread's next one: the two then differ for a row or two.)

    python experiments/pool_replay.py docs/data/h200-2026-12-01h/reserve-2500.json.gz ...

``--holders`` then reads each run's first refusal on the card: the request, what was in
arrays and cached in the pool, and who held the arrays (thread and stage), the question
a refusal under the cap with room in total always asks:

    python experiments/pool_replay.py --holders docs/data/h100-2026-12-07/call5/traced-2176-3.json.gz
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simgpu.devicepool import held_before, holders, replay

MiB = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) with alloc_trace")
    ap.add_argument(
        "--holders", action="store_true", help="also who held the arrays at each run's first refusal"
    )
    args = ap.parse_args()
    print("| run | cap MiB | rows | card refused | model otherwise | rows within 1 MiB | pool peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    from gpu_validation import read_runs  # beside this script

    refusals = []
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
            first = next((i for i, row in enumerate(rows) if row[3] == "malloc" and not row[5]), None)
            if first is not None:
                refusals.append((f"{r['label']}{r['repeat']} ({path.name})", rows, first))
    if args.holders:
        for name, rows, i in refusals:
            print(f"\n{first_refusal(rows, i, name)}")


def first_refusal(rows: list, i: int, name: str) -> str:
    """One refusal on the card, row `i` of a run's trace: the request, the pool's arrays
    and cache then, and who held the arrays, largest first."""
    row = rows[i]
    arrays, reserved = int(row[6]), int(row[7])
    held = sorted(holders(rows, i).items(), key=lambda kv: -kv[1])
    who = "; ".join(f"{thread} {stage or '-'} {nbytes / MiB:.1f}" for (thread, stage), nbytes in held)
    return (
        f"{name}: row {i}, {row[1]} {row[2]} asks {int(row[4]) / MiB:.1f} MiB; "
        f"{arrays / MiB:.1f} MiB in arrays, {(reserved - arrays) / MiB:.1f} cached, "
        f"{reserved / MiB:.1f} reserved; held (MiB): {who}; "
        f"the pool before the trace {held_before(rows) / MiB:.1f}"
    )


if __name__ == "__main__":
    main()
