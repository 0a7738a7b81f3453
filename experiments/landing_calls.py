"""What holds the device while a proof's results land?  (issue #19, item 4)

experiments/arrival_stall.py finds the device idle 13-21 ms a result at 2^22 while a
proof's results come back; this names what held it, from runs kept with
``--kernel-trace`` (and ``--py-sample``, experiments/py_sampler.py):

* **page-locks** (the pinned prover): with a GPU stage open, the share of the time the
  device stood idle while some thread was inside cudaHostRegister (or
  cudaHostUnregister), against the rest of the run; and the locks asked for together
  (within ``--together`` ms): when each call returned, counted from the first's start.
  A driver that locks one region at a time returns them one lock apart; and the locks
  no other overlapped: their own time in the pipeline, against calibrate's alone;
* **the queue ahead**: at random moments inside a GPU stage, how much device work was
  already queued (launched, not yet finished), which a lock must outlast before the
  device stands still;
* **the interpreter**: the sampler's samples that came more than ``--late`` ms after
  their alarm (every Python thread held up), and which frames moved on across each.

    python experiments/landing_calls.py docs/data/h100-2026-12-06p/call1/traced-B.json.gz
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from arrival_stall import GPU_STAGES  # beside this script
from gpu_validation import read_runs

from simgpu.report.intervals import intersect, length, subtract, union

LOCK, UNLOCK = "cudaHostRegister", "cudaHostUnregister"


def idle_during(trace: dict[str, Any], call: str) -> tuple[float, float, float, float]:
    """(µs with a GPU stage open while some thread was inside `call`, of them with the
    device idle, µs open otherwise, of them idle)."""
    names = trace["names"]
    busy = union((o[2], o[2] + o[3]) for o in trace["ops"])
    opened = union((s[4], s[5]) for s in trace["spans"] if s[1] in GPU_STAGES)
    inside = union((ts, ts + d) for n, _, ts, d in trace["calls"] if names[n] == call)
    during = intersect(opened, inside)
    rest = subtract(opened, inside)
    return length(during), length(subtract(during, busy)), length(rest), length(subtract(rest, busy))


def rows_of_locks(trace: dict[str, Any], together_us: float) -> list[list[float]]:
    """Locks asked for within `together_us` of the row's first: each call's return, in µs
    from the first one's start, sorted."""
    names = trace["names"]
    locks = sorted((ts, ts + d) for n, _, ts, d in trace["calls"] if names[n] == LOCK)
    rows: list[list[tuple[float, float]]] = []
    for a, b in locks:
        if rows and a - rows[-1][0][0] <= together_us:
            rows[-1].append((a, b))
        else:
            rows.append([(a, b)])
    return [sorted(b - row[0][0] for _, b in row) for row in rows if len(row) > 1]


def lone_locks(trace: dict[str, Any]) -> list[float]:
    """µs of each lock that no other lock overlapped (its own time, no turn waited for)."""
    names = trace["names"]
    locks = sorted((ts, ts + d) for n, _, ts, d in trace["calls"] if names[n] == LOCK)
    return [
        b - a
        for i, (a, b) in enumerate(locks)
        if all(y <= a or x >= b for j, (x, y) in enumerate(locks) if j != i)
    ]


def queued_ahead(trace: dict[str, Any], samples: int = 4000, seed: int = 1) -> list[float]:
    """µs of device work already launched and not yet done, at `samples` moments drawn
    uniformly from the time a GPU stage was open."""
    ops = sorted((o for o in trace["ops"] if o[6] is not None), key=lambda o: o[6])
    launched = [o[6] for o in ops]
    done_by: list[float] = []  # the latest end among the ops launched so far
    for o in ops:
        done_by.append(max(done_by[-1] if done_by else float("-inf"), o[2] + o[3]))
    opened = union((s[4], s[5]) for s in trace["spans"] if s[1] in GPU_STAGES)
    total = length(opened)
    rng = random.Random(seed)
    out = []
    for _ in range(samples if total > 0 else 0):
        x = rng.uniform(0, total)
        for a, b in opened:
            if x <= b - a:
                t = a + x
                break
            x -= b - a
        i = bisect.bisect(launched, t) - 1
        out.append(max(0.0, done_by[i] - t) if i >= 0 else 0.0)
    return out


def late_gaps(trace: dict[str, Any], late_us: float) -> tuple[int, float, Counter]:
    """The sampler's samples more than `late_us` after their alarm: how many, their
    lateness summed (µs), and (frame before -> frame after) of each thread whose
    innermost frame moved across one (file:line:function, without the path)."""
    py = trace.get("py_samples") or {}
    frames = py.get("frames", [])
    samples = sorted(py.get("samples", []), key=lambda s: s[0])
    moved: Counter = Counter()
    n, total = 0, 0.0
    for prev, cur in zip(samples, samples[1:], strict=False):
        if cur[1] <= late_us:
            continue
        n += 1
        total += cur[1]
        before = {tid: top for tid, top, _ in prev[2]}
        for tid, top, _ in cur[2]:
            if tid in before and before[tid] != top:
                moved[(frames[before[tid]].rsplit("/", 1)[-1], frames[top].rsplit("/", 1)[-1])] += 1
    return n, total, moved


def collector_passes(trace: dict[str, Any], long_us: float) -> tuple[list[tuple[float, float]] | None, int]:
    """(the collector's passes longer than `long_us`, as (start, length), µs on the
    spans' clock as the samples; how many samples later than that woke within 2 ms of
    one's end), or (None, 0) for a trace recorded before the sampler noted the collector."""
    py = trace.get("py_samples") or {}
    if "gc" not in py:
        return None, 0
    passes = [(t, d) for t, d, _ in py["gc"] if d > long_us]
    ends = [t + d for t, d in passes]
    late = [s[0] for s in py.get("samples", []) if s[1] > long_us]
    within = sum(any(0 <= t - e <= 2e3 for e in ends) for t in late)
    return passes, within


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", help="validation records kept with --kernel-trace")
    ap.add_argument("--together", type=float, default=5.0, help="ms: locks asked for this close form a row")
    ap.add_argument("--late", type=float, default=10.0, help="ms: a sample this late held every thread up")
    args = ap.parse_args()
    for path in args.records:
        for r in read_runs(path):
            trace = r.get("kernel_trace")
            if not trace:
                continue
            uploads = r.get("abc_uploads") or {}
            print(f"## {r['label']}{r['repeat']} ({Path(path).name}; uploads {uploads})")
            for call in (LOCK, UNLOCK):
                during, idle, rest, rest_idle = idle_during(trace, call)
                if during > 0:
                    print(
                        f"- inside {call}: {during / 1e3:.0f} ms with a GPU stage open, the device idle "
                        f"{idle / max(during, 1e-9):.2f} of it (elsewhere {rest_idle / max(rest, 1e-9):.2f})"
                    )
            rows = rows_of_locks(trace, args.together * 1e3)
            if rows:
                shown = "; ".join("/".join(f"{x / 1e3:.0f}" for x in row) for row in rows[:8])
                print(f"- locks asked for together, each call's return from the first's start (ms): {shown}")
            lone = lone_locks(trace)
            if lone:
                mid, lo, hi = (x / 1e3 for x in (statistics.median(lone), min(lone), max(lone)))
                print(
                    f"- locks with no other beside them: {len(lone)}, median {mid:.0f} ms ({lo:.0f}-{hi:.0f})"
                )
            ahead = queued_ahead(trace)
            if ahead:
                q = statistics.quantiles(ahead, n=4)
                print(
                    f"- device work queued ahead inside a GPU stage (ms): p25 {q[0] / 1e3:.1f}, "
                    f"median {q[1] / 1e3:.1f}, p75 {q[2] / 1e3:.1f}"
                )
            n, total, moved = late_gaps(trace, args.late * 1e3)
            if trace.get("py_samples"):
                top = ", ".join(f"{a} -> {b} ({c})" for (a, b), c in moved.most_common(4))
                held = f"{n} times beyond {args.late:.0f} ms ({total / 1e3:.0f} ms)"
                print(f"- Python held up {held}; moved on: {top}")
                passes, within = collector_passes(trace, args.late * 1e3)
                if passes is not None:
                    print(
                        f"- the cyclic collector: {len(passes)} passes beyond {args.late:.0f} ms "
                        f"({sum(d for _, d in passes) / 1e3:.0f} ms); {within} of those late samples came "
                        "at the end of one"
                    )


if __name__ == "__main__":
    main()
