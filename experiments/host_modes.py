"""The host's speed core by core: calibrate's reference loop on every core at once.

Four leases in a row (docs/validation-log.md) found hosts whose reference loop
(measure.reference_seconds) takes about 1.0 ms at one time and about 2.0 ms at another.
A probe on one thread cannot tell a whole host that slows from cores that slow one by
one, nor say what a pipeline spread over every core sees.  This runs the loop in one
process pinned to each core, side by side, and writes every sample as it is taken
(`unix time, core, ms` a line), so a watcher stopped at any moment loses nothing:

    python experiments/host_modes.py watch out/host.csv --seconds 600 &   # beside a run
    python experiments/host_modes.py summary out/host.csv[.gz] [--from T0 --to T1] [--fastest MS]

`summary` gives each core's median and share of slow samples, how many cores were slow
at once, and the host's mean factor: the mean over every sample of its time over the
fastest sample's (1.0 is every core at full speed all the time).  Two stretches of work
(calibrate, a validation run) saw the same host when their mean factors agree, whatever
any one core did.  The probe costs each core about 2 ms every `--gap` seconds (0.25 by
default: under 1% of a core).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import multiprocessing as mp
import os
import signal
import statistics
import time
from pathlib import Path

#: A sample this much slower than the fastest counts as the slow mode (the two modes sit
#: near 1.1x and 1.9x the fastest on the H200 hosts seen so far).
SLOW = 1.4


def probe(core: int, path: str, seconds: float, gap: float) -> None:
    """Sample the reference loop on `core` every `gap` s for `seconds`, a line each."""
    from simgpu.calibrate.measure import reference_seconds

    # a forked probe inherits the watcher's SIGTERM handler, which would try to stop the
    # watcher's other probes from inside this one: a probe just ends.  It also inherits
    # SIGTERM blocked (see watch): a kill that came meanwhile lands now, on the default
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    cpus = sorted(os.sched_getaffinity(0))  # the core-th of the cores this process may use
    os.sched_setaffinity(0, {cpus[core % len(cpus)]})
    end = time.time() + seconds
    with open(path, "a", buffering=1) as f:
        while time.time() < end:
            t = time.time()
            f.write(f"{t:.3f},{core},{reference_seconds() * 1e3:.4f}\n")
            time.sleep(gap)


def watch(path: Path, seconds: float, gap: float, cores: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    procs = [mp.Process(target=probe, args=(c, str(path), seconds, gap), daemon=True) for c in range(cores)]

    started: list[mp.Process] = []

    def stop(*_: object) -> None:  # a `kill` of the watcher stops its probes too
        for p in started:  # a kill may come before every probe has started
            p.terminate()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    # no kill lands half way through starting a probe (in the watcher, between a fork and
    # `started`; in a new probe, before it drops the watcher's handler): held back until
    # every probe has started, then `stop` finds them all
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    for p in procs:
        p.start()
        started.append(p)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    for p in procs:
        p.join()


def read(path: Path, t0: float | None = None, t1: float | None = None) -> list[tuple[float, int, float]]:
    rows = []
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) != 3:
            continue  # a line cut short when the watcher was stopped
        t, core, ms = float(parts[0]), int(parts[1]), float(parts[2])
        if (t0 is None or t >= t0) and (t1 is None or t <= t1):
            rows.append((t, core, ms))
    return rows


def mean_factor(rows: list[tuple[float, int, float]], fastest: float) -> float:
    """The host's mean factor over `rows`: mean sample time over the fastest."""
    return statistics.mean(ms for _, _, ms in rows) / fastest


def summary(rows: list[tuple[float, int, float]], fastest: float | None = None) -> str:
    if not rows:
        return "no samples in that stretch"
    fast = fastest or min(ms for _, _, ms in rows)
    by_core: dict[int, list[float]] = collections.defaultdict(list)
    windows: dict[int, dict[int, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    t0 = min(t for t, _, _ in rows)
    for t, c, ms in rows:
        by_core[c].append(ms)
        windows[int((t - t0) / 0.25)][c].append(ms)
    lines = [
        f"fastest sample {fast:.2f} ms; {len(rows)} samples over {max(t for t, _, _ in rows) - t0:.0f} s"
    ]
    lines += [
        f"core {c:2d}: median {statistics.median(v):.2f} ms, "
        f"slow {sum(m > SLOW * fast for m in v) / len(v):.2f}"
        for c, v in sorted(by_core.items())
    ]
    counts = [sum(statistics.median(v) > SLOW * fast for v in w.values()) for w in windows.values()]
    lines.append(
        f"0.25 s windows by how many of {len(by_core)} cores were slow in them: "
        f"{ {k: counts.count(k) for k in sorted(set(counts))} }"
    )
    lines.append(f"host mean factor {mean_factor(rows, fast):.3f} (1.0: every core at its fastest)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch", help="sample every core into FILE until --seconds have passed")
    w.add_argument("file", type=Path)
    w.add_argument("--seconds", type=float, default=600.0)
    w.add_argument("--gap", type=float, default=0.25, help="seconds between a core's samples")
    w.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    s = sub.add_parser("summary", help="what FILE's samples say, optionally of a stretch")
    s.add_argument("file", type=Path)
    s.add_argument("--from", dest="t0", type=float)
    s.add_argument("--to", dest="t1", type=float)
    s.add_argument("--fastest", type=float, help="the fastest sample to measure against (ms)")
    args = ap.parse_args()
    if args.cmd == "watch":
        watch(args.file, args.seconds, args.gap, args.cores)
    else:
        print(summary(read(args.file, args.t0, args.t1), args.fastest))


if __name__ == "__main__":
    main()
