"""experiments/device_queue_at.py: each pairing's stretch and its two paces' sum, worked
by hand on a queue as calibrate measures it and as a profile stores it."""

from __future__ import annotations

import pytest
from conftest import load_experiment

device_queue_at = load_experiment("device_queue_at")


def test_two_stages_that_split_a_device_they_fill_have_paces_adding_to_one() -> None:
    # b_g2_msm 2x as long beside the loop, the loop's rounds 2x as long beside it
    queue = {"b_g2_msm beside gpu_load": (0.05, 0.10), "gpu_load beside b_g2_msm": (0.2, 0.4)}
    rows = {k: (s, both) for k, s, both in device_queue_at.paces(queue)}
    assert rows["b_g2_msm beside gpu_load"] == pytest.approx((2.0, 1.0))
    assert rows["gpu_load beside b_g2_msm"] == pytest.approx((2.0, 1.0))


def test_a_profiles_underscored_keys_read_the_same_and_a_one_sided_pairing_has_no_sum() -> None:
    queue = {
        "kernels_beside_copy_load": (0.1, 0.125),  # 1/1.25 + 0.8 = 1.6: each fills the other's gaps
        "copy_load_beside_kernels": (0.008, 0.010),
        "kernels_beside_one_prestage": (0.1, 0.11),
    }
    rows = {k: (s, both) for k, s, both in device_queue_at.paces(queue)}
    assert rows["kernels beside copy_load"] == pytest.approx((1.25, 1.6))
    assert rows["kernels beside one_prestage"][0] == pytest.approx(1.1)
    assert rows["kernels beside one_prestage"][1] is None
