"""How the one stream serves several GPU workers, read from a kernel trace (issue #19).

`experiments/kernel_trace.py` records every kernel, copy and memset a real run put on
the device, the thread whose driver call launched it, and every stage each thread ran.
This reads one such run and splits each GPU stage's span on its worker's thread into

    own device time    its own kernels and copies running on the device
    others' device     the other workers' kernels and copies running while it waited
    device idle        nothing on the device: every worker was on the host (launches,
                       Python, the interpreter lock, a pageable copy's host half)

and the host side into the time its thread waited in a synchronising call (a stream
synchronize, a copy to pageable memory) and the time it ran on the host between those,
with the stage's grain: how many kernels and copies it launched, and how many times it
waited for the device.
Each stage is classed by what the other GPU workers ran beside it, as
experiments/stream_share.py classes the spans: a sharing law must give every class.

    python experiments/stream_timeline.py docs/data/h200-2026-12-01k/traced-F.json.gz

It also lists the GPU workers' calls that do not wait for the device yet took long:
calls held up in the driver, and what the other workers' threads were inside meanwhile
(docs/data/h200-2026-12-02a: launches held behind the other worker's pageable copies).

The trace's thread ids are the profiler's, not the host's: each is matched to the GPU
worker whose stage spans hold its launches, and the offset between the two clocks is
found the same way (the launches of a stage fall inside its span).
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

GPU_STAGES = ("prestage", "kernels", "b_g2_msm")
#: Driver calls in which a thread waits for the device.
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "cuStreamSynchronize")


def load(path: str) -> list[dict[str, Any]]:
    """The kernel-traced runs of a validation record."""
    from gpu_validation import read_runs  # beside this script

    return [r for r in read_runs(path) if "kernel_trace" in r]


class Owners:
    """Which host thread a profiler thread's call at a given moment belongs to.

    A GPU worker is one host thread for the whole run, but split-finalizer starts a
    finalizer thread per partition, and the system hands a finished thread's id to the
    next: one profiler thread id can stand for several host threads, one after another.
    So a profiler thread maps to one or more host threads, and a call goes to the one
    whose GPU stage span holds it (or to the only one, if it has one)."""

    def __init__(self, hosts: dict[int, list[int]], spans: dict[int, list[tuple[float, float]]], off: float):
        self.hosts, self.spans, self.off = hosts, spans, off
        self._starts = {tid: [a for a, _ in ss] for tid, ss in spans.items()}

    def __contains__(self, k: int) -> bool:
        return k in self.hosts

    def of(self, k: int | None, t: float | None) -> int | None:
        """The host thread of profiler thread `k`'s call at CUPTI time `t`."""
        hosts = self.hosts.get(k)
        if not hosts:
            return None
        if len(hosts) == 1:
            return hosts[0]
        if t is None:
            return None
        for tid in hosts:
            i = bisect.bisect_right(self._starts[tid], t - self.off) - 1
            if i >= 0 and self.spans[tid][i][0] <= t - self.off <= self.spans[tid][i][1]:
                return tid
        return None


def _align(kt: dict[str, Any]) -> Owners:
    """The profiler's threads matched to the host's, and the offset (CUPTI µs minus span
    µs) that puts the most of each thread's launches inside its host threads' GPU stage
    spans.  Each host thread goes to the profiler thread with the most launches inside
    its spans; a profiler thread may take several (see Owners)."""
    launches: dict[int, list[float]] = defaultdict(list)
    for op in kt["ops"]:
        if op[5] is not None:
            launches[op[5]].append(op[6])
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for tid, stage, *_, t0, t1 in kt["spans"]:
        if stage in GPU_STAGES:
            spans[tid].append((t0, t1))
    for v in spans.values():
        v.sort()
    first = {k: min(ls) for k, ls in launches.items()}
    starts = {tid: [a for a, _ in ss] for tid, ss in spans.items()}
    ks, tids = sorted(launches), sorted(spans)

    def inside(ts: list[float], tid: int, off: float) -> int:
        ss, st = spans[tid], starts[tid]
        n = 0
        for t in ts:
            i = bisect.bisect_right(st, t - off) - 1
            n += i >= 0 and ss[i][0] <= t - off <= ss[i][1]
        return n

    def assign(off: float, per: int) -> tuple[float, dict[int, list[int]]]:
        from scipy.optimize import linear_sum_assignment

        sample = {k: sorted(launches[k])[:: max(1, len(launches[k]) // per)] for k in ks}
        counts = np.array([[inside(sample[k], tid, off) for tid in tids] for k in ks])
        # one to one first (two workers' threads both launch inside a span of one of
        # them); the host threads left over then go to the thread most inside them
        rows, cols = linear_sum_assignment(-counts)
        leftover = sorted(set(range(len(tids))) - set(cols))
        pairs = [*zip(rows, cols, strict=True), *((int(np.argmax(counts[:, c])), c) for c in leftover)]
        hosts: dict[int, list[int]] = defaultdict(list)
        for r, c in pairs:
            if counts[r, c]:
                hosts[ks[r]].append(tids[c])
        got = sum(int(counts[r, c]) for r, c in pairs)
        return got / sum(len(v) for v in sample.values()), dict(hosts)

    # one offset for every thread: the first launch of one of the two busiest threads
    # just after one of the first spans of some host thread opens
    busiest = sorted(ks, key=lambda k: -len(launches[k]))[:2]
    candidates = sorted({first[k] - a for k in busiest for ss in spans.values() for a, _ in ss[:6]})
    screened = {off: assign(off, 100)[0] for off in candidates}
    top = max(screened.values())
    # offsets that tie on the launches alone are told apart by the waits too (_refine)
    best = None
    for off in (c for c in candidates if screened[c] >= top - 1e-9):
        share, hosts = assign(off, 400)
        inside_n, refined = _refine(kt, hosts, spans, off)
        if best is None or (share, inside_n) > best[:2]:
            best = (share, inside_n, hosts, refined)
    share, _, hosts, refined = best
    if share < 0.95:
        raise SystemExit(f"the trace does not align: {share:.0%} of launches in their spans")
    return Owners(hosts, spans, refined)


def _refine(
    kt: dict[str, Any], hosts: dict[int, list[int]], spans: dict[int, list], off: float
) -> tuple[int, float]:
    """The offset to a twentieth of a millisecond: a first launch need not open its span
    (a stage may start with host work), so the coarse offset can be milliseconds off.
    Every launch and every waiting call of a profiler thread lies inside one of its host
    threads' GPU stage spans: take the shift within 10 ms that puts the most of them
    there, the middle of the shifts that tie.  Returns (how many are inside, offset)."""
    names = kt["names"]
    items: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for op in kt["ops"]:
        if op[5] in hosts and op[6] is not None:
            items[op[5]].append((op[6], op[6]))
    for name, k, ts, dur in kt["calls"]:
        if k in hosts and names[name] in WAITS:
            items[k].append((ts, ts + dur))
    sample = {k: sorted(v)[:: max(1, len(v) // 800)] for k, v in items.items()}
    merged = {k: sorted(iv for tid in hosts[k] for iv in spans[tid]) for k in items}
    starts = {k: [a for a, _ in ss] for k, ss in merged.items()}

    def inside(delta: float) -> int:
        n = 0
        for k, its in sample.items():
            ss, st = merged[k], starts[k]
            for a, b in its:
                i = bisect.bisect_right(st, a - off - delta) - 1
                n += i >= 0 and ss[i][0] <= a - off - delta and b - off - delta <= ss[i][1]
        return n

    scores = [(inside(d), d) for d in range(-10_000, 10_001, 50)]
    top = max(n for n, _ in scores)
    tied = [d for n, d in scores if n == top]
    return top, off + tied[len(tied) // 2]


def _overlap(intervals: list[tuple[float, float]], a: float, b: float) -> float:
    """Total length of the union of `intervals` (sorted by start) within [a, b]."""
    total, cur_a, cur_b = 0.0, None, None
    for s, e in intervals:
        s, e = max(s, a), min(e, b)
        if e <= s:
            continue
        if cur_b is None or s > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = s, e
        else:
            cur_b = max(cur_b, e)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


#: A stretch of host time without a driver call longer than this is bulk host work (a
#: gather or copy of many MiB before an upload), not the Python between two launches.
LONG_STRETCH_US = 1000.0


def _long_stretches(
    launches: list[float], waits: list[tuple[float, float]], t0: float, t1: float
) -> tuple[int, float]:
    """(how many, µs in all) of the stretches in [t0, t1] longer than LONG_STRETCH_US in
    which the thread made no driver call: between one call's end and the next's start."""
    inside = [(max(a, t0), min(b, t1)) for a, b in waits if b > t0 and a < t1]
    calls = sorted([(t, t) for t in launches if t0 <= t <= t1] + inside)
    n, total, prev = 0, 0.0, t0
    for a, b in [*calls, (t1, t1)]:
        if a - prev > LONG_STRETCH_US:
            n, total = n + 1, total + (a - prev)
        prev = max(prev, b)
    return n, total


def episodes(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every GPU stage of the run, its span split as the module says (µs)."""
    kt = record["kernel_trace"]
    names = kt["names"]
    owners = _align(kt)
    off = owners.off
    dev_ops: dict[int, list[tuple[float, float]]] = defaultdict(list)  # by host tid
    launched: dict[int, list[float]] = defaultdict(list)
    for op in kt["ops"]:
        tid = owners.of(op[5], op[6])
        dev_ops[tid].append((op[2] - off, op[2] + op[3] - off))
        if op[6] is not None:
            launched[tid].append(op[6] - off)
    for v in launched.values():
        v.sort()
    for v in dev_ops.values():
        v.sort()
    every = sorted(iv for v in dev_ops.values() for iv in v)
    waits: dict[int, list[tuple[float, float]]] = defaultdict(list)
    in_driver: dict[int, list[tuple[float, float]]] = defaultdict(list)  # the other calls
    for name, k, ts, dur in kt["calls"]:
        tid = owners.of(k, ts)
        if tid is not None:
            (waits if names[name] in WAITS else in_driver)[tid].append((ts - off, ts + dur - off))
    for v in [*waits.values(), *in_driver.values()]:
        v.sort()
    gpu_spans = [s for s in kt["spans"] if s[1] in GPU_STAGES and s[0] in dev_ops]
    # the Python sampler's samples (py_sampler.PySampler: on the spans' clock), if taken
    samples = sorted(
        (row[0], row[1], row[3] if len(row) > 3 else None)
        for row in kt.get("py_samples", {}).get("samples", [])
    )
    sample_t = [t for t, _, _ in samples]
    out = []
    for tid, stage, proof, index, t0, t1 in gpu_spans:
        beside = sorted({s[1] for s in gpu_spans if s[0] != tid and s[4] < t1 and s[5] > t0})
        others = sorted(iv for k, v in dev_ops.items() if k != tid for iv in v)
        own = _overlap(dev_ops[tid], t0, t1)
        busy = _overlap(every, t0, t1)
        # when its own work first ran on the device, and what the others' ran before that
        # (the stream serves work in the order queued: a prestage waits behind what the
        # other worker queued at the lock's hand-over)
        mine = [a for a, b in dev_ops[tid] if b > t0 and a < t1]
        first = (max(t0, min(mine)) if mine else t1) - t0
        wait = _overlap(waits[tid], t0, t1)
        starts = [a for a, _ in waits[tid]]
        long_n, long_s = _long_stretches(launched[tid], sorted(waits[tid] + in_driver[tid]), t0, t1)
        inside = samples[bisect.bisect(sample_t, t0) : bisect.bisect(sample_t, t1)]
        out.append(
            {
                "stage": stage,
                "tid": tid,
                "proof": proof,
                "index": index,
                "span": t1 - t0,
                "own_device": own,
                "others_device": _overlap(others, t0, t1),
                "others_only": busy - own,
                "first_own": first,
                "others_before_own": _overlap(others, t0, t0 + first),
                "idle": (t1 - t0) - busy,
                "waiting": wait,
                "host": (t1 - t0) - wait,
                # of which inside its other driver calls (launches, allocations): traces
                # since 2026-12-02 keep every call, the earlier ones only when each began
                "in_driver": _overlap(in_driver[tid], t0, t1),
                # of it in stretches of more than LONG_STRETCH_US without a driver call
                "host_long": long_s,
                "host_long_n": long_n,
                "beside": "+".join(beside) or "nothing",
                # the grain: its launches, and its waits for the device (each a sync point)
                "launches": bisect.bisect(launched[tid], t1) - bisect.bisect(launched[tid], t0),
                "waits": bisect.bisect(starts, t1) - bisect.bisect(starts, t0),
                # how late the sampler woke inside the span, in all (the interpreter lock
                # held elsewhere, or no core free), and of that its run-queue wait (no
                # core); None without samples, or samples from before the run-queue wait
                "sampler_late": sum(late for _, late, _ in inside) if samples else None,
                "sampler_runq": (
                    sum(rq for _, _, rq in inside)
                    if samples and all(rq is not None for _, _, rq in inside)
                    else None
                ),
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["stage"], r["beside"])].append(r)
    lines = [
        "| stage | beside | n | span ms | own device | others' device (not own) | idle | waiting "
        "| on the host | of it in stretches > 1 ms (how many) | of it in other driver calls "
        "| launches | waits | sampler late (of it no core) | its first device work at (others' before it) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (stage, beside), rs in sorted(groups.items()):

        def m(key: str, rs: list[dict[str, Any]] = rs) -> str:
            return f"{statistics.mean(r[key] for r in rs) / 1e3:.1f}"

        def n(key: str, rs: list[dict[str, Any]] = rs) -> str:
            return f"{statistics.mean(r[key] for r in rs):.0f}"

        def late(rs: list[dict[str, Any]] = rs) -> str:
            if any(r.get("sampler_late") is None for r in rs):
                return "-"
            out = m("sampler_late")
            if all(r.get("sampler_runq") is not None for r in rs):
                out += f" ({m('sampler_runq')})"
            return out

        lines.append(
            f"| {stage} | {beside} | {len(rs)} | {m('span')} | {m('own_device')} | "
            f"{m('others_only')} | {m('idle')} | {m('waiting')} | {m('host')} | "
            f"{m('host_long')} ({statistics.mean(r['host_long_n'] for r in rs):.1f}) | {m('in_driver')} | "
            f"{n('launches')} | {n('waits')} | {late()} | {m('first_own')} ({m('others_before_own')}) |"
        )
    return lines


#: A call that does not wait for the device but takes longer than this was held up (µs).
HELD_US = 200.0


def held_calls(record: dict[str, Any]) -> dict[str, Any]:
    """The GPU workers' driver calls that are not waits yet took over HELD_US: held up
    in the driver.  `by_call` totals them (ms, count) by call; `behind` splits their
    time by what the other GPU workers' threads were inside meanwhile (the call, and
    for a copy its kind: "Memcpy HtoD (Pageable -> Device)" and the like), in ms."""
    kt = record["kernel_trace"]
    owners = _align(kt)
    names = kt["names"]
    copy_kind = {(o[5], o[6]): names[o[0]] for o in kt["ops"] if o[5] is not None and o[1] == 1}
    calls: dict[int, list[tuple[float, float, str, str]]] = defaultdict(list)
    for n, tid, t0, dur in kt["calls"]:
        if tid in owners:
            calls[tid].append((t0, dur, names[n], copy_kind.get((tid, t0), "")))
    by_call: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    behind: dict[str, float] = defaultdict(float)
    for tid, mine in calls.items():
        others = [c for other, cs in calls.items() if other != tid for c in cs]
        for t0, dur, name, _ in mine:
            if dur <= HELD_US or name in WAITS:
                continue
            by_call[name][0] += dur / 1e3
            by_call[name][1] += 1
            for u0, udur, uname, kind in others:
                overlap = min(t0 + dur, u0 + udur) - max(t0, u0)
                if overlap > 0:
                    behind[f"{name} behind {uname}" + (f" ({kind})" if kind else "")] += overlap / 1e3
    return {"by_call": dict(by_call), "behind": dict(behind)}


def held_table(held: dict[str, Any]) -> list[str]:
    rows = ["| held call | ms | calls |", "|---|---:|---:|"]
    by_time = sorted(held["by_call"].items(), key=lambda kv: -kv[1][0])
    rows += [f"| {k} | {v[0]:.1f} | {v[1]} |" for k, v in by_time]
    rows += ["", "| held call, behind the other worker's | ms |", "|---|---:|"]
    top = sorted(held["behind"].items(), key=lambda kv: -kv[1])[:8]
    return rows + [f"| {k} | {v:.1f} |" for k, v in top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", help="write every episode here")
    args = ap.parse_args()
    every: list[dict[str, Any]] = []
    for path in args.paths:
        for rec in load(path):
            rows = episodes(rec)
            for r in rows:
                r["label"] = rec["label"]
            every += rows
            run = f"{rec['label']}{rec['repeat']} ({rec['design']}, {rec['gpu_workers']} GPU workers)"
            print(f"\n{Path(path).name} {run}")
            print("\n".join(table(rows)))
            print("\ncalls held up in the driver (not waits, over 0.2 ms):")
            print("\n".join(held_table(held_calls(rec))))
    if len(args.paths) > 1 or len({r["label"] for r in every}) > 1:
        print("\nall runs")
        print("\n".join(table(every)))
    if args.json:
        Path(args.json).write_text(json.dumps(every, indent=1))


if __name__ == "__main__":
    main()
