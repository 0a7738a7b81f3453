"""experiments/prestage_scene.py plays calibrate's scene of a prestage started with the
other worker's b_g2_msm in the model; here on the tiny profile, worked by hand."""

from __future__ import annotations

import pytest
from conftest import load_experiment, tiny_profile

load_experiment("copier_ab")  # the model's scenes of two workers, which prestage_scene plays
scene = load_experiment("prestage_scene")


def test_a_prestage_beside_b_g2_msm_stretches_by_its_bound_share_of_the_device():
    # prestage 0.25 s, 0.4 of it bound to the device; b_g2_msm on the device throughout.
    # Together the device's bound part runs at half speed: 0.25 * (0.6 + 0.4 * 2) = 0.35 s.
    prof = tiny_profile(
        **{
            "stages.prestage": {"uses": {"gpu": {"demand": 1.0, "bound": 0.4}}},
            "stages.b_g2_msm": {"on": "gpu", "uses": {"gpu": {"demand": 1.0, "bound": 1.0}}},
        }
    )
    got = scene.predicted(prof, 1024)
    assert got["prestage alone"] == pytest.approx(0.25)
    assert got["prestage beside b_g2_msm"] == pytest.approx(0.35)
    # b_g2_msm lost half of the 0.35 s it shared: 0.5 + 0.35 / 2
    assert got["b_g2_msm beside prestage"] == pytest.approx(0.675)


def test_calibrates_reading_of_the_scene_is_read_where_it_was_kept(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        "[calibration.device_queue]\n"
        "one_prestage_beside_b_g2_msm = [0.0076, 0.0112]\n"
        "b_g2_msm_beside_one_prestage = [0.0597, 0.0713]\n"
    )
    assert scene.measured(str(path)) == {
        "prestage alone": 0.0076,
        "prestage beside b_g2_msm": 0.0112,
        "b_g2_msm beside prestage": 0.0713,
    }
    path.write_text("[calibration]\n")
    assert scene.measured(str(path)) == {}
