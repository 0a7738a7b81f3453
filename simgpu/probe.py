"""How much of the driver process's interpreter lock (GIL) a stage needs.

A prover driven from Python runs the Python parts of all its threads one at a time: the
GPU workers' kernel launches, prep's numpy glue, b_g2_msm building its point lists, the
synthesis pool's result thread unpickling a witness.  The model treats that lock as a
shared resource (`gil`, capacity 1, see model.contention); this module measures a stage's
use of it by running the stage once beside a thread that spins in pure Python:

* demand: the share of the stage's unloaded time during which it held the lock, read
  from how much the spinner lost: (1 - spinner rate / its rate alone) x (time beside
  the spinner / unloaded time);
* bound: how much the stage stretches next to a thread that always wants the lock,
  (time beside the spinner / unloaded time) - 1.  It can exceed the demand: a stage that
  drops and retakes the lock for every CUDA call waits each time for the switch
  interval (5 ms), a convoy that pure-Python neighbours cause in real runs too.

A stage that holds the lock throughout reads (1, 1); one that releases it (a GPU wait,
an arkworks MSM, a worker process) reads about (0, 0).

The spinner also takes a core.  So that a stage's stretch counts only the lock, not a
core it lost (on a small machine, or for a stage with many threads), the reference
time is the stage's time beside the same spinner run as a separate process
(`spinning_process`): as much CPU pressure, no lock in common.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeReading:
    """One run of a stage beside the spinner: its time, and the spinner's rate relative
    to its rate alone."""

    seconds: float
    spinner_rate: float


def _spin(stop: threading.Event, out: list[int]) -> None:
    count = 0
    # Pure bytecode, checking the event only every 1000 turns: the spinner wants the
    # interpreter all the time and gives it up only when the eval loop is asked to.
    while not stop.is_set():
        for _ in range(1000):
            count += 1
    out.append(count)


@contextmanager
def _spinner() -> Iterator[Callable[[], float]]:
    stop = threading.Event()
    out: list[int] = []
    th = threading.Thread(target=_spin, args=(stop, out), name="gil-probe", daemon=True)
    t0 = time.perf_counter()
    th.start()
    elapsed = [0.0]
    try:
        yield lambda: out[0] / elapsed[0]
    finally:
        stop.set()
        th.join()
        elapsed[0] = time.perf_counter() - t0


def _spin_until(stop: Any) -> None:
    while not stop.is_set():
        for _ in range(1000):
            pass


@contextmanager
def spinning_process() -> Iterator[None]:
    """A pure-Python spinner in its own process: the probe's CPU pressure without its
    lock.  Stages timed inside give the reference for gil_use."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_spin_until, args=(stop,), name="gil-probe-control", daemon=True)
    proc.start()
    time.sleep(0.2)  # spawn: let it start spinning
    try:
        yield
    finally:
        stop.set()
        proc.join(5)
        if proc.is_alive():
            proc.kill()


class InterpreterProbe:
    """Measures stages beside a pure-Python spinner; `alone_rate` is the spinner's
    turns per second with nothing else running."""

    def __init__(self, seconds: float = 0.3) -> None:
        with _spinner() as rate:
            time.sleep(seconds)
        self.alone_rate = rate()

    def measure(
        self, fn: Callable[[], Any], sync: Callable[[], None] = lambda: None
    ) -> tuple[Any, ProbeReading]:
        """Run fn (device synchronised around it) beside the spinner."""
        sync()
        with _spinner() as rate:
            t = time.perf_counter()
            out = fn()
            sync()
            seconds = time.perf_counter() - t
        return out, ProbeReading(seconds, rate() / self.alone_rate)


def gil_use(reference_seconds: float, reading: ProbeReading) -> tuple[float, float]:
    """(demand, bound) of a stage on the interpreter lock, each within [0, 1]; the
    reference is its time beside a spinning process (else its unloaded time)."""
    if reference_seconds <= 0:
        return 0.0, 0.0
    stretch = reading.seconds / reference_seconds
    demand = (1.0 - min(1.0, reading.spinner_rate)) * stretch
    bound = stretch - 1.0
    return min(1.0, max(0.0, demand)), min(1.0, max(0.0, bound))
