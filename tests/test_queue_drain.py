"""experiments/queue_drain.py: how long an unlock would wait for the device's queued
work, read off a kernel trace (ops are [name, category, start µs, duration µs, stream,
thread, launch µs])."""

from __future__ import annotations

import statistics

import pytest
from conftest import load_experiment

drains = load_experiment("queue_drain").drains


def test_one_op_launched_ahead_drains_linearly():
    # launched at 0, runs 0-1000 µs: an unlock at t waits 1000 - t µs, 0.5 ms on average
    xs = drains([["k", 0, 0.0, 1000.0, 7, 1, 0.0]], samples=4000)
    assert statistics.mean(xs) == pytest.approx(0.5e-3, rel=0.05)
    assert max(xs) <= 1e-3 and min(xs) >= 0.0


def test_work_launched_later_is_not_waited_for():
    # the second op is launched at 900 µs: an unlock before it waits only for the first
    ops = [["k", 0, 0.0, 100.0, 7, 1, 0.0], ["k", 0, 900.0, 100.0, 7, 1, 900.0]]
    xs = drains(ops, samples=4000)
    # waits happen only in 0-100 and 900-1000 µs, a fifth of the span, 50 µs on average there
    assert statistics.mean(xs) == pytest.approx(0.2 * 50e-6, rel=0.15)


def test_ops_with_no_launch_on_record_are_left_out():
    assert drains([["k", 0, 0.0, 1000.0, 7, 1, None]], samples=10) == []
