"""The card's own allocations, replayed as if b_g2_msm had booked its staging whole.

Until commit fe1063e the prover's b_g2_msm asked for its bases batch, queued the batch's
copy, and asked for the gathered points, their scalars and the index only once the host
had built them and the copy had left the stream: 10-50 ms later, and in between another
worker's allocation could split the pool's block (docs/validation-log.md, "The
forty-ninth lease").  It now asks for all of them before the copy.  This reads traced
runs of the earlier prover (``--alloc-trace``), moves each b_g2_msm call's next three
allocations up to just after its bases batch, and replays both orders through the
model's caching pool (simgpu.devicepool, which replays the card's own order exactly:
experiments/pool_replay.py), up to the run's first refusal.  Every other allocation keeps
the card's order, so this isolates the change; what a run would do after its first
refusal is not read.  On the booked prover's own traces the two orders are one (the
fiftieth lease: 30 of 30 runs refuse first where the card did, both ways), and the
refusals it left on the earlier traces are the ones the card then showed.

    python experiments/booked_replay.py docs/data/h100-2026-12-06t/call*/alloc-IJK-*.json.gz
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simgpu.devicepool import held_before, replay

MiB = 1 << 20
#: The prover's b_g2_msm allocations after its bases batch that it now books with it.
BOOKED_WITH_BATCH = 3  # the index, the gathered points, their scalars (in the earlier order)


def booked(rows: Sequence[Sequence[Any]], batch_bytes: int) -> list[Sequence[Any]]:
    """`rows` with each b_g2_msm call's next BOOKED_WITH_BATCH allocations of its thread
    moved up to just after its bases batch (the allocation of `batch_bytes`)."""
    out = list(rows)
    i = 0
    while i < len(out):
        row = out[i]
        if row[2] == "b_g2_msm" and row[3] == "malloc" and row[5] and int(row[4]) == batch_bytes:
            later = [
                j
                for j in range(i + 1, len(out))
                if out[j][1] == row[1] and out[j][2] == "b_g2_msm" and out[j][3] == "malloc"
            ][:BOOKED_WITH_BATCH]
            moved = [out[j] for j in later]
            for j in reversed(later):
                del out[j]
            out[i + 1 : i + 1] = moved
            i += len(moved)
        i += 1
    return out


def first_refusal(rows: Sequence[Sequence[Any]], limit: int) -> tuple[int, int] | None:
    """(row, bytes) of the first allocation refused when `rows` are replayed through the
    model's pool under `limit`, where the card refused one too and the model agrees, or
    where the model refuses one the card served; None if none is."""
    for k, row in enumerate(rows):
        if row[3] == "malloc" and not row[5]:  # the card refused it
            got = replay(rows[: k + 1], limit)
            early = [i for i in got.disagree if i < k]
            if early:
                return early[0], int(rows[early[0]][4])
            return None if got.disagree else (k, int(row[4]))
    got = replay(rows, limit)
    return (got.disagree[0], int(rows[got.disagree[0]][4])) if got.disagree else None


def batch_size(rows: Sequence[Sequence[Any]]) -> int | None:
    """The b_g2_msm's bases batch: its first allocation on the thread that runs it."""
    return next((int(r[4]) for r in rows if r[2] == "b_g2_msm" and r[3] == "malloc" and r[5]), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) with alloc_trace")
    args = ap.parse_args()
    from gpu_validation import read_runs  # beside this script

    print("| run | cap MiB | card: first refusal | as asked, replayed | booked, replayed |")
    print("|---|---:|---|---|---|")
    tally: collections.Counter[tuple[bool, bool]] = collections.Counter()
    same = 0  # runs whose replay as asked refuses where the card did (or nowhere, as it did)
    for path in map(Path, args.records):
        for r in read_runs(path):
            rows = r.get("alloc_trace")
            size = batch_size(rows or [])
            if not rows or not r["vram_cap"] or size is None:
                continue
            limit = r["vram_cap"] - held_before(rows)
            refused = [(i, int(row[4])) for i, row in enumerate(rows) if row[3] == "malloc" and not row[5]]
            card = refused[0] if refused else None
            moved = booked(rows, size)
            asked, now = first_refusal(rows, limit), first_refusal(moved, limit)
            tally[(card is not None, now is not None)] += 1
            same += asked == card

            def cell(x: tuple[int, int] | None, order: Sequence[Sequence[Any]]) -> str:
                return "none" if x is None else f"row {x[0]}, {order[x[0]][2]} {x[1] / MiB:.1f} MiB"

            print(
                f"| {r['label']}{r['repeat']} ({path.name}) | {r['vram_cap'] // MiB} | {cell(card, rows)} | "
                f"{cell(asked, rows)} | {cell(now, moved)} |"
            )
    ran_out = tally[(True, True)] + tally[(True, False)]  # runs with a refusal on the card
    completed = tally[(False, True)] + tally[(False, False)]
    print(
        f"\nReplayed as asked, {same} of {ran_out + completed} runs refuse first where the card did.  Of "
        f"{ran_out} runs in which the card refused an allocation (a flush and a retry can still serve "
        f"it), {tally[(True, False)]} replay without a refusal when booked; of {completed} in which it "
        f"refused none, {tally[(False, True)]} replay with one."
    )


if __name__ == "__main__":
    main()
