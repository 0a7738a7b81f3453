"""Where a GPU stage's waits for the other worker's device time come from (issue #19,
item 4), read from a kernel trace.

For each GPU stage episode (its span on its worker's thread) this gives its grain
(launches, device time per launch, device time between two of its waits) and, for each
of its waiting calls (a stream synchronize, a copy that waits), how long it waited,
how much of that the other worker's device work ran, and how much of the other
worker's work was already queued on the stream (launched, not finished) when the wait
began: the queue depth.  Waiting calls here are stream synchronizes only (a copy to
pinned memory returns at once).  Takes about a minute on the twenty-first lease's
traced-B-E.

    python experiments/sync_waits.py docs/data/h200-2026-12-05a/call1/traced-B-E.json.gz
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from typing import Any

import numpy as np
import stream_timeline as st


def per_thread(record: dict[str, Any]) -> tuple[dict, dict, dict, list]:
    """(ops by host tid: (launch, dev start, dev end, name), waits by host tid: (t0, t1,
    name), every call by host tid, the GPU stage spans) on the spans' clock (µs)."""
    kt = record["kernel_trace"]
    names = kt["names"]
    owners = st._align(kt)
    off = owners.off
    ops: dict[int, list] = defaultdict(list)
    for op in kt["ops"]:
        tid = owners.of(op[5], op[6])
        if tid is None or op[6] is None:
            continue
        ops[tid].append((op[6] - off, op[2] - off, op[2] + op[3] - off, names[op[0]]))
    waits: dict[int, list] = defaultdict(list)
    calls: dict[int, list] = defaultdict(list)
    for name, k, ts, dur in kt["calls"]:
        tid = owners.of(k, ts)
        if tid is None:
            continue
        calls[tid].append((ts - off, ts + dur - off, names[name]))
        if names[name] in st.WAITS:
            waits[tid].append((ts - off, ts + dur - off, names[name]))
    for d in (ops, waits, calls):
        for v in d.values():
            v.sort()
    spans = [s for s in kt["spans"] if s[1] in st.GPU_STAGES and s[0] in ops]
    return ops, waits, calls, spans


def overlap(ivs: list[tuple[float, float]], a: float, b: float) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in ivs)  # device ops never overlap


def analyse(record: dict[str, Any]) -> list[dict[str, Any]]:
    ops, waits, _calls, spans = per_thread(record)
    dev = {tid: [(s, e) for _, s, e, _ in v] for tid, v in ops.items()}
    out = []
    for tid, stage, _proof, _index, t0, t1 in spans:
        beside = sorted({s[1] for s in spans if s[0] != tid and s[4] < t1 and s[5] > t0})
        # the other workers' ops that can touch the span (launched in it or up to 0.5 s before)
        others = sorted(o for k, v in ops.items() if k != tid for o in v if t0 - 5e5 <= o[0] <= t1)
        other_iv = [(s, e) for _, s, e, _ in others]
        mine = [o for o in ops[tid] if t0 <= o[0] <= t1]
        if not mine:
            continue
        # the blocking calls: stream syncs (a copy to pinned memory returns at once)
        my_waits = [w for w in waits[tid] if t0 <= w[0] <= t1 and "Synchronize" in w[2]]
        rows = []
        for a, b, name in my_waits:
            # the other's work on the stream at the wait's start: launched, not finished
            depth = sum(max(0.0, e - max(s, a)) for la, s, e, _ in others if la <= a and e > a)
            mine_left = sum(max(0.0, e - max(s, a)) for la, s, e, _ in mine if la <= a and e > a)
            rows.append(
                {
                    "dur": b - a,
                    "other_dev": overlap(other_iv, a, b),
                    "own_dev": overlap(dev[tid], a, b),
                    "depth": depth,
                    "own_left": mine_left,
                    "name": name,
                }
            )
        own = [e - s for _, s, e, _ in mine]
        # device time between successive waits: the chunks it queues before it syncs
        chunks, cur, wi = [], 0.0, 0
        wstarts = [w[0] for w in my_waits]
        for la, s, e, _ in mine:
            while wi < len(wstarts) and wstarts[wi] < la:
                chunks.append(cur)
                cur, wi = 0.0, wi + 1
            cur += e - s
        chunks.append(cur)
        out.append(
            {
                "stage": stage,
                "beside": "+".join(beside) or "nothing",
                "span": t1 - t0,
                "launches": len(mine),
                "own": sum(own),
                "per_launch": own,
                "waits": rows,
                "chunks": [c for c in chunks if c > 0],
                "other_in_span": overlap(other_iv, t0, t1),
                "tid": tid,
                "t0": t0,
                "t1": t1,
            }
        )
    return out


def summary(eps: list[dict[str, Any]]) -> None:
    groups = defaultdict(list)
    for e in eps:
        groups[(e["stage"], e["beside"])].append(e)
    print(
        "| stage | beside | n | span | launches | own dev | dev/launch mean | dev/launch time-weighted "
        "| syncs | in syncs ms | of it other's dev | other's queued work at a sync, mean | chunks "
        "| dev/chunk mean "
        "| dev/chunk time-weighted | other's dev in span |"
    )
    print("|---|---|" + "---:|" * 14)
    for (stage, beside), es in sorted(groups.items()):
        pl = np.concatenate([e["per_launch"] for e in es])
        ch = np.concatenate([e["chunks"] for e in es])
        ws = [w for e in es for w in e["waits"]]
        n = len(es)
        print(
            f"| {stage} | {beside} | {n} | {statistics.mean(e['span'] for e in es) / 1e3:.1f} "
            f"| {statistics.mean(e['launches'] for e in es):.0f} "
            f"| {statistics.mean(e['own'] for e in es) / 1e3:.1f} "
            f"| {pl.mean() / 1e3:.3f} | {(pl**2).sum() / pl.sum() / 1e3:.3f} "
            f"| {len(ws) / n:.0f} | {sum(w['dur'] for w in ws) / n / 1e3:.1f} "
            f"| {sum(w['other_dev'] for w in ws) / n / 1e3:.1f} "
            f"| {statistics.mean(w['depth'] for w in ws) / 1e3:.2f} "
            f"| {len(ch) / n:.0f} | {ch.mean() / 1e3:.2f} | {(ch**2).sum() / ch.sum() / 1e3:.2f} "
            f"| {statistics.mean(e['other_in_span'] for e in es) / 1e3:.1f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    every = []
    for path in args.paths:
        for rec in st.load(path):
            every += analyse(rec)
    summary(every)


if __name__ == "__main__":
    main()
