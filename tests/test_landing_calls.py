"""experiments/landing_calls.py: what held the device while results landed, read off a
kernel trace (ops [name, category, start µs, duration µs, stream, tid, launch µs]; calls
[name, tid, start µs, duration µs]; spans [thread, stage, proof, partition, start µs,
end µs]; py_samples as experiments/py_sampler.py records them)."""

from __future__ import annotations

import statistics

import pytest
from conftest import load_experiment

load_experiment("gpu_validation")  # what landing_calls imports from beside it
load_experiment("arrival_stall")
exp = load_experiment("landing_calls")

NAMES = ["k", "cudaHostRegister", "cudaHostUnregister"]


def kernel(start_ms: float, end_ms: float, launched_ms: float | None = None) -> list:
    at = start_ms if launched_ms is None else launched_ms
    return [0, 0, start_ms * 1e3, (end_ms - start_ms) * 1e3, 7, 1, at * 1e3]


def lock(tid: int, start_ms: float, end_ms: float) -> list:
    return [1, tid, start_ms * 1e3, (end_ms - start_ms) * 1e3]


def test_the_device_idle_inside_a_lock_is_told_from_the_rest():
    """A kernels stage open 0-100 ms; the device busy but for 40-60 ms and 90-95 ms; a
    lock runs 40-60 ms: idle through all of it, and 5 of the other 80 ms."""
    trace = {
        "names": NAMES,
        "ops": [kernel(0, 40), kernel(60, 90), kernel(95, 100)],
        "calls": [lock(2, 40, 60)],
        "spans": [[1, "kernels", 0, 0, 0.0, 100e3]],
    }
    during, idle, rest, rest_idle = exp.idle_during(trace, "cudaHostRegister")
    assert (during, idle) == pytest.approx((20e3, 20e3))
    assert (rest, rest_idle) == pytest.approx((80e3, 5e3))


def test_locks_asked_for_together_are_read_as_a_row():
    """Three threads ask within 2 ms and return at 14, 28, 42 ms (one at a time); a lone
    lock later is no row."""
    trace = {
        "names": NAMES,
        "ops": [],
        "calls": [lock(2, 0, 14), lock(3, 1, 28), lock(4, 2, 42), lock(2, 500, 514)],
        "spans": [],
    }
    assert exp.rows_of_locks(trace, together_us=5e3) == [pytest.approx([14e3, 28e3, 42e3])]
    assert exp.lone_locks(trace) == [pytest.approx(14e3)]  # only the later one stood alone


def test_the_queue_ahead_is_what_was_launched_and_not_yet_done():
    """One 10 ms kernel, launched at 0 and run 0-10 ms, in a stage open 0-10 ms: at a
    moment t the queue ahead is 10 - t ms, so its median is about 5 ms."""
    trace = {
        "names": NAMES,
        "ops": [kernel(0, 10, 0)],
        "calls": [],
        "spans": [[1, "kernels", 0, 0, 0.0, 10e3]],
    }
    ahead = exp.queued_ahead(trace, samples=2000)
    assert statistics.median(ahead) == pytest.approx(5e3, rel=0.1)
    assert min(ahead) >= 0 and max(ahead) <= 10e3


def test_a_late_sample_names_the_frames_that_moved_across_it():
    frames = ["/x/handoff.py:99:receive", "/x/prepared.py:48:query", "/x/threading.py:359:wait"]
    trace = {
        "py_samples": {
            "frames": frames,
            # [t µs, late µs, [[tid, top, own]...], runq µs]
            "samples": [
                [0.0, 50.0, [[1, 0, 0], [2, 2, 2]], 0],
                [1e3, 40.0, [[1, 0, 0], [2, 2, 2]], 0],
                [25e3, 23e3, [[1, 1, 1], [2, 2, 2]], 0],
            ],
        }
    }
    n, total, moved = exp.late_gaps(trace, late_us=10e3)
    assert (n, total) == (1, 23e3)
    assert moved == {("handoff.py:99:receive", "prepared.py:48:query"): 1}


def test_a_late_sample_at_the_end_of_a_long_collector_pass_is_counted():
    trace = {
        "py_samples": {
            "frames": [],
            # samples [t µs, late µs, threads, runq µs]; collector passes [t µs, µs, generation]
            "samples": [[25e3, 23e3, [], 0], [90e3, 15e3, [], 0], [99e3, 0.1, [], 0]],
            "gc": [[1.5e3, 22.8e3, 2], [40e3, 1e3, 0]],
        }
    }
    passes, within = exp.collector_passes(trace, long_us=10e3)
    assert passes == [(1.5e3, 22.8e3)]  # the short pass is left out
    assert within == 1  # the sample at 25 ms woke as the pass ended (24.3 ms); not the one at 90
    assert exp.collector_passes({"py_samples": {"samples": []}}, 10e3) == (None, 0)  # an older trace
