"""experiments/arrival_stall.py: how much of the time a GPU stage is open the device
stands idle just before a synthesis ends, read off a kernel trace (ops are [name,
category, start µs, duration µs, ...]; spans [thread, stage, proof, partition, start µs,
end µs])."""

from __future__ import annotations

import pytest
from conftest import load_experiment

load_experiment("gpu_validation")  # what arrival_stall imports from beside it
exp = load_experiment("arrival_stall")


def kernel(start_ms: float, end_ms: float) -> list:
    return ["k", 0, start_ms * 1e3, (end_ms - start_ms) * 1e3, 7, 1, start_ms * 1e3]


def test_an_idle_stretch_before_a_result_lands_is_counted_near_it():
    """A kernels stage open 0-1000 ms, the device busy all of it but 800-900 ms; one
    synthesis ends at 900 ms.  With a 150 ms window the 100 idle ms fall in the 150 ms
    before that end (750-900), none elsewhere: 100 ms beyond the elsewhere rate."""
    trace = {
        "ops": [kernel(0, 800), kernel(900, 1000)],
        "spans": [[1, "kernels", 0, 0, 0.0, 1e6], [2, "synthesis", 0, 1, 0.0, 900e3]],
    }
    got = exp.idle_near_arrivals(trace, window_us=150e3)
    assert got["near_open"] == pytest.approx(150e3) and got["far_open"] == pytest.approx(850e3)
    assert got["near_idle"] == pytest.approx(100e3)
    assert got["far_idle"] == pytest.approx(0.0)
    assert got["syntheses"] == 1


def test_idle_far_from_any_result_is_counted_elsewhere():
    trace = {
        "ops": [kernel(0, 200), kernel(300, 1000)],
        "spans": [[1, "b_g2_msm", 0, 0, 0.0, 1e6], [2, "synthesis", 0, 1, 0.0, 990e3]],
    }
    got = exp.idle_near_arrivals(trace, window_us=50e3)
    assert got["far_idle"] == pytest.approx(100e3) and got["near_idle"] == pytest.approx(0.0)


def test_two_results_landing_together_count_their_window_once():
    """Overlapping windows before two ends are one stretch of time, not two."""
    trace = {
        "ops": [kernel(0, 1000)],
        "spans": [[1, "kernels", 0, 0, 0.0, 1e6]]
        + [[2, "synthesis", 0, i, 0.0, end] for i, end in enumerate((900e3, 920e3))],
    }
    got = exp.idle_near_arrivals(trace, window_us=150e3)
    assert got["near_open"] == pytest.approx(170e3) and got["syntheses"] == 2
