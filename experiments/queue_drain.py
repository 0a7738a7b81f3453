"""How long an unlock issued at a random instant would wait for the device, read off a
run's kernel trace (`gpu_validation.py measure --kernel-trace`, experiments/kernel_trace.py).

`cudaHostUnregister` waits for the device's queued work, and meanwhile the driver holds
every other thread's launch (experiments/pin_barrier.py's cases 6 and 7).  How much work
is queued depends on how far ahead the prover's threads launch, which no stage time
says.  The trace does: at an instant t, the work launched by then is done when the last
of it ends, so an unlock issued at t would wait

    drain(t) = max(end of every op launched at or before t) - t    (0 if that is past)

Sampled at uniform instants over each traced run; prints the median, quartiles, p95 and
mean in ms.

    python experiments/queue_drain.py docs/data/h100-2026-12-05f/call5/traced.json.gz
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gpu_validation import read_runs  # noqa: E402


def drains(ops: list[list], samples: int, seed: int = 1) -> list[float]:
    """Seconds an unlock would wait at `samples` uniform instants of the traced span.
    An op is [name, category, start µs, duration µs, stream, thread, launch µs, ...]."""
    rows = sorted((o[6], o[2] + o[3]) for o in ops if o[6] is not None)
    if not rows:
        return []
    launched = [t for t, _ in rows]
    done_by, last = [], float("-inf")
    for _, end in rows:  # the latest end of everything launched up to each launch
        last = max(last, end)
        done_by.append(last)
    rng = random.Random(seed)
    out = []
    for _ in range(samples):
        t = rng.uniform(launched[0], done_by[-1])
        i = bisect.bisect_right(launched, t) - 1
        out.append(max(0.0, done_by[i] - t) / 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run files with kernel traces (.json or .json.gz)")
    ap.add_argument("--samples", type=int, default=20000)
    args = ap.parse_args()
    print("| run | ops | median | p25 | p75 | p95 | mean |\n|---|---:|---:|---:|---:|---:|---:|")
    for path in args.runs:
        for run in read_runs(Path(path)):
            trace = run.get("kernel_trace")
            if not trace:
                continue
            xs = drains(trace["ops"], args.samples)
            q = statistics.quantiles(xs, n=20)
            ms = [statistics.median(xs), q[4], q[14], q[18], statistics.mean(xs)]
            cells = " | ".join(f"{x * 1e3:.1f}" for x in ms)
            print(f"| {run['label']}{run.get('repeat', '')} | {len(trace['ops'])} | {cells} |")


if __name__ == "__main__":
    main()
