"""b_g2_msm beside the other worker's prestage and kernels, replayed on one in-order
stream as the pipeline lines them up, with and without an interpreter lock (issue #19,
item 4).

experiments/driver_lock_replay.py replays a stage beside another stage looped, at
offsets spread over the loop, from steps recorded in a two-worker run (their host gaps
already hold whatever the other thread cost them).  Here each real b_g2_msm episode
beside the other worker's prestage and kernels is replayed with the other worker's
prestage and kernels started where they started on the card (relative to b_g2_msm's
start), and the steps of each stage taken either from the episodes themselves
(`real`: a check that the replay gives the card's spans back) or from the stage's
episodes alone in the same traces (`alone`: b_g2_msm and kernels as they run with
nothing beside them; the prestage keeps its own episode's, since it ran alone only
cold).

Modes:

    stream   the one in-order stream (FIFO, one item at a time), nothing else
    gil      also an interpreter lock: a thread's host time (the gaps between its
             calls) needs it; a launch or a short wait keeps it (the call returns before
             the waiter can wake); a wait longer than --wake µs (a sync, a pageable
             copy) releases it, and a waiting thread takes it then; a thread that has
             waited --switch µs (CPython's switch interval, 5 ms) makes the holder drop
             it at once (the holder then waits for it in turn)

    python experiments/pipeline_replay.py docs/data/h200-2026-12-05a/call1/traced-B-E.json.gz
"""

from __future__ import annotations

import argparse
import statistics
from collections import deque
from typing import Any

import simpy
import stream_timeline as st
from driver_lock_replay import Step, steps_in, thread_events


def episodes(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every GPU stage episode of a traced run: tid, stage, t0, t1, its steps and its
    thread's events (driver_lock_replay.thread_events)."""
    events = thread_events(record)
    out = []
    for tid, stage, proof, index, t0, t1 in record["kernel_trace"]["spans"]:
        if stage not in st.GPU_STAGES or tid not in events:
            continue
        out.append(
            {
                "tid": tid,
                "stage": stage,
                "proof": proof,
                "index": index,
                "t0": t0,
                "t1": t1,
                "steps": steps_in(events[tid], t0, t1),
                "events": events[tid],
            }
        )
    return out


class Gil:
    """An interpreter lock for the replay's threads (see the module docstring)."""

    def __init__(self, env: simpy.Environment, switch: float) -> None:
        self.env = env
        self.switch = switch
        self.holder: int | None = None
        self.waiters: deque[tuple[int, simpy.Event]] = deque()
        self.drop: dict[int, simpy.Event] = {}  # holder -> fires when it must drop the lock
        self.switches = 0

    def acquire(self, me: int) -> Any:
        if self.holder == me:
            return
        if self.holder is None and not self.waiters:
            self._give(me)
            return
        ev = self.env.event()
        self.waiters.append((me, ev))
        self.env.process(self._timer(me, ev))
        yield ev

    def _timer(self, me: int, ev: simpy.Event) -> Any:
        while not ev.triggered:
            n = self.switches
            yield self.env.timeout(self.switch)
            if ev.triggered:
                return
            # a whole interval with no hand-over: ask the holder to drop it
            if self.switches == n and self.holder is not None:
                d = self.drop.get(self.holder)
                if d is not None and not d.triggered:
                    d.succeed()

    def _give(self, me: int) -> None:
        self.holder = me
        self.switches += 1
        self.drop[me] = self.env.event()

    def release(self, me: int) -> None:
        if self.holder != me:
            return
        self.holder = None
        if self.waiters:
            nxt, ev = self.waiters.popleft()
            self._give(nxt)
            ev.succeed()


class Replay:
    """One in-order stream, and optionally an interpreter lock."""

    def __init__(self, env: simpy.Environment, gil: Gil | None, wake: float) -> None:
        self.env = env
        self.device = simpy.Resource(env, capacity=1)
        self.last: simpy.Event = env.event().succeed()
        self.gil = gil
        self.wake = wake
        self.own_device: dict[int, float] = {}
        # per thread: µs waiting for the lock, waiting in blocking calls, on the host
        self.acct: dict[int, dict[str, float]] = {}

    def _add(self, me: int, key: str, us: float) -> None:
        a = self.acct.setdefault(me, {"gil": 0.0, "wait": 0.0, "host": 0.0})
        a[key] += us

    def _acquire(self, me: int) -> Any:
        start = self.env.now
        yield from self.gil.acquire(me)
        self._add(me, "gil", self.env.now - start)

    def queue(self, us: float, me: int) -> simpy.Event:
        done = self.env.event()

        def serve() -> Any:
            with self.device.request() as r:
                yield r
                yield self.env.timeout(us)
                self.own_device[me] = self.own_device.get(me, 0.0) + us
            done.succeed()

        self.env.process(serve())
        self.last = done
        return done

    def host(self, me: int, us: float) -> Any:
        if self.gil is None:
            yield self.env.timeout(us)
            self._add(me, "host", us)
            return
        while us > 1e-9:
            yield from self._acquire(me)
            drop = self.gil.drop[me]
            start = self.env.now
            t = self.env.timeout(us)
            yield self.env.any_of([t, drop])
            self._add(me, "host", self.env.now - start)
            us -= self.env.now - start
            if drop.triggered and us > 1e-9:
                self.gil.release(me)  # forced: the waiter takes it, we queue behind

    def wait(self, me: int, ev: simpy.Event) -> Any:
        """A blocking call: releases the lock if it lasts longer than the wake-up."""
        start = self.env.now
        if self.gil is None or ev.triggered:
            if not ev.triggered:
                yield ev
            self._add(me, "wait", self.env.now - start)
            return
        t = self.env.timeout(self.wake)
        yield self.env.any_of([t, ev])
        if not ev.triggered:  # else it returned before the waiter woke: kept the lock
            self.gil.release(me)
            yield ev
        self._add(me, "wait", self.env.now - start)

    def run(self, steps: list[Step], me: int) -> Any:
        t0 = self.env.now
        for s in steps:
            if s.gap > 0:
                yield from self.host(me, s.gap)
            if s.kind == "end":
                break
            if self.gil is not None:
                yield from self._acquire(me)  # a call is made from Python
            if s.kind == "sync":
                yield from self.wait(me, self.last)
            elif s.kind == "pageable":
                yield from self.wait(me, self.queue(s.device, me))
            else:
                self.queue(s.device, me)
        if self.gil is not None:
            self.gil.release(me)
        return self.env.now - t0


def before_sync(steps: list[Step]) -> float:
    """The host time a thread's steps spend before their first sync."""
    total = 0.0
    for s in steps:
        total += s.gap
        if s.kind in ("sync", "pageable"):
            break
    return total


def pairs(eps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each b_g2_msm episode beside the other worker's prestage and kernels, with those."""
    out = []
    for b in eps:
        if b["stage"] != "b_g2_msm":
            continue
        other = [e for e in eps if e["tid"] != b["tid"] and e["t0"] < b["t1"] and e["t1"] > b["t0"]]
        pre = [e for e in other if e["stage"] == "prestage"]
        ker = [e for e in other if e["stage"] == "kernels"]
        if len(pre) == 1 and len(ker) == 1:
            out.append({"b": b, "pre": pre[0], "ker": ker[0]})
    return out


def replay(
    pair: dict[str, Any], b_steps: list[Step], k_steps: list[Step], mode: str, args: Any
) -> dict[str, float]:
    env = simpy.Environment()
    gil = Gil(env, args.switch) if mode == "gil" else None
    r = Replay(env, gil, args.wake)
    b, pre, ker = pair["b"], pair["pre"], pair["ker"]
    t0 = min(b["t0"], pre["t0"])
    out: dict[str, float] = {}

    def target() -> Any:
        yield env.timeout(b["t0"] - t0)
        out["b_g2_msm"] = yield env.process(r.run(b_steps, 0))
        for k, v in r.acct.get(0, {}).items():
            out[f"b_g2_msm {k}"] = v

    def other() -> Any:
        # one sequence: the span boundary between them is only as good as the clocks'
        # offset (0.1-0.3 ms), and the kernels' first sync can fall in the prestage's
        yield env.timeout(pre["t0"] - t0)
        start = env.now
        if k_steps is ker["steps"]:  # the card's own: the two as one span of the thread
            steps = steps_in(ker["events"], pre["t0"], ker["t1"])
        else:
            steps = (
                pre["steps"][:-1]
                + [Step(pre["steps"][-1].gap + k_steps[0].gap, k_steps[0].kind, k_steps[0].device)]
                + k_steps[1:]
            )
        yield env.process(r.run(steps, 1))
        out["prestage+kernels"] = env.now - start

    p1, p2 = env.process(target()), env.process(other())
    env.run(until=env.all_of([p1, p2]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--switch", type=float, default=5000.0, help="switch interval, µs")
    ap.add_argument("--wake", type=float, default=50.0, help="a wait shorter than this keeps the lock, µs")
    args = ap.parse_args()
    every: list[dict[str, Any]] = []
    alone: dict[str, list[list[Step]]] = {"b_g2_msm": [], "kernels": []}
    for path in args.paths:
        for rec in st.load(path):
            eps = episodes(rec)
            for e in eps:
                if e["stage"] in alone and not any(
                    o["tid"] != e["tid"] and o["t0"] < e["t1"] and o["t1"] > e["t0"] for o in eps
                ):
                    alone[e["stage"]].append(e["steps"])
            every += pairs(eps)
    print(
        f"{len(every)} b_g2_msm episodes beside a prestage and kernels; alone: "
        + ", ".join(f"{k} {len(v)}" for k, v in alone.items())
    )
    real = {
        "b_g2_msm": statistics.mean(p["b"]["t1"] - p["b"]["t0"] for p in every) / 1e3,
        "prestage+kernels": statistics.mean(p["ker"]["t1"] - p["pre"]["t0"] for p in every) / 1e3,
        # the card's episodes: host time is the gaps between calls, the rest is in calls
        "host": statistics.mean(sum(s.gap for s in p["b"]["steps"]) for p in every) / 1e3,
    }
    # each stage alone, replayed alone (its own steps, nothing beside)
    solo = {}
    for stage, seqs in alone.items():
        spans = []
        for s in seqs:
            env = simpy.Environment()
            r = Replay(env, None, args.wake)
            p = env.process(r.run(s, 0))
            env.run(until=p)
            spans.append(p.value)
        solo[stage] = statistics.mean(spans) / 1e3
    print(f"alone, replayed: b_g2_msm {solo['b_g2_msm']:.1f} ms, kernels {solo['kernels']:.1f} ms")
    print(
        "\n| steps | mode | b_g2_msm ms (x alone) | of it: host / waiting for the lock / in blocking calls "
        "| the other's prestage + kernels ms |"
    )
    print("|---|---|---:|---|---:|")
    print(
        f"| card | - | {real['b_g2_msm']:.1f} ({real['b_g2_msm'] / solo['b_g2_msm']:.2f}x) | "
        f"{real['host']:.1f} / - / {real['b_g2_msm'] - real['host']:.1f} | {real['prestage+kernels']:.1f} |"
    )
    for steps in ("real", "alone", "alone, late start"):
        for mode in ("stream", "gil"):
            res = []
            for i, p in enumerate(every):
                if steps == "real":
                    bs, ks = p["b"]["steps"], p["ker"]["steps"]
                else:
                    bs = alone["b_g2_msm"][i % len(alone["b_g2_msm"])]
                    ks = alone["kernels"][(i // len(alone["b_g2_msm"])) % len(alone["kernels"])]
                if steps == "alone, late start":
                    # the alone steps, started as late as the card's episode made its
                    # first sync: its host time before it, beside the prestage's packing
                    late = before_sync(p["b"]["steps"]) - before_sync(bs)
                    bs = [Step(bs[0].gap + max(0.0, late), bs[0].kind, bs[0].device), *bs[1:]]
                res.append(replay(p, bs, ks, mode, args))
            m = {k: statistics.mean(r.get(k, 0.0) for r in res) / 1e3 for k in res[0]}
            print(
                f"| {steps} | {mode} | {m['b_g2_msm']:.1f} ({m['b_g2_msm'] / solo['b_g2_msm']:.2f}x) "
                f"| {m['b_g2_msm host']:.1f} / {m['b_g2_msm gil']:.1f} / {m['b_g2_msm wait']:.1f} "
                f"| {m['prestage+kernels']:.1f} |"
            )


if __name__ == "__main__":
    main()
