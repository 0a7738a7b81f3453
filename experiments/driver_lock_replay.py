"""Two GPU stages replayed from a kernel trace on one stream, with and without a driver
lock held through pageable copies (issue #19).

The thirteenth lease's traces (docs/validation-log.md, "The thirteenth and fourteenth
leases") found that while one driver thread is inside a copy to or from pageable memory,
the other makes almost no driver calls.  This checks whether that one rule accounts for
the lopsided slowdown the card shows (b_g2_msm 2.3x beside the other worker's kernels,
the kernels 1.09x beside it), from nothing but each stage's own sequence, recorded
alone:

    gaps      the host time between the thread's calls, as it ran alone
    launches  a kernel or memset (asynchronous: it only queues device work)
    copies    pinned or device-to-device ones queue work and return; pageable ones wait
              until their own transfer has run, behind everything queued before it
    syncs     wait until the stream has run everything queued so far

Both threads share one in-order stream (the device serves queued work first come,
first served, one item at a time).  Without the lock that is all; with it, a pageable
copy holds the driver from its call until its transfer ends, and every call of the
other thread (a launch, a copy, a sync) waits for it first.

    python experiments/driver_lock_replay.py docs/data/h200-2026-12-01k/traced-A.json.gz

For each pair of stages, the target runs once against the other stage looped back to
back (as a probe's load loop does), at several offsets into the loop; the table gives
the target's mean time beside the loop, and the loop's pace while the target runs.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from typing import Any

import simpy
import stream_timeline as st

#: Device-op names of copies whose call waits for the transfer (pageable host memory).
PAGEABLE = "Pageable"


@dataclass(frozen=True)
class Step:
    """One call of a stage's thread, after `gap` µs on the host since the last one."""

    gap: float
    kind: str  # "launch", "copy" (queues and returns), "pageable" (waits), "sync"
    device: float = 0.0  # µs of device work it queues


#: A thread's calls in order: (start µs on the spans' clock, µs the call itself took
#: where it waits, kind, µs of device work it queues).
Event = tuple[float, float, str, float]


def thread_events(record: dict[str, Any]) -> dict[int, list[Event]]:
    """Every host thread's launches, copies and syncs in a traced run, in order."""
    kt = record["kernel_trace"]
    names, cats = kt["names"], kt["categories"]
    owners = st._align(kt)
    off = owners.off
    calls_at = {
        (owners.of(c[1], c[2]), round(c[2], 3)): c for c in kt["calls"] if c[1] in owners
    }  # a copy's call, by its thread and start
    events: dict[int, list[Event]] = {}
    for op in kt["ops"]:
        tid = owners.of(op[5], op[6])
        if tid is None or op[6] is None:
            continue
        if cats[op[1]] == "gpu_memcpy":
            call = calls_at.get((tid, round(op[6], 3)))
            dur = call[3] if call else 0.0
            kind = "pageable" if PAGEABLE in names[op[0]] else "copy"
            events.setdefault(tid, []).append((op[6] - off, dur if kind == "pageable" else 0.0, kind, op[3]))
        else:
            events.setdefault(tid, []).append((op[6] - off, 0.0, "launch", op[3]))
    for name, k, ts, dur in kt["calls"]:
        tid = owners.of(k, ts)
        if tid is not None and "Synchronize" in names[name]:
            events.setdefault(tid, []).append((ts - off, dur, "sync", 0.0))
    for v in events.values():
        v.sort()
    return events


def steps_in(events: list[Event], t0: float, t1: float) -> list[Step]:
    """A thread's steps from t0 to t1.  A wait that began just before t0 and ended after
    it is taken as the first step (the spans' clock and the profiler's agree to 0.1-0.3
    ms only, so a stage's first sync can fall in the stage before): its time is a wait,
    not host time."""
    steps, prev = [], t0
    for start, call, kind, _device in events:
        if kind in ("sync", "pageable") and t0 - 1000.0 <= start < t0 < start + call:
            steps.append(Step(0.0, kind, 0.0))
            prev = start + call
    for start, call, kind, device in events:
        if t0 <= start <= t1:
            steps.append(Step(max(0.0, start - prev), kind, device))
            prev = max(prev, start + call)
    steps.append(Step(max(0.0, t1 - prev), "end"))
    return steps


def sequences(record: dict[str, Any]) -> dict[str, list[list[Step]]]:
    """Each GPU stage's episodes in a traced run, as the steps its thread took."""
    events = thread_events(record)
    out: dict[str, list[list[Step]]] = {}
    for tid, stage, _proof, _index, t0, t1 in record["kernel_trace"]["spans"]:
        if stage in st.GPU_STAGES and tid in events:
            out.setdefault(stage, []).append(steps_in(events[tid], t0, t1))
    return out


#: How a pageable copy in one thread holds the others up, each a replay variant:
MODES = {
    "stream": "the in-order stream alone",
    "driver": "a driver lock held through every pageable copy (the others' calls wait)",
    "frozen": "the others' calls and host time wait while a pageable copy runs",
    "gil": "the interpreter lock held through all host time",
}


class Stream:
    """One in-order stream on one device, and what a pageable copy holds (`mode`)."""

    def __init__(self, env: simpy.Environment, mode: str = "stream") -> None:
        self.env = env
        self.mode = mode
        self.device = simpy.Resource(env, capacity=1)  # FIFO: serves in queue order
        self.lock = simpy.Resource(env, capacity=1) if mode == "driver" else None
        self.gil = simpy.Resource(env, capacity=1) if mode == "gil" else None
        self.copying: set[int] = set()  # threads inside a pageable copy ("frozen")
        self.changed = env.event()  # fires when `copying` changes
        self.last: simpy.Event = env.event().succeed()

    def queue(self, us: float) -> simpy.Event:
        done = self.env.event()

        def serve() -> Any:
            with self.device.request() as r:
                yield r
                yield self.env.timeout(us)
            done.succeed()

        self.env.process(serve())
        self.last = done
        return done

    def _notify(self) -> None:
        self.changed.succeed()
        self.changed = self.env.event()

    def _clear(self, me: int) -> Any:
        """Wait until no other thread is inside a pageable copy."""
        while any(t != me for t in self.copying):
            yield self.changed

    def _host(self, me: int, us: float) -> Any:
        if self.gil is not None:
            with self.gil.request() as g:
                yield g
                yield self.env.timeout(us)
            return
        if self.mode != "frozen":
            yield self.env.timeout(us)
            return
        while us > 1e-9:  # host time runs only while no other thread is copying
            yield from self._clear(me)
            start = self.env.now
            yield self.env.any_of([self.env.timeout(us), self.changed])
            us -= self.env.now - start

    def run(self, steps: list[Step], me: int = 0) -> Any:
        """Thread `me` replaying `steps`; its process's value is its span (µs)."""
        t0 = self.env.now
        for s in steps:
            if s.gap > 0:
                yield from self._host(me, s.gap)
            if s.kind == "end":
                break
            req = None
            if self.lock is not None:
                req = self.lock.request()
                yield req  # every call goes through the driver
            elif self.mode == "frozen":
                yield from self._clear(me)
            try:
                if s.kind == "sync":
                    yield self.last
                elif s.kind == "pageable":
                    if self.mode == "frozen":
                        self.copying.add(me)
                        self._notify()
                    yield self.queue(s.device)  # held until its transfer has run
                    if self.mode == "frozen":
                        self.copying.discard(me)
                        self._notify()
                else:
                    self.queue(s.device)
            finally:
                if req is not None:
                    self.lock.release(req)
        return self.env.now - t0


def beside(target: list[Step], loop: list[list[Step]], mode: str, offset: float) -> tuple[float, float]:
    """(target's span, the loop's mean episode while it ran), the target started
    `offset` µs into the loop."""
    env = simpy.Environment()
    stream = Stream(env, mode)
    paces: list[float] = []
    stop = {"done": False}

    def looping() -> Any:
        i = 0
        while not stop["done"]:
            paces.append((yield env.process(stream.run(loop[i % len(loop)], me=1))))
            i += 1

    def later() -> Any:
        yield env.timeout(offset)
        span = yield env.process(stream.run(target, me=0))
        stop["done"] = True
        return span

    env.process(looping())
    p = env.process(later())
    env.run(until=p)
    return p.value, statistics.mean(paces[1:] or paces)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a traced run with one GPU worker (its stages recorded alone)")
    ap.add_argument(
        "--offsets", type=int, default=8, help="start offsets per pair, spread over a loop episode"
    )
    args = ap.parse_args()
    seqs = sequences(st.load(args.trace)[0])
    alone = {}
    for stage, eps in seqs.items():
        env = simpy.Environment()
        stream = Stream(env)
        spans = []
        for ep in eps:
            p = env.process(stream.run(ep))
            env.run(until=p)
            spans.append(p.value)
        alone[stage] = statistics.mean(spans)
    print(
        "| stage | beside, looped | alone ms | "
        + " | ".join(f"{mode}: target / loop's pace" for mode in MODES)
        + " |"
    )
    print("|---|---|---:|" + "---|" * len(MODES))
    for target in st.GPU_STAGES:
        for other in st.GPU_STAGES:
            if other == target or target not in seqs or other not in seqs:
                continue
            cells = []
            for mode in MODES:
                res = []
                for i in range(args.offsets):
                    ep = seqs[target][i % len(seqs[target])]
                    off = alone[other] * i / args.offsets + 3 * alone[other]
                    res.append(beside(ep, seqs[other], mode, off))
                t = statistics.mean(r[0] for r in res) / 1e3
                pace = statistics.mean(r[1] for r in res) / 1e3
                cells.append(f"{t:.1f} / {pace:.1f}")
            print(f"| {target} | {other} | {alone[target] / 1e3:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
