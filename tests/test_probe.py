"""Measuring a stage's share of the driver's interpreter lock (simgpu.probe)."""

from __future__ import annotations

import time

import pytest

from simgpu.probe import InterpreterProbe, ProbeReading, gil_use, spinning_process


def _python_loop() -> None:
    total = 0
    for i in range(2_000_000):
        total += i


def _reference(fn) -> float:
    with spinning_process():
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t


def test_pure_python_needs_the_lock_and_sleeping_does_not():
    probe = InterpreterProbe()
    _, busy = probe.measure(_python_loop)
    demand, bound = gil_use(_reference(_python_loop), busy)
    assert demand > 0.5 and bound > 0.4  # two Python threads take turns

    _, idle = probe.measure(lambda: time.sleep(0.2))
    demand, bound = gil_use(0.2, idle)
    assert demand < 0.2 and bound < 0.2


def test_the_reading_is_relative_to_the_reference():
    # 1 s beside the process spinner, 1.5 s beside the thread, the spinner kept 60% of
    # its pace: the stage held the lock 0.4 x 1.5 = 60% of its reference time.
    assert gil_use(1.0, ProbeReading(1.5, 0.6)) == pytest.approx((0.6, 0.5))
    assert gil_use(1.0, ProbeReading(3.0, 0.1)) == (1.0, 1.0)  # shares stay fractions
    assert gil_use(0.0, ProbeReading(1.0, 0.5)) == (0.0, 0.0)
