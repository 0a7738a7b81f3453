"""The driver's interpreter lock, read as calibrate reads it: request by request.

A prover driven from Python runs its stages' Python one thread at a time, and the lock
passes like a single-key washroom's: a thread lets it go at every CUDA call or compiled
loop and asks for it back, waiting for whoever holds it then.  `measure_gil` counts each
driver stage's asks (beside a thread of Python that makes every ask wait: continuous, or
in bursts like the pipeline's stages) and times the wait the stage makes others' asks
meet (a probe asking at random moments); simgpu.calibrate.fit.fit_gil reads them into
the `gil` resource (simgpu.model.contention, "The interpreter lock").
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import numpy as np

from simgpu.calibrate.chain import PRESSURE_STAGES, driver_chain, spanned


class _Neighbour:
    """A thread beside the stage being measured, for a `with` block: started on entry,
    stopped (its `_stop` set) and joined on exit.  Subclasses give `_run`."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class _BytecodeLoop(_Neighbour):
    """A thread that runs pure Python bytecode until stopped, counting its rounds.  As
    it stands it holds the interpreter lock but at the switch interval: what another
    driver thread's Python costs a stage at worst (every request the stage makes waits
    the whole interval), and what a stage's Python costs the others (the loop's rounds
    lost while the stage runs).  With `hold` it runs in bursts of that many seconds and
    sleeps `rest` between them, letting the lock go: a neighbour like the pipeline's
    driver stages, beside which a request waits about a tenth of a millisecond, as in
    the pipeline, and a launch loop's queued kernels can hide part of each wait."""

    def __init__(self, hold: float | None = None, rest: float = 0.0) -> None:
        super().__init__("bytecode_loop")
        self.rounds = 0
        self.hold, self.rest = hold, rest

    def _run(self) -> None:
        rounds = 0
        now, hold = time.perf_counter, self.hold
        until = math.inf
        while not self._stop.is_set():
            if hold is not None:
                until = now() + hold
            while True:
                x = 0
                for i in range(200):  # bytecode only: no call that releases the lock
                    x += i
                rounds += 1
                if hold is None or now() >= until or self._stop.is_set():
                    break
            self.rounds = rounds
            if hold is not None:
                time.sleep(self.rest)

    def rate(self, seconds: float) -> float:
        """Rounds a second while this thread sleeps (the loop alone)."""
        r0, t0 = self.rounds, time.perf_counter()
        time.sleep(seconds)
        return (self.rounds - r0) / (time.perf_counter() - t0)


#: The bursty neighbour measure_gil times each stage beside (seconds held, then rested):
#: a request beside it waits tens of microseconds, as beside the pipeline's driver stages
#: (31-118 us on the thirty-fourth lease).
GIL_BURST = (2e-4, 2e-4)


class _WakeProbe(_Neighbour):
    """A thread that asks for the interpreter lock at random moments and notes how long
    each ask waited, like a shopper timing the queue at random visits: it sleeps a
    short random while (exponential: its visits fall at random in anyone's pattern),
    and on waking it needs the lock back, so how late it wakes beyond its own lateness
    alone is the wait a request for the lock meets then.  It holds the lock for a few
    microseconds a visit, so it barely slows what it watches."""

    def __init__(self, mean_sleep: float = 3e-4, seed: int = 0) -> None:
        super().__init__("wake_probe")
        self.mean_sleep = mean_sleep
        self.wakes: list[tuple[float, float]] = []  # (when it woke, how late)
        self._rng = np.random.default_rng(seed)

    def _run(self) -> None:
        sleeps = iter(self._rng.exponential(self.mean_sleep, 1 << 22))
        wakes, now, sleep = self.wakes, time.perf_counter, time.sleep
        while not self._stop.is_set():
            dt = next(sleeps)
            t = now()
            sleep(dt)
            woke = now()
            wakes.append((woke, woke - t - dt))

    def mean_late(self, a: float, b: float) -> float | None:
        """Mean lateness of the wakes between a and b (None: none fell there)."""
        late = [x for t, x in self.wakes if a <= t <= b]
        return statistics.fmean(late) if late else None


def measure_gil(
    ex: Any, n: int, log: Callable[[str], None], repeats: int = 6
) -> tuple[dict[str, tuple[float, float, float, float, float]], tuple[float, float]]:
    """How each driver stage (PRESSURE_STAGES) shares the interpreter lock, on fresh
    partitions.  Returns (stage -> (fastest alone, fastest beside a thread of pure
    Python, the share of its rounds that thread lost while the stage ran, the mean wait
    a request for the lock met while the stage ran, fastest beside a bursty thread of
    Python (GIL_BURST)), (the wait a request meets beside the thread of pure Python: the
    interpreter's switch interval as this host serves it, the wait beside the bursty
    one)), medians of `repeats` where not the fastest.

    The lock is handed over per request, like a single-key washroom: a thread that let
    it go (at a CUDA call, a compiled loop's release) asks again, and waits for
    whoever holds it to let go.  Beside a thread of Python (`_BytecodeLoop`) each of a
    stage's asks waits what that thread makes it wait, less whatever work the stage had
    queued on the device meanwhile, so its slowdown there counts its asks: all of them
    beside the continuous thread (a 5 ms wait outlasts any queue), those the device
    cannot cover beside the bursty one.  A `_WakeProbe` beside the stage alone times the
    wait the stage makes others' asks meet.  simgpu.calibrate.fit.fit_gil reads them into
    the `gil` resource."""
    seeds = iter(range(1700, 10**9))
    alone: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    beside: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    burst: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    held: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    waits: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    loop_waits: list[float] = []
    burst_waits: list[float] = []
    driver_chain(ex, n, next(seeds))  # warm
    for rep in range(repeats):
        for stage, dt in driver_chain(ex, n, next(seeds)).items():
            alone[stage].append(dt)
        spans: dict[str, tuple[float, float]] = {}
        windows: list[tuple[float, float]] = []
        with _WakeProbe(seed=rep) as probe:
            time.sleep(0.05)  # its lateness with nothing else asking
            t_base = time.perf_counter()
            driver_chain(ex, n, next(seeds), spanned(spans))
            for loop in (_BytecodeLoop(), _BytecodeLoop(*GIL_BURST)):
                with loop:
                    time.sleep(0.002)
                    t0 = time.perf_counter()
                    time.sleep(0.05)
                    windows.append((t0, time.perf_counter()))
        base = probe.mean_late(t_base - 0.05, t_base) or 0.0
        for into, (a, b) in zip((loop_waits, burst_waits), windows, strict=True):
            if (late := probe.mean_late(a, b)) is not None:
                into.append(max(0.0, late - base))
        for stage, (a, b) in spans.items():
            late = probe.mean_late(a, b)
            if late is not None:
                waits[stage].append(max(0.0, late - base))
        with _BytecodeLoop() as loop:
            free_rate = loop.rate(0.05)

            def around(
                stage: str, run: Callable[[], Any], loop: _BytecodeLoop = loop, free_rate: float = free_rate
            ) -> Any:
                r0, t0 = loop.rounds, time.perf_counter()
                got = run()
                rate = (loop.rounds - r0) / max(1e-9, time.perf_counter() - t0)
                held[stage].append(min(1.0, max(0.0, 1.0 - rate / free_rate)) if free_rate > 0 else 0.0)
                return got

            for stage, dt in driver_chain(ex, n, next(seeds), around).items():
                beside[stage].append(dt)
        with _BytecodeLoop(*GIL_BURST):
            for stage, dt in driver_chain(ex, n, next(seeds)).items():
                burst[stage].append(dt)
    out = {
        s: (
            min(alone[s]),
            min(beside[s]),
            statistics.median(held[s]),
            statistics.median(waits[s] or [0.0]),
            min(burst[s]),
        )
        for s in PRESSURE_STAGES
    }
    loop_wait = statistics.median(loop_waits) if loop_waits else 0.0
    burst_wait = statistics.median(burst_waits) if burst_waits else 0.0
    log(
        f"  a request for the interpreter lock waits {loop_wait * 1e3:.2f} ms beside a Python thread,"
        f" {burst_wait * 1e6:.0f} us beside a bursty one"
    )
    for s, (a, b, d, w, bb) in out.items():
        log(
            f"  {s}: {a * 1e3:.1f} ms alone, {b * 1e3:.1f} ms beside a Python thread, which lost {d:.0%},"
            f" {bb * 1e3:.1f} ms beside a bursty one; a request beside it waits {w * 1e6:.0f} us"
        )
    return out, (loop_wait, burst_wait)
